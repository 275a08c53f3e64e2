package gemma

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
)

// Layer is one block's weights, (rows=out, cols=in).
type Layer struct {
	AttnNorm     offload.Ref  `gguf:"attn_norm.weight"`           // (dim)
	Q            offload.Ref  `gguf:"attn_q.weight"`              // (heads*headDim, dim)
	K            offload.Ref  `gguf:"attn_k.weight"`              // (kvHeads*headDim, dim)
	V            offload.Ref  `gguf:"attn_v.weight"`              // (kvHeads*headDim, dim)
	QNorm        *offload.Ref `gguf:"attn_q_norm.weight"`         // (headDim), gemma3
	KNorm        *offload.Ref `gguf:"attn_k_norm.weight"`         // (headDim), gemma3
	O            offload.Ref  `gguf:"attn_output.weight"`         // (dim, heads*headDim)
	AttnPostNorm offload.Ref  `gguf:"post_attention_norm.weight"` // (dim)
	FFNNorm      offload.Ref  `gguf:"ffn_norm.weight"`            // (dim)
	Gate         offload.Ref  `gguf:"ffn_gate.weight"`            // (hidden, dim)
	Up           offload.Ref  `gguf:"ffn_up.weight"`              // (hidden, dim)
	Down         offload.Ref  `gguf:"ffn_down.weight"`            // (dim, hidden)
	FFNPostNorm  offload.Ref  `gguf:"post_ffw_norm.weight"`       // (dim)
}

// Weights is the whole model's tensor map.
type Weights struct {
	TokenEmbd  offload.Ref `gguf:"token_embd.weight"` // (vocab, dim)
	Layers     []Layer     `gguf:"blk"`
	OutputNorm offload.Ref `gguf:"output_norm.weight"`                  // (dim)
	Output     offload.Ref `gguf:"output.weight,alt:token_embd.weight"` // (vocab, dim); tied when absent
}

// Model implements model.Model.
type Model struct {
	p      Params
	w      Weights
	blocks []model.Block
	pool   *kernels.Pool
	masks  sync.Pool // *LocalMask scratch of local layers
}

var _ model.Model = (*Model)(nil)

// New binds a gemma2 or gemma3 file.
func New(src *model.Source, store offload.Store, o model.Options) (model.Model, error) {
	p, err := ReadParams(src)
	if err != nil {
		return nil, err
	}
	a, name := p.Arch, p.Name
	m := &Model{p: p, pool: o.Pool}
	m.masks.New = func() any { return new(LocalMask) }
	if err := model.Bind(&m.w, store, a.Layers, src.Path); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var bad []string
	for _, n := range unsupported {
		if _, ok := store.Lookup(n); ok {
			bad = append(bad, n)
		}
	}
	var missing []string
	for i, l := range m.w.Layers {
		blk := fmt.Sprintf("blk.%d.", i)
		for _, n := range []string{"attn_qkv.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"} {
			if _, ok := store.Lookup(blk + n); ok {
				bad = append(bad, blk+n)
			}
		}
		if name == "gemma3" {
			if l.QNorm == nil {
				missing = append(missing, blk+"attn_q_norm.weight")
			}
			if l.KNorm == nil {
				missing = append(missing, blk+"attn_k_norm.weight")
			}
		} else if l.QNorm != nil || l.KNorm != nil {
			bad = append(bad, blk+"attn_q_norm.weight / attn_k_norm.weight")
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %s: missing tensor(s) %s", name, src.Path, strings.Join(missing, ", "))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: %s: tensor(s) %s are not part of %s (llama.cpp does not load them either)", name, src.Path, strings.Join(bad, ", "), name)
	}
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	type check struct {
		r    offload.Ref
		want []int
	}
	checks := []check{{m.w.TokenEmbd, []int{a.Vocab, a.Dim}}, {m.w.OutputNorm, []int{a.Dim}}, {m.w.Output, []int{a.Vocab, a.Dim}}}
	for _, l := range m.w.Layers {
		checks = append(checks,
			check{l.AttnNorm, []int{a.Dim}}, check{l.Q, []int{qd, a.Dim}}, check{l.K, []int{kvd, a.Dim}},
			check{l.V, []int{kvd, a.Dim}}, check{l.O, []int{a.Dim, qd}}, check{l.AttnPostNorm, []int{a.Dim}},
			check{l.FFNNorm, []int{a.Dim}}, check{l.Gate, []int{a.Hidden, a.Dim}}, check{l.Up, []int{a.Hidden, a.Dim}},
			check{l.Down, []int{a.Dim, a.Hidden}}, check{l.FFNPostNorm, []int{a.Dim}})
		for _, r := range []*offload.Ref{l.QNorm, l.KNorm} {
			if r != nil {
				checks = append(checks, check{*r, []int{a.HeadDim}})
			}
		}
	}
	for _, c := range checks {
		if err := model.CheckShape(src.Path, c.r, c.want...); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	for i := range m.w.Layers {
		b := &Block{i: i, m: m, l: &m.w.Layers[i], local: p.Local[i]}
		b.refs = b.weights()
		m.blocks = append(m.blocks, b)
	}
	return m, nil
}

func (m *Model) Arch() model.Arch      { return m.p.Arch }
func (m *Model) Params() Params        { return m.p }
func (m *Model) Blocks() []model.Block { return m.blocks }
func (m *Model) Weights() *Weights     { return &m.w }

// Embed copies each token's embedding row into st.Hidden, times √dim.
func (m *Model) Embed(ctx context.Context, st *model.State, w offload.Store) error {
	if st.Adapter != "" {
		return fmt.Errorf("%s: LoRA adapters are not supported for this architecture (adapter %q)", m.p.Name, st.Adapter)
	}
	n, dim := st.Batch.Len(), m.p.Dim
	st.Hidden = model.Grow(st.Hidden, n*dim)
	emb, p, err := model.Matrix(ctx, w, m.w.TokenEmbd)
	if err != nil {
		return err
	}
	defer p.Release()
	for i, t := range st.Batch.Tokens {
		if t < 0 || int(t) >= m.p.Vocab {
			return fmt.Errorf("%s: token id %d out of range [0,%d)", m.p.Name, t, m.p.Vocab)
		}
		row := st.Hidden[i*dim : (i+1)*dim]
		model.Row(row, emb, int(t))
		kernels.Scale(row, m.p.EmbedScale)
	}
	return nil
}

// Head normalises the output rows, projects them onto the vocabulary and
// caps the logits when the file says so.
func (m *Model) Head(ctx context.Context, st *model.State, w offload.Store) error {
	if _, err := model.Head(ctx, st, w, model.HeadOptions{Norm: m.w.OutputNorm, Output: m.w.Output,
		Dim: m.p.Dim, Vocab: m.p.Vocab, Eps: m.p.Eps, Pool: m.pool}); err != nil {
		return err
	}
	outs := st.Batch.Outputs
	if c := m.p.FinalSoftcap; c > 0 {
		kernels.Softcap(st.Logits[:len(outs)*m.p.Vocab], c)
	}
	return nil
}
