// Package llama is the Llama family (Llama 2/3, TinyLlama, SmolLM, llama2.c
// checkpoints): pre-norm blocks of grouped-query attention with RoPE and a
// SwiGLU MLP. The weights are tagged structs bound by model.Bind; Forward reads
// like the paper: norm → attention → residual → norm → MLP → residual.
package llama

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

func init() { model.Default.MustRegister("llama", New) }

// Attention holds one block's attention weights, (rows=out, cols=in).
type Attention struct {
	Q offload.Ref `gguf:"attn_q.weight"`      // (heads*headDim, dim)
	K offload.Ref `gguf:"attn_k.weight"`      // (kvHeads*headDim, dim)
	V offload.Ref `gguf:"attn_v.weight"`      // (kvHeads*headDim, dim)
	O offload.Ref `gguf:"attn_output.weight"` // (dim, heads*headDim)
}

// Layer is one block's weights.
type Layer struct {
	AttnNorm offload.Ref `gguf:"attn_norm.weight"` // (dim)
	Attn     Attention
	FFNNorm  offload.Ref `gguf:"ffn_norm.weight"` // (dim)
	Gate     offload.Ref `gguf:"ffn_gate.weight"` // w1 (hidden, dim)
	Up       offload.Ref `gguf:"ffn_up.weight"`   // w3 (hidden, dim)
	Down     offload.Ref `gguf:"ffn_down.weight"` // w2 (dim, hidden)
}

// Weights is the whole model's tensor map.
type Weights struct {
	TokenEmbd  offload.Ref `gguf:"token_embd.weight"` // (vocab, dim)
	Layers     []Layer     `gguf:"blk"`
	OutputNorm offload.Ref `gguf:"output_norm.weight"`                  // (dim)
	Output     offload.Ref `gguf:"output.weight,alt:token_embd.weight"` // (vocab, dim); tied when absent
}

type shapeCheck struct {
	r    offload.Ref
	want []int
}

// Model implements model.Model.
type Model struct {
	arch   model.Arch
	w      Weights
	blocks []model.Block
	pool   *kernels.Pool

	rows atomic.Pointer[rowsOf] // see rowReader

	adMu     sync.RWMutex
	adapters map[string]*adapterSet // unmerged LoRA sets by name
}

var _ model.Model = (*Model)(nil)

// ReadArch reads the hyperparameters of a llama-family file.
func ReadArch(src *model.Source) (model.Arch, error) {
	c := src.Config
	a := model.Arch{
		Name:            c.Architecture(),
		Dim:             int(c.Uint("embedding_length")),
		Hidden:          int(c.Uint("feed_forward_length")),
		Layers:          int(c.Uint("block_count")),
		Heads:           int(c.Uint("attention.head_count")),
		Context:         int(c.Uint("context_length", 2048)),
		RopeBase:        float32(c.Float("rope.freq_base", 10000)),
		Eps:             float32(c.Float("attention.layer_norm_rms_epsilon", 1e-5)),
		SlidingWindow:   int(c.Uint("attention.sliding_window", 0)),
		RopeStyle:       kernels.RopeAdjacent, // GGUF llama stores Q/K permuted for adjacent pairs
		BytesPerKVValue: 4,
	}
	a.KVHeads = int(c.Uint("attention.head_count_kv", uint64(a.Heads)))
	for _, f := range []struct {
		name string
		v    int
	}{{"embedding_length", a.Dim}, {"feed_forward_length", a.Hidden}, {"block_count", a.Layers}, {"attention.head_count", a.Heads}, {"attention.head_count_kv", a.KVHeads}} {
		if f.v <= 0 || f.v > 1<<20 {
			return a, fmt.Errorf("llama: %s: %s.%s is %d, want a positive count", src.Path, a.Name, f.name, f.v)
		}
	}
	if a.Dim%a.Heads != 0 || a.Heads%a.KVHeads != 0 {
		return a, fmt.Errorf("llama: %s: %d heads do not divide dim %d or are not a multiple of %d KV heads", src.Path, a.Heads, a.Dim, a.KVHeads)
	}
	a.HeadDim = int(c.Uint("attention.key_length", uint64(a.Dim/a.Heads)))
	a.RopeDim = int(c.Uint("rope.dimension_count", uint64(a.HeadDim)))
	if a.RopeDim > a.HeadDim || a.RopeDim%2 != 0 {
		return a, fmt.Errorf("llama: %s: rope.dimension_count %d must be even and at most the head size %d", src.Path, a.RopeDim, a.HeadDim)
	}
	if t, ok := src.Tensor("token_embd.weight"); ok && len(t.Shape) == 2 {
		a.Vocab = t.Shape[0]
	} else {
		return a, fmt.Errorf("llama: %s: no 2-D token_embd.weight tensor", src.Path)
	}
	_, hasOut := src.Tensor("output.weight")
	a.TiedOutput = !hasOut
	return a, nil
}

