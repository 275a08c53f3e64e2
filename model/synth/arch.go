package synth

import (
	"fmt"
	"math"
	"strings"
)

// Arch is an architecture a synthetic file is written as. Each one uses
// llama.cpp's general.architecture, keys and tensor names for it, so
// llama.cpp runs the file as it runs a converted checkpoint of that family.
type Arch struct {
	Name     string // --arch value
	GGUFArch string // general.architecture and the prefix of its keys
	RopeBase float32
	Eps      float32
	// Tied omits output.weight: the head reuses token_embd (Llama 3.2,
	// Qwen2.5 0.5B).
	Tied bool
	// RopeFreqs writes rope_freqs.weight: Llama 3.1's frequency divisors
	// (factor 8, low 1, high 4, original context 8192) as the converter
	// computes them.
	RopeFreqs bool
	// QKVBias writes attn_q.bias, attn_k.bias and attn_v.bias (qwen2).
	QKVBias bool
	// QKNorm writes attn_q_norm.weight and attn_k_norm.weight (qwen3).
	QKNorm bool
	// Fused writes attn_qkv (Q, K and V rows in one matrix) and an ffn_up
	// of gate rows then up rows, without ffn_gate (phi3).
	Fused bool
	// Specials are control tokens that take the places of the last pieces
	// of the generated vocabulary: llama.cpp looks phi3's "<|endoftext|>"
	// up by its text.
	Specials []string
	// PostNorms writes Gemma's post_attention_norm and post_ffw_norm.
	PostNorms bool
	// Window is attention.sliding_window (Options.Window overrides it); 0
	// writes no key.
	Window int
	// AttnSoftcap and FinalSoftcap are attn_logit_softcapping and
	// final_logit_softcapping (Options.AttnSoftcap overrides the first); 0
	// writes no key.
	AttnSoftcap, FinalSoftcap float32
	// RopeLinear is a linear rope.scaling factor (Gemma 3's global layers);
	// 0 writes no scaling keys.
	RopeLinear float32
	// Std and EmbedStd are the defaults of Options.Std and EmbedStd.
	Std, EmbedStd float32
}

// The architectures gen-model writes. llama3's output is tied as in
// Llama 3.2 1B and 3B.
//
// llama keeps the first presets' weights (Std 0.02, EmbedStd 1), under which
// the current token's large embedding dominates the residual stream: greedy
// output is varied, but mostly a function of the last token. The other
// architectures default to Std = EmbedStd = 0.2, where the layers weigh as
// much as the embedding: flipping the RoPE pairing, or dropping the biases,
// Q/K norms or rope_freqs, changes the greedy ids of a 64-token run on the
// tiny preset (model/archs tests this), so ids that match llama.cpp check
// the attention path and not only a bigram map. Tied output needs it too: with
// EmbedStd 1 the head would echo the current token forever.
var archs = []Arch{
	{Name: "llama", GGUFArch: "llama", RopeBase: 10000, Eps: 1e-5, Std: DefaultStd, EmbedStd: DefaultEmbedStd},
	{Name: "llama3", GGUFArch: "llama", RopeBase: 500000, Eps: 1e-5, Tied: true, RopeFreqs: true, Std: 0.2, EmbedStd: 0.2},
	{Name: "qwen2", GGUFArch: "qwen2", RopeBase: 1000000, Eps: 1e-6, QKVBias: true, Std: 0.2, EmbedStd: 0.2},
	{Name: "qwen3", GGUFArch: "qwen3", RopeBase: 1000000, Eps: 1e-6, QKNorm: true, Std: 0.2, EmbedStd: 0.2},
	{Name: "phi3", GGUFArch: "phi3", RopeBase: 10000, Eps: 1e-5, Fused: true, Specials: []string{"<|endoftext|>"}, Std: 0.2, EmbedStd: 0.2},
	// Gemma 2 (2B/9B): window 4096 on every other layer, caps 50 and 30,
	// output tied. Gemma 3 (4B and up): 5 local layers (window 1024) to 1
	// global, global RoPE at 1e6 scaled linearly by 8, Q/K norms, tied.
	// Their embedding is scaled by √dim and their head is tied: EmbedStd
	// 0.02 keeps the current token's row from dominating the logits (at
	// 0.2 greedy decoding echoes the last token; model/archs has 20 to 50
	// distinct tokens in 64 at 0.02).
	{Name: "gemma2", GGUFArch: "gemma2", RopeBase: 10000, Eps: 1e-6, Tied: true, PostNorms: true, Window: 4096, AttnSoftcap: 50, FinalSoftcap: 30, Std: 0.2, EmbedStd: 0.02},
	{Name: "gemma3", GGUFArch: "gemma3", RopeBase: 1000000, Eps: 1e-6, Tied: true, PostNorms: true, QKNorm: true, Window: 1024, RopeLinear: 8, Std: 0.2, EmbedStd: 0.02},
}

// Archs returns the architectures Write knows, in a fixed order. The slice
// is a copy.
func Archs() []Arch { return append([]Arch(nil), archs...) }

// LookupArch returns the architecture called name ("" is llama); an unknown
// name gives an error wrapping ErrInvalid that lists the known names.
func LookupArch(name string) (Arch, error) {
	if name == "" {
		name = "llama"
	}
	names := make([]string, len(archs))
	for i, a := range archs {
		if a.Name == name {
			return a, nil
		}
		names[i] = a.Name
	}
	return Arch{}, fmt.Errorf("synth: architecture %q: %w (known: %s)", name, ErrInvalid, strings.Join(names, ", "))
}

// llama31Factors are Llama 3.1's rope_freqs for a head of ropeDim rotary
// dimensions: the converter's computation (wavelength of each float32
// frequency against the original context over the low and high frequency
// factors).
func llama31Factors(base float32, ropeDim int) []float32 {
	const factor, low, high, orig = 8.0, 1.0, 4.0, 8192.0
	f := make([]float32, ropeDim/2)
	for i := range f {
		freq := 1 / float32(math.Pow(float64(base), float64(float32(2*i)/float32(ropeDim))))
		wave := 2 * math.Pi / float64(freq)
		switch {
		case wave < orig/high:
			f[i] = 1
		case wave > orig/low:
			f[i] = factor
		default:
			s := (orig/wave - low) / (high - low)
			f[i] = float32(1 / ((1-s)/factor + s))
		}
	}
	return f
}
