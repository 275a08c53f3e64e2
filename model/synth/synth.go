// Package synth writes seeded synthetic Llama models as GGUF files.
//
// Real checkpoints bigger than a few hundred kilobytes cannot live in the
// repository, yet speed, memory and offload work needs models in real shapes
// (Llama-2 15M/110M from llama2.c, a 1B and a 7B shape). synth produces them
// from a seed: the same Options always give the same bytes, whatever the
// number of goroutines, so a file can be regenerated instead of stored.
//
// The files use llama.cpp's tensor names and metadata keys, so llama.cpp, the
// sluice loader and any GGUF tool read them like a converted checkpoint.
// Weights are N(0, Std²) with Std 0.02 by default; norm weights are 1 plus
// noise of the same size; the token embedding has its own, larger standard
// deviation (EmbedStd, 1 by default) and the output matrix is separate from
// it, so greedy decoding of a random model produces varied tokens and a
// parity check between two engines compares something non-trivial.
//
// Write streams: it never holds more than a few megabytes of tensor data, so
// the 1B preset (3.4 GB as f32) is written with a bounded footprint.
package synth

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/sluicehq/sluice/tensor"
)

// Sentinel errors; every error returned by this package wraps one of them or
// an I/O error.
var (
	// ErrUnknownPreset: LookupPreset was given a name no preset has.
	ErrUnknownPreset = errors.New("synth: unknown preset")
	// ErrInvalid: the Options or the Preset cannot describe a Llama model
	// (zero sizes, heads that do not divide the width, an unsupported dtype, …).
	ErrInvalid = errors.New("synth: invalid options")
	// ErrTokenizer: a llama2.c tokenizer.bin is malformed or does not fit the
	// preset's vocabulary size.
	ErrTokenizer = errors.New("synth: bad tokenizer")
)

// Preset is the shape of a synthetic model. Vocab is the number of tokens;
// with the generated vocabulary it may be anything from 259 (specials and
// byte pieces only) to MaxGeneratedVocab.
type Preset struct {
	Name    string
	Dim     int // embedding width
	Hidden  int // feed-forward width
	Layers  int
	Heads   int // query heads; head size is Dim/Heads
	KVHeads int // key/value heads (grouped-query attention when < Heads)
	Context int // llama.context_length
	Vocab   int
}

// The built-in presets. tiny-k is the smallest shape whose every row (Dim,
// Hidden, Heads·HeadDim) is a whole number of 256-weight K-quant
// super-blocks, so `sluice quantize --type q4_k_m` and llama-quantize give
// each tensor its K type instead of falling back to Q5_0/Q8_0 (a few MB at
// F32). 15m and 110m are llama2.c's TinyStories shapes, 1b is the
// Llama-3.2-1B body (16 layers, GQA 32/8) with TinyLlama's feed-forward width
// and Llama 2's vocabulary, 7b is Llama-2-7B.
var presets = []Preset{
	{Name: "tiny", Dim: 64, Hidden: 176, Layers: 2, Heads: 4, KVHeads: 2, Context: 256, Vocab: 512},
	{Name: "tiny-k", Dim: 256, Hidden: 512, Layers: 4, Heads: 4, KVHeads: 2, Context: 256, Vocab: 512},
	{Name: "15m", Dim: 288, Hidden: 768, Layers: 6, Heads: 6, KVHeads: 6, Context: 256, Vocab: 32000},
	{Name: "110m", Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, KVHeads: 12, Context: 1024, Vocab: 32000},
	{Name: "1b", Dim: 2048, Hidden: 5632, Layers: 16, Heads: 32, KVHeads: 8, Context: 2048, Vocab: 32000},
	{Name: "7b", Dim: 4096, Hidden: 11008, Layers: 32, Heads: 32, KVHeads: 32, Context: 4096, Vocab: 32000},
}

// Presets returns the built-in presets, smallest first. The slice is a copy.
func Presets() []Preset { return append([]Preset(nil), presets...) }

// LookupPreset returns the preset called name; an unknown name gives an error
// wrapping ErrUnknownPreset that lists the known names.
func LookupPreset(name string) (Preset, error) {
	names := make([]string, len(presets))
	for i, p := range presets {
		if p.Name == name {
			return p, nil
		}
		names[i] = p.Name
	}
	return Preset{}, fmt.Errorf("synth: preset %q: %w (known: %s)", name, ErrUnknownPreset, strings.Join(names, ", "))
}

// HeadDim is the size of one attention head.
func (p Preset) HeadDim() int {
	if p.Heads <= 0 {
		return 0
	}
	return p.Dim / p.Heads
}

// Params is the number of weights a model of this shape holds (output matrix
// separate from the embedding).
func (p Preset) Params() int64 {
	d, h, v := int64(p.Dim), int64(p.Hidden), int64(p.Vocab)
	kv := int64(p.KVHeads) * int64(p.HeadDim())
	perLayer := 2*d + 2*d*d + 2*d*kv + 3*d*h
	return 2*v*d + d + int64(p.Layers)*perLayer
}

// maxDim bounds every dimension so sizes stay far from int64 overflow and a
// typo cannot ask for an exabyte file.
const maxDim = 1 << 20