// New binds a llama-family file.
func New(src *model.Source, store offload.Store, o model.Options) (model.Model, error) {
	a, err := ReadArch(src)
	if err != nil {
		return nil, err
	}
	m := &Model{arch: a, pool: o.Pool}
	if err := model.Bind(&m.w, store, a.Layers, src.Path); err != nil {
		return nil, err
	}
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	checks := []shapeCheck{
		{m.w.TokenEmbd, []int{a.Vocab, a.Dim}},
		{m.w.OutputNorm, []int{a.Dim}},
		{m.w.Output, []int{a.Vocab, a.Dim}},
	}
	for _, l := range m.w.Layers {
		checks = append(checks,
			shapeCheck{l.AttnNorm, []int{a.Dim}},
			shapeCheck{l.Attn.Q, []int{qd, a.Dim}},
			shapeCheck{l.Attn.K, []int{kvd, a.Dim}},
			shapeCheck{l.Attn.V, []int{kvd, a.Dim}},
			shapeCheck{l.Attn.O, []int{a.Dim, qd}},
			shapeCheck{l.FFNNorm, []int{a.Dim}},
			shapeCheck{l.Gate, []int{a.Hidden, a.Dim}},
			shapeCheck{l.Up, []int{a.Hidden, a.Dim}},
			shapeCheck{l.Down, []int{a.Dim, a.Hidden}},
		)
	}
	for _, c := range checks {
		if err := model.CheckShape(src.Path, c.r, c.want...); err != nil {
			return nil, err
		}
	}
	for i := range m.w.Layers {
		m.blocks = append(m.blocks, &Block{i: i, m: m, l: &m.w.Layers[i]})
	}
	return m, nil
}

func (m *Model) Arch() model.Arch      { return m.arch }
func (m *Model) Blocks() []model.Block { return m.blocks }
func (m *Model) Weights() *Weights     { return &m.w }
func (m *Model) scale() float32        { return float32(1 / math.Sqrt(float64(m.arch.HeadDim))) }
func (m *Model) qDim() int             { return m.arch.Heads * m.arch.HeadDim }
func (m *Model) kvDim() int            { return m.arch.KVHeads * m.arch.HeadDim }
func (m *Model) attnShape() kernels.AttnShape {
	return kernels.AttnShape{Heads: m.arch.Heads, KVHeads: m.arch.KVHeads, HeadDim: m.arch.HeadDim, Scale: m.scale()}
}

// RowWeights is the embedding when the head does not share it: only the
// rows of a batch's tokens are read (a store that streams weights reads
// them by byte range instead of holding the matrix).
func (m *Model) RowWeights() []offload.Ref {
	if m.arch.TiedOutput {
		return nil
	}
	return []offload.Ref{m.w.TokenEmbd}
}

