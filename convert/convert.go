// Package convert turns checkpoints in other layouts into GGUF files (F32),
// named and keyed as llama.cpp's converters write them, so llama.cpp and every
// sluice loader read the result like any other GGUF:
//
//   - a llama2.c checkpoint (.bin) and its tokenizer.bin, as llama.cpp's
//     convert-llama2c-to-ggml does; llama2.c already rotates adjacent pairs
//     in RoPE, so its Q and K rows are copied as they are;
//   - a Hugging Face llama, mistral or qwen2 directory (config.json and
//     model.safetensors, or shards named by model.safetensors.index.json), as
//     convert_hf_to_gguf.py does: HF names become GGUF names; for llama and
//     mistral (arch llama) the Q and K rows of each head are permuted from
//     HF's rotate-half layout to GGML's adjacent pairs, for qwen2 (arch
//     qwen2, NEOX RoPE) they are copied with their Q, K and V biases.
//
// The vocabulary comes from a llama2.c tokenizer.bin (Options.Tokenizer), or
// for a Hugging Face directory without one from its tokenizer.json (and
// tokenizer_config.json): byte-level BPE becomes a "gpt2" vocabulary with
// its tokenizer.ggml.pre, SentencePiece-style BPE a "llama" one (see
// tokenizer.ParseHFTokenizer). Without either the file has weights only and
// needs `--tokenizer` wherever it is loaded.
//
// The converted tensors are held in memory until the file is written, which
// is fine for the models sluice converts today (the F32 output is the size of
// the model anyway).
package convert

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/llama2c"
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

// Sentinel errors; every error from this package wraps one of them or an
// error of the format packages.
var (
	ErrUnsupported = errors.New("convert: unsupported")
	ErrConfig      = errors.New("convert: bad config")
	ErrMissing     = errors.New("convert: missing tensor")
	ErrShape       = errors.New("convert: shape mismatch")
	ErrVocab       = errors.New("convert: vocabulary does not fit")
)

// Options configure a conversion.
type Options struct {
	// Tokenizer is a llama2.c tokenizer.bin whose pieces become the
	// tokenizer.ggml.* keys. "" writes no vocabulary (with a warning).
	Tokenizer string
	// TokenizerPre forces tokenizer.ggml.pre for a byte-level tokenizer.json
	// whose pre-tokenizer is not recognised.
	TokenizerPre string
	// Name is general.name; "" means the input's base name.
	Name string
	// Logger receives warnings; the zero value discards them.
	Logger zerolog.Logger
}

// File converts in, a llama2.c checkpoint or a Hugging Face model directory,
// into the GGUF file out.
func File(in, out string, o Options) error {
	st, err := os.Stat(in)
	if err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	var w *gguf.Writer
	if st.IsDir() {
		w, err = HF(in, o)
	} else {
		w, err = Llama2C(in, o)
	}
	if err != nil {
		return err
	}
	if err := w.WriteFile(out); err != nil {
		return fmt.Errorf("convert: %w", err)
	}
	return nil
}

