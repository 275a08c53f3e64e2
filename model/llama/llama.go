// Package llama is the Llama family (Llama 2/3, TinyLlama, SmolLM, Mistral,
// llama2.c checkpoints): pre-norm blocks of grouped-query attention with RoPE
// and a SwiGLU MLP. The weights are tagged structs bound by model.Bind; Forward
// reads like the paper: norm → attention → residual → norm → MLP → residual.
//
// Architectures that are this block with a different RoPE pairing or with
// some of its optional tensors made required (qwen2's Q/K/V biases, qwen3's
// per-head Q/K norms) reuse it through a Variant.
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
// Q, K and V are required unless the layer has the fused QKV instead (New
// checks; phi3 files have it).
type Attention struct {
	Q   offload.Ref  `gguf:"attn_q.weight,opt"`  // (heads*headDim, dim)
	K   offload.Ref  `gguf:"attn_k.weight,opt"`  // (kvHeads*headDim, dim)
	V   offload.Ref  `gguf:"attn_v.weight,opt"`  // (kvHeads*headDim, dim)
	QKV *offload.Ref `gguf:"attn_qkv.weight"`    // (heads*headDim + 2*kvHeads*headDim, dim): Q, K, V rows in turn
	O   offload.Ref  `gguf:"attn_output.weight"` // (dim, heads*headDim)
	// Optional biases, added after each projection (llama.cpp reads them
	// for llama when present; qwen2 requires Q, K and V's).
	QBias *offload.Ref `gguf:"attn_q.bias"`      // (heads*headDim)
	KBias *offload.Ref `gguf:"attn_k.bias"`      // (kvHeads*headDim)
	VBias *offload.Ref `gguf:"attn_v.bias"`      // (kvHeads*headDim)
	OBias *offload.Ref `gguf:"attn_output.bias"` // (dim)
	// Optional per-head RMSNorm of queries and keys before RoPE (qwen3).
	QNorm *offload.Ref `gguf:"attn_q_norm.weight"` // (headDim)
	KNorm *offload.Ref `gguf:"attn_k_norm.weight"` // (headDim)
}

// Layer is one block's weights.
type Layer struct {
	AttnNorm offload.Ref `gguf:"attn_norm.weight"` // (dim)
	Attn     Attention
	FFNNorm  offload.Ref `gguf:"ffn_norm.weight"`     // (dim)
	Gate     offload.Ref `gguf:"ffn_gate.weight,opt"` // w1 (hidden, dim); absent when Up is fused
	Up       offload.Ref `gguf:"ffn_up.weight"`       // w3 (hidden, dim), or gate and up rows fused (2*hidden, dim)
	Down     offload.Ref `gguf:"ffn_down.weight"`     // w2 (dim, hidden)
}

// Weights is the whole model's tensor map.
type Weights struct {
	TokenEmbd  offload.Ref `gguf:"token_embd.weight"` // (vocab, dim)
	Layers     []Layer     `gguf:"blk"`
	OutputNorm offload.Ref `gguf:"output_norm.weight"`                  // (dim)
	Output     offload.Ref `gguf:"output.weight,alt:token_embd.weight"` // (vocab, dim); tied when absent
	// RopeFreqs divides each rotary pair's frequency (Llama 3.1's scaling,
	// written by the converter); nil: rope.scaling.* keys, or none.
	RopeFreqs *offload.Ref `gguf:"rope_freqs.weight"` // (ropeDim/2)
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
	// ropeFactors divide the rotary frequencies (nil: plain RoPE).
	ropeFactors []float32
	fusedGateUp bool // ffn_up holds gate and up rows (Variant.FusedGateUp)

	rows atomic.Pointer[rowsOf] // see rowReader

	adMu     sync.RWMutex
	adapters map[string]*adapterSet // unmerged LoRA sets by name
}

var _ model.Model = (*Model)(nil)

// ReadArch reads the hyperparameters of a llama file.
func ReadArch(src *model.Source) (model.Arch, error) { return Llama.ReadArch(src) }

// New binds a llama file.
func New(src *model.Source, store offload.Store, o model.Options) (model.Model, error) {
	return Llama.New(src, store, o)
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
	x, err := model.Head(ctx, st, w, model.HeadOptions{Norm: m.w.OutputNorm, Output: m.w.Output,
		Dim: m.arch.Dim, Vocab: m.arch.Vocab, Eps: m.arch.Eps, Pool: m.pool})
	if err != nil || len(st.Batch.Outputs) == 0 {
		return err
	}
	outs := st.Batch.Outputs
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
