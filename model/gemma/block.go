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
	return model.Refs(&l.AttnNorm, &l.Q, &l.K, &l.V, &l.O, &l.AttnPostNorm, &l.FFNNorm, &l.Gate, &l.Up, &l.Down, &l.FFNPostNorm, l.QNorm, l.KNorm)
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

// Forward runs attention and the feed-forward network over every row of
// st.Hidden, in place (the last block: over the rows of st.Batch.Outputs
// once the KV cache has every row; see model.Outputs):
//
//	x += postnorm_attn(attention(norm_attn(x)))
//	x += postnorm_ffn(down(gelu(gate(xn)) · up(xn))),  xn = norm_ffn(x)
func (b *Block) Forward(ctx context.Context, st *model.State, w offload.Store) error {
	m, p, l := b.m, &b.m.p, b.l
	n, dim, hd := st.Batch.Len(), p.Dim, p.HeadDim
	qd, kvd := p.Heads*hd, p.KVHeads*hd
	var ps model.Pins
	defer ps.Release()
	var bufs [6][]float32 // decoded copies of non-F32 vectors (GGUF norms are F32)
	vec := func(r *offload.Ref, i int) ([]float32, error) { return ps.Vector(ctx, w, r, &bufs[i]) }
	attnNorm, err := vec(&l.AttnNorm, 0)
	if err != nil {
		return err
	}
	qn, err := vec(l.QNorm, 1) // nil when absent (gemma2)
	if err != nil {
		return err
	}
	kn, err := vec(l.KNorm, 2)
	if err != nil {
		return err
	}
	var wq, wk, wv, wo kernels.Weight
	for _, x := range []struct {
		dst *kernels.Weight
		r   offload.Ref
	}{{&wq, l.Q}, {&wk, l.K}, {&wv, l.V}, {&wo, l.O}} {
		if *x.dst, err = ps.Matrix(ctx, w, x.r); err != nil {
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
	base, factors := p.RopeBase, p.GlobalFactors
	if b.local {
		base, factors = p.LocalRopeBase, p.LocalFactors
	}
	model.QKRoPE{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: hd, RopeDim: p.RopeDim, Base: base,
		Factors: factors, Style: p.RopeStyle, QNorm: qn, KNorm: kn, Eps: p.Eps}.Apply(m.pool, q, k, st.Batch.Positions, n)
	kernels.Scale(q, p.AttnScale) // llama.cpp scales Q after RoPE and attends with scale 1
	layer := st.Pass.Layer(b.i)
	layer.Put(k, v)
	// Past the KV cache the last block computes only the rows that need
	// logits (model.Outputs); n is their count from here on.
	outs := model.Outputs(st, b.i == p.Layers-1)
	if outs != nil {
		n = len(outs)
		model.GatherRows(q, qd, outs)
		model.GatherRows(x, dim, outs)
		x, xb = x[:n*dim], xb[:n*dim]
	}

	// Attention, one run of consecutive rows of one sequence at a time;
	// local layers narrow the pass's (full) mask to their window.
	var lm *LocalMask
	if b.local {
		lm = m.masks.Get().(*LocalMask)
		defer m.masks.Put(lm)
		lm.Build(st.Pass.Mask(), p.Window)
	}
	var rowMask func(lo, hi int) *kernels.Mask
	if lm != nil {
		rowMask = lm.Rows
	}
	shape := kernels.AttnShape{Heads: p.Heads, KVHeads: p.KVHeads, HeadDim: hd, Scale: 1, Softcap: p.AttnSoftcap}
	att := st.Scratch(sAtt, n*qd)
	model.AttendRows(m.pool, st, layer, att, q, shape, rowMask, sScores, outs)
	xb2 := st.Scratch(sXB2, n*dim)
	kernels.MatMul(m.pool, xb2, wo, att, n)
	postAttn, err := vec(&l.AttnPostNorm, 3)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb2, xb2, n, postAttn, p.Eps)
	kernels.AddRows(m.pool, x, xb2, n)

	// Feed-forward: x += postnorm(down(gelu(gate(xn)) * up(xn))).
	ffnNorm, err := vec(&l.FFNNorm, 4)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb, x, n, ffnNorm, p.Eps)
	var wg, wu, wd kernels.Weight
	for _, x := range []struct {
		dst *kernels.Weight
		r   offload.Ref
	}{{&wg, l.Gate}, {&wu, l.Up}, {&wd, l.Down}} {
		if *x.dst, err = ps.Matrix(ctx, w, x.r); err != nil {
			return err
		}
	}
	hb, hb2 := st.Scratch(sHB, n*p.Hidden), st.Scratch(sHB2, n*p.Hidden)
	kernels.MatMul(m.pool, hb, wg, xb, n)
	kernels.MatMul(m.pool, hb2, wu, xb, n)
	kernels.GeGLURows(m.pool, hb, hb, hb2, n)
	kernels.MatMul(m.pool, xb, wd, hb, n)
	postFFN, err := vec(&l.FFNPostNorm, 5)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb, xb, n, postFFN, p.Eps)
	kernels.AddRows(m.pool, x, xb, n)
	if outs != nil {
		model.ScatterRows(st.Hidden, dim, outs)
	}
	return nil
}
