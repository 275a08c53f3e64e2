package llama

import (
	"context"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
)

// Block is one transformer layer.
type Block struct {
	i    int
	m    *Model
	l    *Layer
	refs []offload.Ref // Weights(), listed once
}

var _ model.Block = (*Block)(nil)

func (b *Block) Index() int { return b.i }

// Weights lists the block's tensors for the prefetcher. The slice is the
// block's own: callers must not modify it.
func (b *Block) Weights() []offload.Ref { return b.refs }

func (b *Block) weights() []offload.Ref {
	// In the order Forward acquires them: a store streaming tensor by
	// tensor (offload's ssd tier under a small budget) reads them in this
	// order, so the read ahead is the one the block needs next.
	// Q, K, V and Gate are absent from fused layers.
	l := b.l
	return model.Refs(&l.AttnNorm, l.Attn.QKV, &l.Attn.Q, &l.Attn.K, &l.Attn.V, &l.Attn.O,
		l.Attn.QBias, l.Attn.KBias, l.Attn.VBias, l.Attn.OBias, l.Attn.QNorm, l.Attn.KNorm,
		&l.FFNNorm, &l.Gate, &l.Up, &l.Down)
}

// scratch slots in model.State used by a block
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
	sNorm
	sLoRAU  // adapter: A·x
	sLoRAT  // adapter: B·(A·x)
	sQKV    // fused Q|K|V product
	sGateUp // fused gate|up product
)

// addBias adds bias to each of the n rows of x; a nil bias is no bias.
func addBias(x, bias []float32, n int) {
	if bias == nil {
		return
	}
	d := len(bias)
	for r := range n {
		kernels.Add(x[r*d:(r+1)*d], bias)
	}
}

