package llama

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// Unmerged LoRA serving. The base weights are shared by every request; an
// adapter set adds, after each adapted matmul y = W·x,
//
//	y += scale · B·(A·x)
//
// computed as two small matmuls through the same kernels as the base (A and
// B viewed as F32 weights), so a row's result does not depend on the batch it
// runs in. The base path pays one string comparison per block.

var _ model.Adaptable = (*Model)(nil)

// factor is one module's update in kernel form: y += scale·B·(A·x).
type factor struct {
	name   string         // HF module path, for messages
	a, b   kernels.Weight // A (r, in), B (out, r), F32
	scale  float32
	r, out int
}

// apply adds the factor's update for n rows of x (n, in) to dst (n, out).
func (f *factor) apply(pool *kernels.Pool, st *model.State, dst, x []float32, n int) {
	u := st.Scratch(sLoRAU, n*f.r)
	kernels.MatMul(pool, u, f.a, x, n)
	t := st.Scratch(sLoRAT, n*f.out)
	kernels.MatMul(pool, t, f.b, u, n)
	for i, v := range t {
		dst[i] += f.scale * v
	}
}

func applyAll(fs []factor, pool *kernels.Pool, st *model.State, dst, x []float32, n int) {
	for i := range fs {
		fs[i].apply(pool, st, dst, x, n)
	}
}

// layerAdapter is a set's factors for one block; nil slices are not adapted.
type layerAdapter struct {
	q, k, v, o, gate, up, down []factor
}

func (l *layerAdapter) slot(g string) *[]factor {
	switch g {
	case "attn_q":
		return &l.q
	case "attn_k":
		return &l.k
	case "attn_v":
		return &l.v
	case "attn_output":
		return &l.o
	case "ffn_gate":
		return &l.gate
	case "ffn_up":
		return &l.up
	case "ffn_down":
		return &l.down
	}
	return nil
}

// adapterSet is one named set of adapters, summed.
type adapterSet struct {
	layers []layerAdapter
	output []factor // lm_head on the normalised hidden rows
	// embed holds embed_tokens updates in the head's linear form: a = Bᵀ
	// (r, dim), b = Aᵀ (vocab, r). Embed adds row t of scale·Aᵀ·Bᵀ; with a
	// tied output the head adds them too, as a merged table would.
	embed []factor
}

// f32Weight views float32 values as an F32 kernel weight (no copy).
func f32Weight(v []float32, rows, cols int) kernels.Weight {
	return kernels.Weight{
		DType: tensor.F32,
		Data:  unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)),
		Rows:  rows, Cols: cols,
	}
}

func transpose(v []float32, rows, cols int) []float32 {
	t := make([]float32, len(v))
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = v[i*cols+j]
		}
	}
	return t
}

// AddAdapter registers adapters under name (model.Adaptable). Every module
// must adapt one of this model's weights with exactly that weight's shape;
// the error otherwise names the module, the tensor and both shapes.
func (m *Model) AddAdapter(name string, adapters ...*lora.Adapter) error {
	if name == "" {
		return fmt.Errorf("%w: llama: empty adapter name", model.ErrAdapter)
	}
	set := &adapterSet{layers: make([]layerAdapter, len(m.w.Layers))}
	for _, ad := range adapters {
		for i := range ad.Modules {
			if err := m.addModule(set, &ad.Modules[i]); err != nil {
				return fmt.Errorf("adapter %s: %w", name, err)
			}
		}
	}
	m.adMu.Lock()
	defer m.adMu.Unlock()
	if _, dup := m.adapters[name]; dup {
		return fmt.Errorf("%w: llama: adapter %q added twice", model.ErrAdapter, name)
	}
	if m.adapters == nil {
		m.adapters = map[string]*adapterSet{}
	}
	m.adapters[name] = set
	return nil
}

// Adapters lists the registered adapter names.
func (m *Model) Adapters() []string {
	m.adMu.RLock()
	defer m.adMu.RUnlock()
	return slices.Sorted(maps.Keys(m.adapters))
}

