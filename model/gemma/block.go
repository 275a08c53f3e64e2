package gemma

import (
	"context"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
)

// Block is one transformer layer.
type Block struct {
	i     int
	m     *Model
	l     *Layer
	local bool          // a sliding-window layer
	refs  []offload.Ref // Weights(), listed once
}

var _ model.Block = (*Block)(nil)

func (b *Block) Index() int { return b.i }

// Weights lists the block's tensors for the prefetcher. The slice is the
// block's own: callers must not modify it.
func (b *Block) Weights() []offload.Ref { return b.refs }

func (b *Block) weights() []offload.Ref {
	l := b.l
	refs := []offload.Ref{l.AttnNorm, l.Q, l.K, l.V, l.O, l.AttnPostNorm, l.FFNNorm, l.Gate, l.Up, l.Down, l.FFNPostNorm}
	for _, r := range []*offload.Ref{l.QNorm, l.KNorm} {
		if r != nil {
			refs = append(refs, *r)
		}
	}
	return refs
}

// scratch slots in model.State used by a block (0 is the head's)
const (
	sXB = iota + 1
	sQ
	sK
	sV
	sAtt
	sXB2
	sHB
	sHB2
	sScores
)

// pins gathers the weights of one Forward so they are released together (13
// at most: 4 norms, 7 matrices, 2 Q/K norms).
type pins struct {
	p [16]offload.Pinned
	n int
}

func (p *pins) matrix(ctx context.Context, w offload.Store, r offload.Ref) (kernels.Weight, error) {
	m, pin, err := model.Matrix(ctx, w, r)
	if err == nil {
		p.p[p.n], p.n = pin, p.n+1
	}
	return m, err
}

func (p *pins) vector(ctx context.Context, w offload.Store, r offload.Ref, buf *[]float32) ([]float32, error) {
	v, pin, err := model.Vector(ctx, w, r, buf)
	if err == nil {
		p.p[p.n], p.n = pin, p.n+1
	}
	return v, err
}

func (p *pins) release() {
	for _, x := range p.p[:p.n] {
		x.Release()
	}
}