// Forward runs attention and MLP over every row of st.Hidden, in place
// (the last block: over the rows of st.Batch.Outputs once the KV cache has
// every row; see model.Outputs).
func (b *Block) Forward(ctx context.Context, st *model.State, w offload.Store) error {
	m, a, l := b.m, b.m.arch, b.l
	n, dim, qd, kvd := st.Batch.Len(), a.Dim, m.qDim(), m.kvDim()
	var pins model.Pins
	defer pins.Release()
	var ad *layerAdapter // nil: the base model alone
	if st.Adapter != "" {
		set, err := m.adapter(st.Adapter)
		if err != nil {
			return err
		}
		ad = &set.layers[b.i]
	}
	var normBuf []float32
	attnNorm, err := pins.Vector(ctx, w, &l.AttnNorm, &normBuf)
	if err != nil {
		return err
	}
	var wq, wk, wv, wqkv kernels.Weight
	if l.Attn.QKV != nil {
		if wqkv, err = pins.Matrix(ctx, w, *l.Attn.QKV); err != nil {
			return err
		}
	} else {
		if wq, err = pins.Matrix(ctx, w, l.Attn.Q); err != nil {
			return err
		}
		if wk, err = pins.Matrix(ctx, w, l.Attn.K); err != nil {
			return err
		}
		if wv, err = pins.Matrix(ctx, w, l.Attn.V); err != nil {
			return err
		}
	}
	wo, err := pins.Matrix(ctx, w, l.Attn.O)
	if err != nil {
		return err
	}
	var qbBuf, kbBuf, vbBuf, obBuf, qnBuf, knBuf []float32 // used only by non-F32 vectors
	var qb, kb, vb, ob, qn, kn []float32
	for _, o := range []struct {
		dst *[]float32
		r   *offload.Ref
		buf *[]float32
	}{{&qb, l.Attn.QBias, &qbBuf}, {&kb, l.Attn.KBias, &kbBuf}, {&vb, l.Attn.VBias, &vbBuf}, {&ob, l.Attn.OBias, &obBuf}, {&qn, l.Attn.QNorm, &qnBuf}, {&kn, l.Attn.KNorm, &knBuf}} {
		if *o.dst, err = pins.Vector(ctx, w, o.r, o.buf); err != nil {
			return err
		}
	}

	x := st.Hidden[:n*dim]
	xb := st.Scratch(sXB, n*dim)
	kernels.RMSNormRows(m.pool, xb, x, n, attnNorm, a.Eps)
	q, k, v := st.Scratch(sQ, n*qd), st.Scratch(sK, n*kvd), st.Scratch(sV, n*kvd)
	if l.Attn.QKV != nil {
		// One product into rows of Q|K|V, split into the three buffers.
		w3 := qd + 2*kvd
		qkv := st.Scratch(sQKV, n*w3)
		kernels.MatMul(m.pool, qkv, wqkv, xb, n)
		for r := range n {
			row := qkv[r*w3 : (r+1)*w3]
			copy(q[r*qd:(r+1)*qd], row[:qd])
			copy(k[r*kvd:(r+1)*kvd], row[qd:qd+kvd])
			copy(v[r*kvd:(r+1)*kvd], row[qd+kvd:])
		}
	} else {
		// One quantization of xb for the three when they take Q8_K
		// activations (K-quant files).
		kernels.MatMulShared(m.pool, xb, n, kernels.Product{Dst: q, W: wq}, kernels.Product{Dst: k, W: wk}, kernels.Product{Dst: v, W: wv})
	}
	if ad != nil {
		applyAll(ad.q, m.pool, st, q, xb, n)
		applyAll(ad.k, m.pool, st, k, xb, n)
		applyAll(ad.v, m.pool, st, v, xb, n)
	}
	addBias(q, qb, n)
	addBias(k, kb, n)
	addBias(v, vb, n)
	model.QKRoPE{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: a.HeadDim, RopeDim: a.RopeDim, Base: a.RopeBase,
		Factors: m.ropeFactors, Style: a.RopeStyle, QNorm: qn, KNorm: kn, Eps: a.Eps}.Apply(m.pool, q, k, st.Batch.Positions, n)
	layer := st.Pass.Layer(b.i)
	layer.Put(k, v)
	// Past the KV cache the last block computes only the rows that need
	// logits (model.Outputs); n is their count from here on.
	outs := model.Outputs(st, b.i == a.Layers-1)
	if outs != nil {
		n = len(outs)
		model.GatherRows(q, qd, outs)
		model.GatherRows(x, dim, outs)
		x, xb = x[:n*dim], xb[:n*dim]
	}
	att := st.Scratch(sAtt, n*qd)
	model.AttendRows(m.pool, st, layer, att, q, m.attnShape(), nil, sScores, outs)
	xb2 := st.Scratch(sXB2, n*dim)
	kernels.MatMul(m.pool, xb2, wo, att, n)
	if ad != nil {
		applyAll(ad.o, m.pool, st, xb2, att, n)
	}
	addBias(xb2, ob, n)
	kernels.AddRows(m.pool, x, xb2[:n*dim], n)

	// MLP: x += down(silu(gate(xn)) * up(xn)).
	ffnNorm, err := pins.Vector(ctx, w, &l.FFNNorm, &normBuf)
	if err != nil {
		return err
	}
	kernels.RMSNormRows(m.pool, xb, x, n, ffnNorm, a.Eps)
	// Gate and up are released once SwiGLU has consumed them, before down
	// is acquired: a store streaming tensor by tensor reads the next
	// layer's gate and up into their buffers while down computes.
	mark := pins.Mark()
	var wg kernels.Weight
	if !m.fusedGateUp {
		if wg, err = pins.Matrix(ctx, w, l.Gate); err != nil {
			return err
		}
	}
	wu, err := pins.Matrix(ctx, w, l.Up)
	if err != nil {
		return err
	}
	hb, hb2 := st.Scratch(sHB, n*a.Hidden), st.Scratch(sHB2, n*a.Hidden)
	if m.fusedGateUp {
		// One product into rows of gate|up, split into the two buffers.
		h := a.Hidden
		gu := st.Scratch(sGateUp, n*2*h)
		kernels.MatMul(m.pool, gu, wu, xb, n)
		for r := range n {
			copy(hb[r*h:(r+1)*h], gu[r*2*h:r*2*h+h])
			copy(hb2[r*h:(r+1)*h], gu[r*2*h+h:(r+1)*2*h])
		}
	} else {
		kernels.MatMulShared(m.pool, xb, n, kernels.Product{Dst: hb, W: wg}, kernels.Product{Dst: hb2, W: wu})
	}
	if ad != nil {
		applyAll(ad.gate, m.pool, st, hb, xb, n)
		applyAll(ad.up, m.pool, st, hb2, xb, n)
	}
	kernels.SwiGLURows(m.pool, hb[:n*a.Hidden], hb, hb2, n)
	pins.ReleaseFrom(mark)
	wd, err := pins.Matrix(ctx, w, l.Down)
	if err != nil {
		return err
	}
	kernels.MatMul(m.pool, xb, wd, hb, n)
	if ad != nil {
		applyAll(ad.down, m.pool, st, xb, hb, n)
	}
	kernels.AddRows(m.pool, x, xb[:n*dim], n)
	if outs != nil {
		model.ScatterRows(st.Hidden, dim, outs)
	}
	return nil
}