func (m *Model) adapter(name string) (*adapterSet, error) {
	m.adMu.RLock()
	set := m.adapters[name]
	m.adMu.RUnlock()
	if set == nil {
		known := strings.Join(m.Adapters(), ", ")
		if known == "" {
			known = "none"
		}
		return nil, fmt.Errorf("%w: llama: adapter %q is not loaded (loaded: %s)", model.ErrAdapter, name, known)
	}
	return set, nil
}

// addModule places one module's factors in set after checking it against
// the bound weight it adapts.
func (m *Model) addModule(set *adapterSet, md *lora.Module) error {
	if md.Tensor == "" {
		return fmt.Errorf("%w: module %s has no llama weight (adaptable: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, embed_tokens, lm_head)", model.ErrAdapter, md.Name)
	}
	var ref offload.Ref
	var dst *[]factor
	switch md.Tensor {
	case "token_embd.weight":
		ref, dst = m.w.TokenEmbd, &set.embed
	case "output.weight":
		if m.arch.TiedOutput {
			return fmt.Errorf("%w: module %s adapts output.weight but this model ties its output to token_embd.weight", model.ErrAdapter, md.Name)
		}
		ref, dst = m.w.Output, &set.output
	default:
		rest, ok := strings.CutPrefix(md.Tensor, "blk.")
		num, g, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		g, _ = strings.CutSuffix(g, ".weight")
		if !ok || err != nil || i < 0 || i >= len(set.layers) || set.layers[i].slot(g) == nil {
			return fmt.Errorf("%w: module %s adapts %s, which this %d-layer model does not have", model.ErrAdapter, md.Name, md.Tensor, len(set.layers))
		}
		ref, dst = m.layerRef(i, g), set.layers[i].slot(g)
	}
	rows, cols := md.BaseShape()
	if len(ref.Shape) != 2 || ref.Shape[0] != rows || ref.Shape[1] != cols {
		return fmt.Errorf("%w: module %s: B·A is [%d %d] (A [%d %d], B [%d %d]) but tensor %s is %v",
			model.ErrAdapter, md.Name, rows, cols, md.R, md.In, md.Out, md.R, md.Tensor, ref.Shape)
	}
	if len(md.A) != md.R*md.In || len(md.B) != md.Out*md.R || md.R <= 0 {
		return fmt.Errorf("%w: module %s: A has %d values and B %d, want %d×%d and %d×%d", model.ErrAdapter, md.Name, len(md.A), len(md.B), md.R, md.In, md.Out, md.R)
	}
	f := factor{name: md.Name, scale: md.Scale, r: md.R}
	if md.Embedding {
		// ΔW (vocab, dim) = (B·A)ᵀ = Aᵀ·Bᵀ: in linear form a = Bᵀ (r, dim), b = Aᵀ (vocab, r).
		f.a = f32Weight(transpose(md.B, md.Out, md.R), md.R, md.Out)
		f.b = f32Weight(transpose(md.A, md.R, md.In), md.In, md.R)
		f.out = md.In
	} else {
		f.a = f32Weight(md.A, md.R, md.In)
		f.b = f32Weight(md.B, md.Out, md.R)
		f.out = md.Out
	}
	*dst = append(*dst, f)
	return nil
}

func (m *Model) layerRef(i int, g string) offload.Ref {
	l := &m.w.Layers[i]
	switch g {
	case "attn_q":
		return l.Attn.Q
	case "attn_k":
		return l.Attn.K
	case "attn_v":
		return l.Attn.V
	case "attn_output":
		return l.Attn.O
	case "ffn_gate":
		return l.Gate
	case "ffn_up":
		return l.Up
	}
	return l.Down
}

// embedAdapter adds the embedding updates to the rows of st.Hidden: row t of
// scale·Aᵀ·Bᵀ for token t.
func (set *adapterSet) embedAdapter(st *model.State, dim int) {
	for fi := range set.embed {
		f := &set.embed[fi]
		bt := model.F32View(f.a.Data) // (r, dim)
		at := model.F32View(f.b.Data) // (vocab, r)
		for i, t := range st.Batch.Tokens {
			h := st.Hidden[i*dim : (i+1)*dim]
			for d := range h {
				var acc float32
				for k, c := range at[int(t)*f.r : (int(t)+1)*f.r] {
					acc += c * bt[k*dim+d]
				}
				h[d] += f.scale * acc
			}
		}
	}
}
