package llama

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
)

// Variant is an architecture built from llama's block: its name (the
// general.architecture value and the prefix of its keys), how it pairs
// dimensions for RoPE, and which of Layer's optional tensors it requires.
type Variant struct {
	Name      string
	RopeStyle kernels.RopeStyle
	// Require lists tensors under blk.N. that every layer must have, among
	// Attention's optional ones ("attn_q.bias", "attn_q_norm.weight", …).
	Require []string
	// FusedGateUp: ffn_up holds the gate's rows then the up rows (2·hidden
	// of them) and there is no ffn_gate (phi3).
	FusedGateUp bool
	// Unsupported names tensors whose presence sluice cannot honour for
	// this architecture (phi3's long-context rope factors).
	Unsupported []string
}

// Llama is the llama architecture itself: adjacent-pair RoPE (GGUF stores
// Q/K rows permuted for it), every optional tensor optional.
var Llama = Variant{Name: "llama", RopeStyle: kernels.RopeAdjacent}

// ReadArch reads the hyperparameters of a file of this architecture.
//
// No architecture of the family applies a sliding window, whatever
// attention.sliding_window says: llama.cpp builds llama (Mistral files
// included), qwen2 and qwen3 with full causal attention, and sluice matches it.
func (v Variant) ReadArch(src *model.Source) (model.Arch, error) {
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
		RopeStyle:       v.RopeStyle,
		BytesPerKVValue: 4,
	}
	a.KVHeads = int(c.Uint("attention.head_count_kv", uint64(a.Heads)))
	for _, f := range []struct {
		name string
		v    int
	}{{"embedding_length", a.Dim}, {"feed_forward_length", a.Hidden}, {"block_count", a.Layers}, {"attention.head_count", a.Heads}, {"attention.head_count_kv", a.KVHeads}} {
		if !c.Has(f.name) && f.name != "attention.head_count_kv" {
			return a, fmt.Errorf("%s: %s: missing key %s.%s", v.Name, src.Path, a.Name, f.name)
		}
		if f.v <= 0 || f.v > 1<<20 {
			return a, fmt.Errorf("%s: %s: %s.%s is %d, want a positive count", v.Name, src.Path, a.Name, f.name, f.v)
		}
	}
	if a.Heads%a.KVHeads != 0 {
		return a, fmt.Errorf("%s: %s: %d heads are not a multiple of %d KV heads", v.Name, src.Path, a.Heads, a.KVHeads)
	}
	// The head size is attention.key_length when given (qwen3's is not
	// dim/heads), else dim/heads.
	if c.Has("attention.key_length") {
		a.HeadDim = int(c.Uint("attention.key_length"))
		if vl := int(c.Uint("attention.value_length", uint64(a.HeadDim))); vl != a.HeadDim {
			return a, fmt.Errorf("%s: %s: attention.value_length %d differs from attention.key_length %d", v.Name, src.Path, vl, a.HeadDim)
		}
	} else if a.Dim%a.Heads != 0 {
		return a, fmt.Errorf("%s: %s: %d heads do not divide dim %d and there is no %s.attention.key_length", v.Name, src.Path, a.Heads, a.Dim, a.Name)
	} else {
		a.HeadDim = a.Dim / a.Heads
	}
	if a.HeadDim <= 0 || a.HeadDim > 1<<16 {
		return a, fmt.Errorf("%s: %s: head size %d, want a positive size", v.Name, src.Path, a.HeadDim)
	}
	a.RopeDim = int(c.Uint("rope.dimension_count", uint64(a.HeadDim)))
	if a.RopeDim > a.HeadDim || a.RopeDim%2 != 0 {
		return a, fmt.Errorf("%s: %s: rope.dimension_count %d must be even and at most the head size %d", v.Name, src.Path, a.RopeDim, a.HeadDim)
	}
	if t, ok := src.Tensor("token_embd.weight"); ok && len(t.Shape) == 2 {
		a.Vocab = t.Shape[0]
	} else {
		return a, fmt.Errorf("%s: %s: no 2-D token_embd.weight tensor", v.Name, src.Path)
	}
	_, hasOut := src.Tensor("output.weight")
	a.TiedOutput = !hasOut
	return a, nil
}

