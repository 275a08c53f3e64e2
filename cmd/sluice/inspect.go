package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/tokenizer"
)

type inspectTensor struct {
	Name  string `json:"name"`
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	Bytes int64  `json:"bytes"`
}

type inspectReport struct {
	Path                 string          `json:"path"`
	Format               string          `json:"format"`
	Architecture         string          `json:"architecture"`
	Arch                 *model.Arch     `json:"hyperparameters,omitempty"`
	Parameters           int64           `json:"parameters"`
	TensorBytes          int64           `json:"tensor_bytes"`
	KVBytesPerToken      int64           `json:"kv_bytes_per_token,omitempty"`
	KVBytesContext       int64           `json:"kv_bytes_context,omitempty"`
	Tensors              []inspectTensor `json:"tensors"`
	Metadata             map[string]any  `json:"metadata,omitempty"`
	DTypes               map[string]int  `json:"dtypes"`
	ArchError            string          `json:"arch_error,omitempty"`
	VocabularyTokenCount int             `json:"vocab_tokens,omitempty"`
}

func cmdInspect(ctx context.Context, e *env, args []string) error {
	fs := e.flags("inspect")
	asJSON := fs.Bool("json", false, "print one JSON object")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	path, err := oneArg(pos, "MODEL")
	if err != nil {
		return err
	}
	src, err := model.OpenSource(path)
	if err != nil {
		return err
	}
	r := inspectReport{Path: path, Format: src.Format.String(), Architecture: src.Config.Architecture(), DTypes: map[string]int{}}
	for _, t := range src.Tensors {
		r.Tensors = append(r.Tensors, inspectTensor{t.Name, t.DType.String(), t.Shape, t.Size})
		r.Parameters += t.Elements()
		r.TensorBytes += t.Size
		r.DTypes[t.DType.String()]++
	}
	if a, err := llama.ReadArch(src); err == nil {
		r.Arch = &a
		r.KVBytesPerToken = a.KVBytesPerToken()
		r.KVBytesContext = a.KVBytesPerToken() * int64(a.Context)
	} else if len(src.Tensors) > 0 {
		r.ArchError = err.Error()
	}
	r.Metadata = map[string]any{}
	for _, k := range src.Config.Keys() {
		v, _ := src.Config.Raw(k)
		r.Metadata[k] = summarize(v)
	}
	if src.GGUF != nil {
		if tok, err := tokenizer.FromGGUF(src.GGUF); err == nil {
			r.VocabularyTokenCount = tok.VocabSize()
		}
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	printInspect(e.stdout, r)
	return nil
}

// summarize shortens long arrays (vocabularies) for display.
func summarize(v any) any {
	switch a := v.(type) {
	case []string:
		if len(a) > 8 {
			return fmt.Sprintf("[%d strings: %q …]", len(a), a[:4])
		}
	case []float32:
		if len(a) > 8 {
			return fmt.Sprintf("[%d float32]", len(a))
		}
	case []int32:
		if len(a) > 8 {
			return fmt.Sprintf("[%d int32]", len(a))
		}
	case []uint32:
		if len(a) > 8 {
			return fmt.Sprintf("[%d uint32]", len(a))
		}
	}
	return v
}

func printInspect(w io.Writer, r inspectReport) {
	fmt.Fprintf(w, "file:          %s (%s)\n", r.Path, r.Format)
	fmt.Fprintf(w, "architecture:  %s\n", r.Architecture)
	if a := r.Arch; a != nil {
		fmt.Fprintf(w, "dim %d, hidden %d, layers %d, heads %d, kv heads %d, head dim %d, rope dim %d, vocab %d, context %d\n",
			a.Dim, a.Hidden, a.Layers, a.Heads, a.KVHeads, a.HeadDim, a.RopeDim, a.Vocab, a.Context)
		fmt.Fprintf(w, "rope base %g, rms eps %g, tied output %v, sliding window %d\n", a.RopeBase, a.Eps, a.TiedOutput, a.SlidingWindow)
		fmt.Fprintf(w, "kv cache:      %d bytes per token (2·L·G·d·4), %s for the full context of %d\n",
			r.KVBytesPerToken, humanBytes(r.KVBytesContext), a.Context)
	}
	if r.ArchError != "" {
		fmt.Fprintf(w, "architecture error: %s\n", r.ArchError)
	}
	if r.VocabularyTokenCount > 0 {
		fmt.Fprintf(w, "vocabulary:    %d tokens\n", r.VocabularyTokenCount)
	}
	var dts []string
	for k, n := range r.DTypes {
		dts = append(dts, fmt.Sprintf("%s×%d", k, n))
	}
	slices.Sort(dts)
	fmt.Fprintf(w, "parameters:    %d (%s of tensors: %s)\n", r.Parameters, humanBytes(r.TensorBytes), strings.Join(dts, ", "))
	if len(r.Tensors) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nTENSOR\tTYPE\tSHAPE\tBYTES")
		for _, t := range r.Tensors {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\n", t.Name, t.DType, t.Shape, t.Bytes)
		}
		tw.Flush()
	}
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func cmdTokenize(ctx context.Context, e *env, args []string) error {
	fs := e.flags("tokenize")
	m := fs.String("m", "", "model or vocabulary file (.gguf, or a llama2.c .bin with --tokenizer)")
	tokPath := fs.String("tokenizer", "", "llama2.c tokenizer.bin")
	bos := fs.Bool("bos", false, "prepend BOS")
	special := fs.Bool("parse-special", false, "turn the text of control tokens (<|im_end|>, <s>, …) into those tokens, as llama.cpp's parse_special")
	pre := fs.String("tokenizer-pre", "", "byte-level BPE pre-tokenizer to use instead of the file's tokenizer.ggml.pre (a name llama.cpp knows)")
	inp := fs.String("inp", "", "read llama.cpp tokenizer test cases (test-tokenizer-0's .inp: each text followed by a line __ggml_vocab_test__) from FILE instead of standard input and print one line of ids per case, as its .out files")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	tok, err := openTokenizer(*m, *tokPath, *pre)
	if err != nil {
		return err
	}
	o := tokenizer.EncodeOptions{BOS: *bos, ParseSpecial: *special}
	var sb strings.Builder
	if *inp != "" {
		data, err := os.ReadFile(*inp)
		if err != nil {
			return err
		}
		const sep = "\n__ggml_vocab_test__\n"
		cases := strings.Split(string(data), sep)
		if cases[len(cases)-1] != "" {
			return fmt.Errorf("%s: byte %d: the last case is not followed by %q", *inp, len(data)-len(cases[len(cases)-1]), sep)
		}
		for _, c := range cases[:len(cases)-1] {
			for _, id := range tok.Encode(c, o) {
				fmt.Fprintf(&sb, " %d", id)
			}
			sb.WriteByte('\n')
		}
		_, err = io.WriteString(e.stdout, sb.String())
		return err
	}
	in, err := io.ReadAll(e.stdin)
	if err != nil {
		return fmt.Errorf("read standard input: %w", err)
	}
	ids := tok.Encode(string(in), o)
	for i, id := range ids {
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprint(&sb, id)
	}
	sb.WriteByte('\n')
	_, err = io.WriteString(e.stdout, sb.String())
	return err
}

// openTokenizer finds the vocabulary: a llama2.c tokenizer.bin (its size from
// the model when one is given), or the one inside a GGUF file.
// pre, when set, replaces a GGUF vocabulary's tokenizer.ggml.pre.
func openTokenizer(modelPath, tokPath, pre string) (tokenizer.Tokenizer, error) {
	if tokPath != "" {
		vocab := 0
		if modelPath != "" {
			src, err := model.OpenSource(modelPath)
			if err != nil {
				return nil, err
			}
			a, err := llama.ReadArch(src)
			if err != nil {
				return nil, err
			}
			vocab = a.Vocab
		}
		return tokenizer.LoadLlama2C(tokPath, vocab)
	}
	if modelPath == "" {
		return nil, fmt.Errorf("tokenize: give -m MODEL_OR_VOCAB or --tokenizer TOK: %w", errUsage)
	}
	if _, err := os.Stat(modelPath); err != nil {
		return nil, err
	}
	g, err := gguf.Open(modelPath)
	if err != nil {
		return nil, fmt.Errorf("%w (a llama2.c .bin model needs --tokenizer)", err)
	}
	return tokenizer.FromGGUFOptions(g, tokenizer.GGUFOptions{Pre: pre})
}