// Embed copies each token's embedding row into st.Hidden.
func (m *Model) Embed(ctx context.Context, st *model.State, w offload.Store) error {
	n, dim := st.Batch.Len(), m.arch.Dim
	st.Hidden = model.Grow(st.Hidden, n*dim)
	if rr := m.rowReader(w); rr != nil {
		return m.embedRows(ctx, st, rr)
	}
	emb, p, err := model.Matrix(ctx, w, m.w.TokenEmbd)
	if err != nil {
		return err
	}
	defer p.Release()
	for i, t := range st.Batch.Tokens {
		if t < 0 || int(t) >= m.arch.Vocab {
			return fmt.Errorf("llama: token id %d out of range [0,%d)", t, m.arch.Vocab)
		}
		model.Row(st.Hidden[i*dim:(i+1)*dim], emb, int(t))
	}
	if st.Adapter != "" {
		set, err := m.adapter(st.Adapter)
		if err != nil {
			return err
		}
		set.embedAdapter(st, dim)
	}
	return nil
}

// rowsOf remembers, for the store last seen, whether it reads the
// embedding by rows: asked once, not per pass (the interface conversion and
// the call showed up as an allocation in the decode loop).
type rowsOf struct {
	store offload.Store
	rr    offload.RowReader // nil: read the whole matrix
}

func (m *Model) rowReader(w offload.Store) offload.RowReader {
	if c := m.rows.Load(); c != nil && c.store == w {
		return c.rr
	}
	c := &rowsOf{store: w}
	if rr, ok := w.(offload.RowReader); ok && rr.ReadsRows(m.w.TokenEmbd) {
		c.rr = rr
	}
	m.rows.Store(c)
	return c.rr
}

// embedRows is Embed reading each token's row by byte range.
func (m *Model) embedRows(ctx context.Context, st *model.State, rr offload.RowReader) error {
	dim, r := m.arch.Dim, m.w.TokenEmbd
	rb := int(r.Size) / r.Rows()
	words := st.Scratch(sXB, (rb+3)/4) // a block's scratch, free before the blocks run
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), rb)
	for i, t := range st.Batch.Tokens {
		if t < 0 || int(t) >= m.arch.Vocab {
			return fmt.Errorf("llama: token id %d out of range [0,%d)", t, m.arch.Vocab)
		}
		if err := rr.ReadRow(ctx, r, int(t), buf); err != nil {
			return err
		}
		tensor.DequantizeRow(st.Hidden[i*dim:(i+1)*dim], buf, r.DType, dim)
	}
	if st.Adapter != "" {
		set, err := m.adapter(st.Adapter)
		if err != nil {
			return err
		}
		set.embedAdapter(st, dim)
	}
	return nil
}

// Head normalises the output rows and projects them onto the vocabulary.
func (m *Model) Head(ctx context.Context, st *model.State, w offload.Store) error {
	dim, outs := m.arch.Dim, st.Batch.Outputs
	st.Logits = model.Grow(st.Logits, len(outs)*m.arch.Vocab)
	if len(outs) == 0 {
		return nil
	}
	var normBuf []float32 // used only by a non-F32 norm (never in GGUF files llama.cpp writes)
	norm, pn, err := model.Vector(ctx, w, m.w.OutputNorm, &normBuf)
	if err != nil {
		return err
	}
	defer pn.Release()
	x := st.Scratch(0, len(outs)*dim)
	for j, r := range outs {
		kernels.RMSNorm(x[j*dim:(j+1)*dim], st.Hidden[int(r)*dim:(int(r)+1)*dim], norm, m.arch.Eps)
	}
	out, po, err := model.Matrix(ctx, w, m.w.Output)
	if err != nil {
		return err
	}
	defer po.Release()
	kernels.MatMul(m.pool, st.Logits, out, x, len(outs))
	if st.Adapter != "" {
		set, err := m.adapter(st.Adapter)
		if err != nil {
			return err
		}
		applyAll(set.output, m.pool, st, st.Logits, x, len(outs))
		if m.arch.TiedOutput {
			applyAll(set.embed, m.pool, st, st.Logits, x, len(outs))
		}
	}
	return nil
}
