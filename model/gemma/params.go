// Package gemma is Google's Gemma 2 and Gemma 3 text architectures, as
// llama.cpp reads and runs their GGUF files (general.architecture gemma2 and
// gemma3):
//
//   - the token embedding is scaled by √dim;
//   - each block is RMSNorm → attention → RMSNorm (attn post-norm) →
//     residual, then RMSNorm → GELU-gated feed-forward → RMSNorm (ffn
//     post-norm) → residual; GGUF's norm weights already hold Gemma's
//     "1 + w" (the converter adds the 1);
//   - the GELU is ggml's CPU GELU (tanh approximation through an f16 table,
//     kernels.GeGLU); RoPE pairs the two halves of each head (ggml's NEOX);
//   - queries are multiplied by 1/√key_length after RoPE (by 1/√(dim/heads)
//     for the 27B shapes, whose query_pre_attn_scalar differs: llama.cpp
//     tells them by their layer count, 46 for Gemma 2 and 62 for Gemma 3);
//   - sliding-window ("local") layers alternate with global ones: by
//     attention.sliding_window_pattern (a period n: layer l is local unless
//     l%n == n-1; or an array of bools per layer), defaulting to 2 (Gemma 2:
//     every other layer) and 6 (Gemma 3: 5 local, 1 global);
//   - Gemma 2 caps attention scores (attn_logit_softcapping, default 50) and
//     the final logits (final_logit_softcapping, default 30) with c·tanh(x/c);
//     Gemma 3 caps nothing unless final_logit_softcapping is given;
//   - Gemma 3 normalises each head of the queries and keys (attn_q_norm,
//     attn_k_norm) before RoPE; its local layers turn at rope.freq_base_swa
//     (default 10000) unscaled, its global ones at rope.freq_base with the
//     rope.scaling (linear) factor; Gemma 2 uses rope.freq_base and the
//     scaling for both (rope.freq_base_swa may set the local base);
//   - the output is tied to the embedding (always for Gemma 2; for Gemma 3
//     when there is no output.weight).
//
// The KV cache is full (model.Arch.SlidingWindow is 0): global layers attend
// over all of it and local layers narrow the pass's mask to their window
// (LocalMask), exactly as a cache with that window would.
package gemma

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
)

func init() {
	model.Default.MustRegister("gemma2", New)
	model.Default.MustRegister("gemma3", New)
}

// Params are a Gemma file's hyperparameters: model.Arch plus what Gemma adds.
type Params struct {
	model.Arch
	// Window is attention.sliding_window, the span of local layers in
	// tokens including their own (0: no local layers).
	Window int
	// Local says which layers are local (sliding-window) layers.
	Local []bool
	// LocalRopeBase is the RoPE base of local layers (Arch.RopeBase is the
	// global layers').
	LocalRopeBase float32
	// GlobalFactors and LocalFactors divide each rotary pair's frequency
	// (linear scaling: every entry is rope.scaling.factor); nil: unscaled.
	GlobalFactors, LocalFactors []float32
	// AttnScale multiplies the queries after RoPE.
	AttnScale float32
	// EmbedScale multiplies the token embedding (√dim as float32).
	EmbedScale float32
	// AttnSoftcap and FinalSoftcap cap attention scores and logits; 0: none.
	AttnSoftcap, FinalSoftcap float32
}

// Unsupported tensors: llama.cpp's gemma loaders create none of these, so a
// file holding one does not load there either.
var unsupported = []string{"rope_freqs.weight"}