// Forward runs attention and the feed-forward network over every row of
// st.Hidden, in place:
//
//	x += postnorm_attn(attention(norm_attn(x)))
//	x += postnorm_ffn(down(gelu(gate(xn)) · up(xn))),  xn = norm_ffn(x)
func (b *Block) Forward(ctx context.Context, st *model.State, w offload.Store) error {
	m, p, l := b.m, &b.m.p, b.l
	n, dim, hd := st.Batch.Len(), p.Dim, p.HeadDim
	qd, kvd := p.Heads*hd, p.KVHeads*hd
	var ps pins
	defer ps.release()
	var bufs [6][]float32 // decoded copies of non-F32 vectors (GGUF norms are F32)
	vec := func(r offload.Ref, i int) ([]float32, error) { return ps.vector(ctx, w, r, &bufs[i]) }
	attnNorm, err := vec(l.AttnNorm, 0)
	if err != nil {
		return err
	}
	var qn, kn []float32
	if l.QNorm != nil {
		if qn, err = vec(*l.QNorm, 1); err != nil {
			return err
		}
	}
	if l.KNorm != nil {
		if kn, err = vec(*l.KNorm, 2); err != nil {
			return err
		}
	}
	var wq, wk, wv, wo kernels.Weight
	for _, x := range []struct {
		dst *kernels.Weight
		r   offload.Ref
	}{{&wq, l.Q}, {&wk, l.K}, {&wv, l.V}, {&wo, l.O}} {
		if *x.dst, err = ps.matrix(ctx, w, x.r); err != nil {
			return err
		}
	}

	x := st.Hidden[:n*dim]
	xb := st.Scratch(sXB, n*dim)
	kernels.RMSNormRows(m.pool, xb, x, n, attnNorm, p.Eps)
	q, k, v := st.Scratch(sQ, n*qd), st.Scratch(sK, n*kvd), st.Scratch(sV, n*kvd)
	kernels.MatMul(m.pool, q, wq, xb, n)
	kernels.MatMul(m.pool, k, wk, xb, n)
	kernels.MatMul(m.pool, v, wv, xb, n)
	if qn != nil { // per-head RMSNorm: every head of every row is a row of HeadDim
		kernels.RMSNormRows(m.pool, q, q, n*p.Heads, qn, p.Eps)
	}
	if kn != nil {
		kernels.RMSNormRows(m.pool, k, k, n*p.KVHeads, kn, p.Eps)
	}
	base, factors := p.RopeBase, p.GlobalFactors
	if b.local {
		base, factors = p.LocalRopeBase, p.LocalFactors
	}
	pos := st.Batch.Positions[:n]
	if factors != nil {
		kernels.RoPEScaledRows(m.pool, q, pos, p.Heads, hd, p.RopeDim, base, factors, p.RopeStyle)
		kernels.RoPEScaledRows(m.pool, k, pos, p.KVHeads, hd, p.RopeDim, base, factors, p.RopeStyle)
	} else {
		kernels.RoPERows(m.pool, q, pos, p.Heads, hd, p.RopeDim, base, p.RopeStyle)
		kernels.RoPERows(m.pool, k, pos, p.KVHeads, hd, p.RopeDim, base, p.RopeStyle)
	}
	kernels.Scale(q, p.AttnScale) // llama.cpp scales Q after RoPE and attends with scale 1
	layer := st.KV.Layer(b.i)
	layer.Put(k, v)

	// Attention, one run of consecutive rows of one sequence at a time;
	// local layers narrow the pass's (full) mask to their window.
	var lm *LocalMask
	if b.local {
		lm = m.masks.Get().(*LocalMask)
		defer m.masks.Put(lm)
		lm.Build(st.KV.Mask(), p.Window)
	}
	shape := kernels.AttnShape{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: hd, Scale: 1, Softcap: p.AttnSoftcap}
	att := st.Scratch(sAtt, n*qd)
	for _, run := range st.KV.Runs() {
		kv := layer.View(run.Seq)
		lo, hi := run.Start, run.Start+run.Rows
		mask := run.Mask
		if lm != nil {
			mask = lm.Rows(lo, hi)
		}
		scores := st.Scratch(sScores, kernels.AttentionPoolScratch(m.pool, kv, run.Rows))
		kernels.AttentionPool(m.pool, att[lo*qd:hi*qd], q[lo*qd:hi*qd], run.Rows, kv, mask, shape, scores)
	}
	xb2 := st.Scratch(sXB2, n*dim)
	kernels.MatMul(m.pool, xb2, wo, att, n)
	postAttn, err := vec(l.AttnPostNorm, 3)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb2, xb2, n, postAttn, p.Eps)
	kernels.AddRows(m.pool, x, xb2, n)

	// Feed-forward: x += postnorm(down(gelu(gate(xn)) * up(xn))).
	ffnNorm, err := vec(l.FFNNorm, 4)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb, x, n, ffnNorm, p.Eps)
	var wg, wu, wd kernels.Weight
	for _, x := range []struct {
		dst *kernels.Weight
		r   offload.Ref
	}{{&wg, l.Gate}, {&wu, l.Up}, {&wd, l.Down}} {
		if *x.dst, err = ps.matrix(ctx, w, x.r); err != nil {
			return err
		}
	}
	hb, hb2 := st.Scratch(sHB, n*p.Hidden), st.Scratch(sHB2, n*p.Hidden)
	kernels.MatMul(m.pool, hb, wg, xb, n)
	kernels.MatMul(m.pool, hb2, wu, xb, n)
	kernels.GeGLURows(m.pool, hb, hb, hb2, n)
	kernels.MatMul(m.pool, xb, wd, hb, n)
	postFFN, err := vec(l.FFNPostNorm, 5)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb, xb, n, postFFN, p.Eps)
	kernels.AddRows(m.pool, x, xb, n)
	return nil
}