// validate checks that p describes a Llama model this package can write.
func (p Preset) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"Dim", p.Dim}, {"Hidden", p.Hidden}, {"Layers", p.Layers}, {"Heads", p.Heads}, {"KVHeads", p.KVHeads}, {"Context", p.Context}, {"Vocab", p.Vocab}} {
		if f.v < 1 || f.v > maxDim {
			return fmt.Errorf("synth: preset %q: %s = %d, want 1..%d: %w", p.Name, f.name, f.v, maxDim, ErrInvalid)
		}
	}
	if p.Dim%p.Heads != 0 {
		return fmt.Errorf("synth: preset %q: Dim %d is not a multiple of Heads %d: %w", p.Name, p.Dim, p.Heads, ErrInvalid)
	}
	if p.Heads%p.KVHeads != 0 {
		return fmt.Errorf("synth: preset %q: Heads %d is not a multiple of KVHeads %d: %w", p.Name, p.Heads, p.KVHeads, ErrInvalid)
	}
	if p.HeadDim()%2 != 0 {
		return fmt.Errorf("synth: preset %q: head size %d is odd; RoPE rotates pairs: %w", p.Name, p.HeadDim(), ErrInvalid)
	}
	if p.Vocab < minVocab {
		return fmt.Errorf("synth: preset %q: Vocab %d is below %d (3 specials and 256 byte pieces): %w", p.Name, p.Vocab, minVocab, ErrInvalid)
	}
	return nil
}

// Options says what Write produces.
type Options struct {
	Preset Preset
	// Arch is the architecture (see Archs); "" is llama.
	Arch string
	// HeadDim is the size of one attention head, written as
	// attention.key_length and value_length; 0 means Dim/Heads (and writes
	// no key). The query projection is Heads·HeadDim wide.
	HeadDim int
	// DType is the type of every matrix (token_embd and output included):
	// tensor.F32, F16, BF16, Q8_0 or Q4_0. Norm weights are always F32, as
	// llama.cpp requires. A matrix whose row length is not a whole number of
	// quantization blocks (the tiny preset's ffn_down, 176 wide) cannot be
	// stored in that type and is F16 instead; GGUF types each tensor on its
	// own, so llama.cpp reads such mixed files.
	DType tensor.DType
	Seed  uint64
	// TokenizerPath is a llama2.c tokenizer.bin (Llama 2's has 32000 pieces)
	// whose piece count must equal Preset.Vocab. "" means the generated
	// SentencePiece-style vocabulary (see GeneratedVocab).
	TokenizerPath string
	// Std is the standard deviation of the weights; 0 means the
	// architecture's (Arch.Std: DefaultStd for llama).
	Std float32
	// EmbedStd is the standard deviation of token_embd; 0 means the
	// architecture's (Arch.EmbedStd: DefaultEmbedStd for llama).
	EmbedStd float32
	// Window overrides the architecture's attention.sliding_window (gemma2,
	// gemma3); 0 keeps it. A synthetic model runs far fewer tokens than a
	// real window, so tests set one that binds.
	Window int
	// AttnSoftcap overrides the architecture's attn_logit_softcapping
	// (gemma2); 0 keeps it.
	AttnSoftcap float32
	// Workers is the number of goroutines generating weights; 0 means
	// GOMAXPROCS. The output does not depend on it.
	Workers int
	// Progress, when set, is called from Write's goroutine after each chunk
	// of tensor data with the bytes of tensor data written so far and the
	// total; a CLI hangs a progress bar on it.
	Progress func(doneBytes, totalBytes int64)
}

// DefaultStd is the weight standard deviation used when Options.Std is 0
// (the usual initializer range of Llama-family models).
const DefaultStd = 0.02

// DefaultEmbedStd is the token embedding's standard deviation when
// Options.EmbedStd is 0. The first RMSNorm rescales the embedding anyway, so
// its size only sets how much the current token weighs in the residual
// stream against what the layers add (about Std²·Dim per layer). At 0.02 the
// layers' context average swamps it and greedy decoding of a random model
// collapses into repeating a few tokens (7 to 17 distinct tokens in 64 for
// the 15m and 110m presets); at 1 it stays varied (about 70 distinct), which
// is what parity tests between engines need.
const DefaultEmbedStd = 1

// fileType is GGUF general.file_type (llama.cpp llama_ftype) for a dtype.
func fileType(dt tensor.DType) (uint32, bool) {
	switch dt {
	case tensor.F32:
		return 0, true // LLAMA_FTYPE_ALL_F32
	case tensor.F16:
		return 1, true // MOSTLY_F16
	case tensor.Q4_0:
		return 2, true // MOSTLY_Q4_0
	case tensor.Q8_0:
		return 7, true // MOSTLY_Q8_0
	case tensor.BF16:
		return 32, true // MOSTLY_BF16
	}
	return 0, false
}

// checkStd returns v, or def when v is 0, or an error for a negative or
// non-finite v.
func checkStd(field string, v, def float32) (float32, error) {
	if v == 0 {
		return def, nil
	}
	if v < 0 || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return 0, fmt.Errorf("synth: %s %v, want a positive finite value (0 = %v): %w", field, v, def, ErrInvalid)
	}
	return v, nil
}