// Llama2C converts the llama2.c checkpoint at path. A shared classifier gives
// no output.weight: GGUF llama readers then use token_embd, as llama.cpp does.
func Llama2C(path string, o Options) (*gguf.Writer, error) {
	f, err := llama2c.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	defer r.Close()
	c := f.Config
	m := metadata{
		name: o.Name, dim: c.Dim, hidden: c.HiddenDim, layers: c.Layers, heads: c.Heads, kvHeads: c.KVHeads,
		context: c.SeqLen, vocab: c.VocabSize, ropeBase: 10000, eps: 1e-5,
	}
	if m.name == "" {
		m.name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	w := gguf.NewWriter()
	if err := m.write(w, path, o); err != nil {
		return nil, err
	}
	for _, t := range ggufOrder(f.Tensors) {
		data := make([]byte, t.Size)
		if _, err := r.ReadAt(data, t.Offset); err != nil {
			return nil, fmt.Errorf("convert: %s: tensor %s at offset %d: %w", path, t.Name, t.Offset, err)
		}
		if err := w.AddTensor(t.Name, tensor.F32, t.Shape, data); err != nil {
			return nil, fmt.Errorf("convert: %s: %w", path, err)
		}
	}
	return w, nil
}

// ggufOrder sorts tensors as llama.cpp writes them: token_embd, output_norm,
// output, then each block in order.
func ggufOrder(ts []tensor.Info) []tensor.Info {
	rank := func(name string) int {
		switch name {
		case "token_embd.weight":
			return -3
		case "output_norm.weight":
			return -2
		case "output.weight":
			return -1
		}
		var l int
		fmt.Sscanf(name, "blk.%d.", &l)
		return l
	}
	out := slices.Clone(ts)
	slices.SortStableFunc(out, func(a, b tensor.Info) int {
		return rank(a.Name) - rank(b.Name)
	})
	return out
}

// metadata is the hyperparameters every converted file records.
type metadata struct {
	arch                                string // general.architecture and the keys' prefix; "" is llama
	name                                string
	dim, hidden, layers, heads, kvHeads int
	context, vocab                      int
	ropeBase, eps                       float32
	hfDir                               string // an HF directory: its tokenizer.json is the vocabulary without o.Tokenizer
}

// write adds the general.*, <arch>.* and (with o.Tokenizer or the HF
// directory's tokenizer.json) tokenizer.ggml.* keys. src names the input in
// errors.
func (m metadata) write(w *gguf.Writer, src string, o Options) error {
	a := m.arch
	if a == "" {
		a = "llama"
	}
	kvs := []gguf.KV{
		{Key: "general.architecture", Value: a},
		{Key: "general.name", Value: m.name},
		{Key: "general.file_type", Value: uint32(0)}, // LLAMA_FTYPE_ALL_F32
		{Key: a + ".context_length", Value: uint32(m.context)},
		{Key: a + ".embedding_length", Value: uint32(m.dim)},
		{Key: a + ".block_count", Value: uint32(m.layers)},
		{Key: a + ".feed_forward_length", Value: uint32(m.hidden)},
		{Key: a + ".rope.dimension_count", Value: uint32(m.dim / m.heads)},
		{Key: a + ".attention.head_count", Value: uint32(m.heads)},
		{Key: a + ".attention.head_count_kv", Value: uint32(m.kvHeads)},
		{Key: a + ".attention.layer_norm_rms_epsilon", Value: m.eps},
		{Key: a + ".rope.freq_base", Value: m.ropeBase},
		{Key: a + ".vocab_size", Value: uint32(m.vocab)},
	}
	hfTok := ""
	if m.hfDir != "" {
		if _, err := os.Stat(filepath.Join(m.hfDir, tokenizer.HFTokenizerFile)); err == nil {
			hfTok = filepath.Join(m.hfDir, tokenizer.HFTokenizerFile)
		}
	}
	switch {
	case o.Tokenizer == "" && hfTok != "":
		v, err := tokenizer.LoadHFTokenizer(m.hfDir, tokenizer.HFOptions{VocabSize: m.vocab, Pre: o.TokenizerPre})
		if err != nil {
			if errors.Is(err, tokenizer.ErrVocabMismatch) {
				return fmt.Errorf("%w: %w", ErrVocab, err)
			}
			return fmt.Errorf("convert: %w", err)
		}
		kvs = append(kvs, v.GGUF()...)
	case o.Tokenizer == "":
		o.Logger.Warn().Str("input", src).Msg("no --tokenizer given and no tokenizer.json: the GGUF has no vocabulary; load it with --tokenizer tokenizer.bin")
	default:
		v, err := tokenizer.LoadLlama2CVocab(o.Tokenizer)
		if err != nil {
			return fmt.Errorf("convert: %w", err)
		}
		if v.Len() != m.vocab {
			return fmt.Errorf("%w: %s has %d pieces, %s a vocabulary of %d", ErrVocab, o.Tokenizer, v.Len(), src, m.vocab)
		}
		kvs = append(kvs, v.GGUF()...)
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			return fmt.Errorf("convert: %s: %w", src, err)
		}
	}
	return nil
}