// ReadParams reads the hyperparameters of a gemma2 or gemma3 file.
func ReadParams(src *model.Source) (Params, error) {
	c := src.Config
	name := c.Architecture()
	if name != "gemma2" && name != "gemma3" {
		return Params{}, fmt.Errorf("gemma: %s: architecture %q is not gemma2 or gemma3", src.Path, name)
	}
	v := llama.Variant{Name: name, RopeStyle: kernels.RopeHalf}
	a, err := v.ReadArch(src)
	if err != nil {
		return Params{}, err
	}
	p := Params{Arch: a}
	bad := func(format string, args ...any) (Params, error) {
		return Params{}, fmt.Errorf("%s: %s: %s", name, src.Path, fmt.Sprintf(format, args...))
	}
	// llama.cpp requires the epsilon for both (no default).
	if !c.Has("attention.layer_norm_rms_epsilon") {
		return bad("missing key %s.attention.layer_norm_rms_epsilon", name)
	}
	if !(a.Eps > 0) {
		return bad("%s.attention.layer_norm_rms_epsilon is %v, want > 0", name, a.Eps)
	}
	if _, ok := src.Tensor("output.weight"); ok && name == "gemma2" {
		// llama.cpp's gemma2 always ties the head and refuses the extra tensor.
		return bad("tensor output.weight: gemma2 ties the output to token_embd.weight")
	}
	p.TiedOutput = name == "gemma2" || a.TiedOutput

	// Sliding window and the local/global pattern.
	period := uint64(6)
	switch name {
	case "gemma2":
		p.Window = int(c.Uint("attention.sliding_window", 4096))
		period = 2
	case "gemma3":
		p.Window = int(c.Uint("attention.sliding_window", 0))
	}
	if c.Has("attention.sliding_window") {
		if _, ok := asCount(c, "attention.sliding_window"); !ok {
			return bad("%s.attention.sliding_window is %s, want a token count", name, raw(c, "attention.sliding_window"))
		}
	}
	p.Local = make([]bool, a.Layers)
	if p.Window > 0 {
		if r, ok := c.Raw(name + ".attention.sliding_window_pattern"); ok {
			switch pat := r.(type) {
			case []bool:
				if len(pat) != a.Layers {
					return bad("%s.attention.sliding_window_pattern has %d entries, want one per layer (%d)", name, len(pat), a.Layers)
				}
				copy(p.Local, pat)
				period = 0
			default:
				n, ok := asCount(c, "attention.sliding_window_pattern")
				if !ok {
					return bad("%s.attention.sliding_window_pattern is %s, want a period or an array of bools", name, raw(c, "attention.sliding_window_pattern"))
				}
				period = n
			}
		}
		if period > 0 || !c.Has("attention.sliding_window_pattern") {
			for l := range p.Local {
				// llama.cpp's set_swa_pattern: a period of 0 makes every layer local.
				p.Local[l] = period == 0 || uint64(l)%period < period-1
			}
		}
	}

	// RoPE: linear scaling for global layers; Gemma 2's local layers share it.
	typ := c.String("rope.scaling.type", "linear")
	factor := c.Float("rope.scaling.factor", c.Float("rope.scale_linear", 0))
	switch typ {
	case "none":
		factor = 0
	case "linear":
	default:
		return bad("rope.scaling.type %q is not supported for %s (known: none, linear)", typ, name)
	}
	if factor < 0 || math.IsNaN(factor) || math.IsInf(factor, 0) {
		return bad("%s.rope.scaling.factor is %v, want a positive factor", name, factor)
	}
	if factor != 0 && factor != 1 {
		p.GlobalFactors = make([]float32, a.RopeDim/2)
		for i := range p.GlobalFactors {
			p.GlobalFactors[i] = float32(factor)
		}
	}
	switch name {
	case "gemma2":
		p.LocalRopeBase = float32(c.Float("rope.freq_base_swa", float64(a.RopeBase)))
		p.LocalFactors = p.GlobalFactors
	case "gemma3":
		p.LocalRopeBase = float32(c.Float("rope.freq_base_swa", 10000))
	}
	if !(p.LocalRopeBase > 0) || !(a.RopeBase > 0) {
		return bad("RoPE bases %v (global) and %v (local), want positive", a.RopeBase, p.LocalRopeBase)
	}

	// Query scale: gemma_pytorch's query_pre_attn_scalar, which llama.cpp
	// takes as dim/heads for the 27B shapes and the head size otherwise.
	qpre := a.HeadDim
	if (name == "gemma2" && a.Layers == 46) || (name == "gemma3" && a.Layers == 62) {
		qpre = a.Dim / a.Heads
	}
	p.AttnScale = 1 / float32(math.Sqrt(float64(qpre)))
	p.EmbedScale = float32(math.Sqrt(float64(a.Dim)))

	// Soft-capping.
	capKey := func(key string, def float64) (float32, error) {
		v := c.Float(key, def)
		if c.Has(key) && !(v > 0) && !(name == "gemma3" && v == 0) {
			return 0, fmt.Errorf("%s: %s: %s.%s is %v, want a positive cap", name, src.Path, name, key, v)
		}
		return float32(v), nil
	}
	switch name {
	case "gemma2":
		if p.AttnSoftcap, err = capKey("attn_logit_softcapping", 50); err != nil {
			return Params{}, err
		}
		if p.FinalSoftcap, err = capKey("final_logit_softcapping", 30); err != nil {
			return Params{}, err
		}
	case "gemma3":
		if p.FinalSoftcap, err = capKey("final_logit_softcapping", 0); err != nil {
			return Params{}, err
		}
	}
	return p, nil
}

// ReadArch reads the model.Arch of a gemma2 or gemma3 file.
func ReadArch(src *model.Source) (model.Arch, error) {
	p, err := ReadParams(src)
	return p.Arch, err
}

// asCount reads key as a non-negative integer of any GGUF integer type.
func asCount(c model.Config, key string) (uint64, bool) {
	const absent = math.MaxUint64 // Config.Uint never returns it for a value
	v := c.Uint(key, absent)
	return v, v != absent
}

func raw(c model.Config, key string) string {
	r, _ := c.Raw(c.Architecture() + "." + key)
	return fmt.Sprintf("%v (%T)", r, r)
}