// New binds a file of this architecture.
func (v Variant) New(src *model.Source, store offload.Store, o model.Options) (model.Model, error) {
	a, err := v.ReadArch(src)
	if err != nil {
		return nil, err
	}
	m := &Model{arch: a, pool: o.Pool, fusedGateUp: v.FusedGateUp}
	if err := model.Bind(&m.w, store, a.Layers, src.Path); err != nil {
		return nil, err
	}
	for _, name := range v.Unsupported {
		if _, ok := store.Lookup(name); ok {
			return nil, fmt.Errorf("%s: %s: tensor %s is not supported", v.Name, src.Path, name)
		}
	}
	var missing []string
	for i, l := range m.w.Layers {
		blk := fmt.Sprintf("blk.%d.", i)
		if l.Attn.QKV == nil {
			for _, r := range []struct {
				ref  offload.Ref
				name string
			}{{l.Attn.Q, "attn_q.weight"}, {l.Attn.K, "attn_k.weight"}, {l.Attn.V, "attn_v.weight"}} {
				if !r.ref.Valid() {
					missing = append(missing, blk+r.name)
				}
			}
		}
		if !v.FusedGateUp && !l.Gate.Valid() {
			missing = append(missing, blk+"ffn_gate.weight")
		}
		for _, name := range v.Require {
			if l.Attn.optional(name) == nil {
				missing = append(missing, blk+name)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s: %s: missing tensor(s) %s", v.Name, src.Path, strings.Join(missing, ", "))
	}
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	checks := []shapeCheck{
		{m.w.TokenEmbd, []int{a.Vocab, a.Dim}},
		{m.w.OutputNorm, []int{a.Dim}},
		{m.w.Output, []int{a.Vocab, a.Dim}},
	}
	opt := func(r *offload.Ref, want ...int) {
		if r != nil {
			checks = append(checks, shapeCheck{*r, want})
		}
	}
	opt(m.w.RopeFreqs, a.RopeDim/2)
	up := a.Hidden
	if v.FusedGateUp {
		up = 2 * a.Hidden
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
			shapeCheck{l.Up, []int{up, a.Dim}},
			shapeCheck{l.Down, []int{a.Dim, a.Hidden}},
		)
		opt(l.Attn.QKV, qd+2*kvd, a.Dim)
		opt(l.Attn.QBias, qd)
		opt(l.Attn.KBias, kvd)
		opt(l.Attn.VBias, kvd)
		opt(l.Attn.OBias, a.Dim)
		opt(l.Attn.QNorm, a.HeadDim)
		opt(l.Attn.KNorm, a.HeadDim)
	}
	for _, c := range checks {
		if err := model.CheckShape(src.Path, c.r, c.want...); err != nil {
			return nil, err
		}
	}
	if m.ropeFactors, err = RopeFactors(context.Background(), src, store, a); err != nil {
		return nil, err
	}
	if m.ropeFactors == nil {
		// The cos/sin table now, not in the first request's first layer
		// (a scaled RoPE computes its angles per call: no table).
		kernels.PrepareRoPE(a.RopeDim, a.RopeBase, a.Context)
	}
	for i := range m.w.Layers {
		b := &Block{i: i, m: m, l: &m.w.Layers[i]}
		b.refs = b.weights()
		m.blocks = append(m.blocks, b)
	}
	return m, nil
}

// optional returns the optional tensor called name (under blk.N.), or nil
// when the layer lacks it or name is not one of Attention's optional tensors.
func (at *Attention) optional(name string) *offload.Ref {
	switch name {
	case "attn_q.bias":
		return at.QBias
	case "attn_k.bias":
		return at.KBias
	case "attn_v.bias":
		return at.VBias
	case "attn_output.bias":
		return at.OBias
	case "attn_q_norm.weight":
		return at.QNorm
	case "attn_k_norm.weight":
		return at.KNorm
	}
	return nil
}

// RopeFactors returns the divisors of the rotary frequencies of a file (nil
// when it has none), from the rope_freqs.weight tensor when present (what
// llama.cpp reads; Llama 3.1's converter writes it), else from
// rope.scaling.type: "llama3" computes them from rope.scaling.factor,
// rope.scaling.low_freq_factor, rope.scaling.high_freq_factor and
// rope.scaling.original_context_length as the converter does, "linear" divides
// every frequency by rope.scaling.factor, "none" (or no key) leaves them.
// Other scaling types are an error naming the type.
func RopeFactors(ctx context.Context, src *model.Source, store offload.Store, a model.Arch) ([]float32, error) {
	c := src.Config
	if r, ok := store.Lookup("rope_freqs.weight"); ok {
		var buf []float32
		v, p, err := model.Vector(ctx, store, r, &buf)
		if err != nil {
			return nil, err
		}
		defer p.Release()
		if len(v) != a.RopeDim/2 {
			return nil, fmt.Errorf("%s: %s: rope_freqs.weight has %d factors, want %d", a.Name, src.Path, len(v), a.RopeDim/2)
		}
		f := append([]float32(nil), v...)
		for i, x := range f {
			if !(x > 0) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%s: %s: rope_freqs.weight[%d] is %v, want a positive factor", a.Name, src.Path, i, x)
			}
		}
		return f, nil
	}
	typ := c.String("rope.scaling.type", "none")
	switch typ {
	case "none":
		return nil, nil
	case "linear":
		k := float32(c.Float("rope.scaling.factor", 1))
		if !(k > 0) {
			return nil, fmt.Errorf("%s: %s: rope.scaling.factor %v, want > 0", a.Name, src.Path, k)
		}
		if k == 1 {
			return nil, nil
		}
		f := make([]float32, a.RopeDim/2)
		for i := range f {
			f[i] = k
		}
		return f, nil
	case "llama3":
		s := Llama3Scaling{
			Factor:          c.Float("rope.scaling.factor", 8),
			LowFreqFactor:   c.Float("rope.scaling.low_freq_factor", 1),
			HighFreqFactor:  c.Float("rope.scaling.high_freq_factor", 4),
			OriginalContext: c.Float("rope.scaling.original_context_length", 8192),
		}
		if !(s.Factor > 0) || !(s.LowFreqFactor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || !(s.OriginalContext > 0) {
			return nil, fmt.Errorf("%s: %s: rope.scaling llama3 parameters %+v, want positive values and high_freq_factor > low_freq_factor", a.Name, src.Path, s)
		}
		return s.Factors(a.RopeBase, a.RopeDim), nil
	}
	return nil, fmt.Errorf("%s: %s: rope.scaling.type %q is not supported (known: none, linear, llama3)", a.Name, src.Path, typ)
}

// Llama3Scaling is Llama 3.1's rope_scaling ("rope_type": "llama3").
type Llama3Scaling struct {
	Factor, LowFreqFactor, HighFreqFactor, OriginalContext float64
}

// Factors computes the frequency divisors for a head of ropeDim rotary
// dimensions, as the GGUF converter computes the rope_freqs tensor: pair i's
// frequency f = 1/base^(2i/ropeDim) (float32) has wavelength λ = 2π/f;
// λ below OriginalContext/HighFreqFactor keeps it (1), above
// OriginalContext/LowFreqFactor divides it by Factor, and in between the
// divisor is 1/((1-s)/Factor + s) with s = (OriginalContext/λ - low)/(high - low).
func (s Llama3Scaling) Factors(base float32, ropeDim int) []float32 {
	lowWave := s.OriginalContext / s.LowFreqFactor
	highWave := s.OriginalContext / s.HighFreqFactor
	f := make([]float32, ropeDim/2)
	for i := range f {
		freq := 1 / float32(math.Pow(float64(base), float64(float32(2*i)/float32(ropeDim))))
		wave := 2 * math.Pi / float64(freq)
		switch {
		case wave < highWave:
			f[i] = 1
		case wave > lowWave:
			f[i] = float32(s.Factor)
		default:
			sm := (s.OriginalContext/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			f[i] = float32(1 / ((1-sm)/s.Factor + sm))
		}
	}
	return f
}
