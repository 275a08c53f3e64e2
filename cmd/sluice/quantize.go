package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/compress/quant"
	"github.com/sluicehq/sluice/convert"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/llama2c"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/modelfile"
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

func cmdQuantize(ctx context.Context, e *env, args []string) error {
	fs := e.flags("quantize")
	in := fs.String("m", "", "input model: .gguf, or a llama2.c .bin (then --tokenizer is needed)")
	tok := fs.String("tokenizer", "", "llama2.c tokenizer.bin whose vocabulary is copied into the GGUF (llama2.c input only)")
	out := fs.String("o", "", "output GGUF file (required)")
	typ := fs.String("type", "", "layout of the weight matrices: "+schemeNames()+"; or one of llama.cpp's K-quant mixes (per-tensor types as llama-quantize picks them): "+mixNames())
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("quantize: unexpected arguments %q: %w", pos, errUsage)
	}
	if mix, ok := quant.ParseMix(*typ); ok {
		return quantizeMix(ctx, e, mix, *in, *tok, *out)
	}
	s, err := quant.ParseScheme(*typ)
	if err != nil {
		return fmt.Errorf("quantize: unknown quantize type %s; valid: %s, %s: %w", *typ, schemeNames(), mixNames(), errUsage)
	}
	src, err := openRewrite(*in, *tok, *out)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	defer src.close()

	// The output streams tensor by tensor: which matrices are quantized
	// depends only on their shapes, so the metadata (which counts them) is
	// known before any weight is read, and WriteFile below reads, converts
	// and writes one tensor at a time.
	w := gguf.NewWriter()
	var kept []string
	var keptCols []int
	quantized := 0
	for _, t := range src.tensors {
		var err error
		switch cols := t.Cols(); {
		case len(t.Shape) != 2: // norms and other vectors keep their type
			err = w.AddTensorFunc(t.Name, t.DType, t.Shape, src.copyRaw(ctx, t))
		case !s.LlamaCppReadable(cols) && s.DType() < tensor.FirstExtension:
			// q8_0/q4_0 rows must be whole 32-weight blocks; sluice's padded
			// variant has no dtype id, so this matrix stays exact.
			kept, keptCols = append(kept, t.Name), append(keptCols, cols)
			err = w.AddTensorFunc(t.Name, tensor.F32, t.Shape, func(out io.Writer) error {
				vals, err := src.f32Ctx(ctx, t)
				if err != nil {
					return err
				}
				_, err = out.Write(tensor.F32Bytes(vals))
				return err
			})
		default:
			quantized++
			err = w.AddTensorFunc(t.Name, s.DType(), t.Shape, func(out io.Writer) error {
				vals, err := src.f32Ctx(ctx, t)
				if err != nil {
					return err
				}
				rows, cols := t.Rows(), t.Cols()
				q := make([]byte, s.MatrixBytes(rows, cols))
				if err := s.Quantize(q, vals, rows, cols); err != nil {
					return fmt.Errorf("%s: tensor %s: %w", src.path, t.Name, err)
				}
				_, err = out.Write(q)
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("quantize: %s: %w", *out, err)
		}
	}
	note := fmt.Sprintf("sluice quantize --type %v: %d weight matrices quantized", s, quantized)
	var keptMsg string
	if len(kept) > 0 {
		slices.Sort(keptCols)
		keptCols = slices.Compact(keptCols)
		keptMsg = fmt.Sprintf("kept %d tensors in f32: cols %s not a multiple of %d (%s)", len(kept), joinInts(keptCols), s.Group, strings.Join(kept, ", "))
		note += "; " + keptMsg
	}
	meta := map[string]any{
		"general.file_type":          fileTypeOf(s.DType()),
		"general.quantization_notes": note,
	}
	if s.DType() < tensor.FirstExtension {
		meta["general.quantization_version"] = uint32(2)
	}
	if err := src.writeMeta(w, meta); err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	size, err := writeGGUF(w, *out)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s: %v, %d weight matrices quantized, %d → %d bytes (%.1f%%)\n",
		*out, s, quantized, src.size, size, 100*float64(size)/float64(src.size))
	if keptMsg != "" {
		fmt.Fprintln(e.stdout, keptMsg)
	}
	zerolog.Ctx(ctx).Info().Str("in", src.path).Str("out", *out).Stringer("type", s).Int64("bytes", size).Msg("quantize done")
	return nil
}

func mixNames() string {
	var names []string
	for _, m := range quant.Mixes() {
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// quantizeMix writes in as a llama.cpp K-quant mix (convert.QuantizeMix:
// llama.cpp's per-tensor types and ggml's reference rounding), so llama.cpp
// reads it.
func quantizeMix(ctx context.Context, e *env, mix quant.Mix, in, tok, out string) error {
	src, err := openRewrite(in, tok, out)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	defer src.close()
	w, res, err := convert.QuantizeMix(ctx, convert.MixInput{Path: src.path, R: src.f, KV: src.kv, Tensors: src.tensors}, mix)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	size, err := writeGGUF(w, out)
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	_, summary, _ := strings.Cut(res.Note, ": ")
	fmt.Fprintf(e.stdout, "wrote %s: %s (%s), %d → %d bytes (%.1f%%)\n",
		out, mix.Name, summary, src.size, size, 100*float64(size)/float64(src.size))
	zerolog.Ctx(ctx).Info().Str("in", src.path).Str("out", out).Str("type", mix.Name).Int64("bytes", size).Msg("quantize done")
	return nil
}

func schemeNames() string {
	var names []string
	for _, s := range quant.Schemes() {
		names = append(names, s.String())
	}
	return strings.Join(names, ", ")
}

// fileTypeOf is general.file_type for a model whose matrices are dt:
// llama.cpp's LLAMA_FTYPE for its own types, and for sluice's layouts their
// dtype id (≥ 1024, a range llama.cpp never assigns to a file type).
func fileTypeOf(dt tensor.DType) uint32 {
	switch dt {
	case tensor.F32:
		return 0 // ALL_F32
	case tensor.F16:
		return 1 // MOSTLY_F16
	case tensor.Q4_0:
		return 2 // MOSTLY_Q4_0
	case tensor.Q8_0:
		return 7 // MOSTLY_Q8_0
	case tensor.BF16:
		return 32 // MOSTLY_BF16
	}
	return uint32(dt)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// rewriteSource is an input model read tensor by tensor for `sluice quantize`
// and `sluice prune`: its metadata in GGUF form (a llama2.c checkpoint's
// header converted, its tokenizer.bin vocabulary added) and its tensor index.
type rewriteSource struct {
	path    string
	size    int64
	kv      []gguf.KV // in output order, general.architecture first
	tensors []tensor.Info
	f       *os.File
}

// openRewrite opens in (refusing to overwrite it with out) and gathers the
// metadata to copy.
func openRewrite(in, tok, out string) (*rewriteSource, error) {
	if in == "" {
		return nil, fmt.Errorf("-m MODEL is required: %w", errUsage)
	}
	if out == "" {
		return nil, fmt.Errorf("-o FILE is required: %w", errUsage)
	}
	if same, err := modelfile.SameFile(in, out); err == nil && same {
		return nil, fmt.Errorf("-o %s is the input model itself", out)
	}
	src, err := model.OpenSource(in)
	if err != nil {
		return nil, err
	}
	r := &rewriteSource{path: in, tensors: src.Tensors}
	switch src.Format {
	case model.GGUF:
		if tok != "" {
			return nil, fmt.Errorf("%s is a GGUF with its own vocabulary: --tokenizer is for llama2.c checkpoints: %w", in, errUsage)
		}
		r.kv = src.GGUF.KV
	case model.Llama2C:
		if tok == "" {
			return nil, fmt.Errorf("%s is a llama2.c checkpoint without a vocabulary: give --tokenizer tokenizer.bin: %w", in, errUsage)
		}
		l, err := llama2c.Open(in)
		if err != nil {
			return nil, err
		}
		v, err := tokenizer.LoadLlama2CVocab(tok)
		if err != nil {
			return nil, err
		}
		if v.Len() != l.Config.VocabSize {
			return nil, fmt.Errorf("%s has %d tokens, %s has a vocabulary of %d", tok, v.Len(), in, l.Config.VocabSize)
		}
		keys := make([]string, 0, len(l.Meta))
		for k := range l.Meta {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		r.kv = append(r.kv, gguf.KV{Key: "general.architecture", Value: l.Meta["general.architecture"]})
		for _, k := range keys {
			if k != "general.architecture" && !strings.HasPrefix(k, "tokenizer.") {
				r.kv = append(r.kv, gguf.KV{Key: k, Value: l.Meta[k]})
			}
		}
		r.kv = append(r.kv, v.GGUF()...)
	default:
		return nil, fmt.Errorf("%s: cannot rewrite a %v model", in, src.Format)
	}
	if r.f, err = os.Open(in); err != nil {
		return nil, err
	}
	st, err := r.f.Stat()
	if err != nil {
		r.f.Close()
		return nil, err
	}
	r.size = st.Size()
	return r, nil
}

func (r *rewriteSource) close() { r.f.Close() }

// raw reads a tensor's bytes.
func (r *rewriteSource) raw(t tensor.Info) ([]byte, error) {
	b := make([]byte, t.Size)
	if _, err := r.f.ReadAt(b, t.Offset); err != nil {
		return nil, fmt.Errorf("%s: tensor %s at offset %d (%d bytes): %w", r.path, t.Name, t.Offset, t.Size, err)
	}
	return b, nil
}

// copyRaw returns an AddTensorFunc func that copies a tensor's bytes
// unchanged, a buffer at a time.
func (r *rewriteSource) copyRaw(ctx context.Context, t tensor.Info) func(io.Writer) error {
	return func(w io.Writer) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := io.CopyN(w, io.NewSectionReader(r.f, t.Offset, t.Size), t.Size); err != nil {
			return fmt.Errorf("%s: tensor %s at offset %d (%d bytes): %w", r.path, t.Name, t.Offset, t.Size, err)
		}
		return nil
	}
}

// f32Ctx is f32 that first checks ctx, for the AddTensorFunc funcs run one
// tensor after another while the output is written.
func (r *rewriteSource) f32Ctx(ctx context.Context, t tensor.Info) ([]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.f32(t)
}

// f32 reads a tensor and decodes it row by row (rows of extension layouts
// have their own groups, so the tensor is not one long row).
func (r *rewriteSource) f32(t tensor.Info) ([]float32, error) {
	b, err := r.raw(t)
	if err != nil {
		return nil, err
	}
	rows, cols := t.Rows(), t.Cols()
	rb, err := t.DType.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %w", r.path, t.Name, err)
	}
	if int64(rows)*rb > int64(len(b)) {
		return nil, fmt.Errorf("%s: tensor %s: %d bytes, want %d for %v %v", r.path, t.Name, len(b), int64(rows)*rb, t.DType, t.Shape)
	}
	out := make([]float32, rows*cols)
	for i := range rows {
		tensor.DequantizeRow(out[i*cols:(i+1)*cols], b[int64(i)*rb:], t.DType, cols)
	}
	return out, nil
}

// writeMeta adds the source's metadata to w, replacing or appending the keys
// of set (written in sorted order after the copied ones).
func (r *rewriteSource) writeMeta(w *gguf.Writer, set map[string]any) error {
	for _, kv := range r.kv {
		v := kv.Value
		if nv, ok := set[kv.Key]; ok {
			v = nv
			delete(set, kv.Key)
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return fmt.Errorf("%s: key %s: %w", r.path, kv.Key, err)
		}
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := w.AddKV(k, set[k]); err != nil {
			return err
		}
	}
	return nil
}

// writeGGUF writes w to path and returns the file's size.
func writeGGUF(w *gguf.Writer, path string) (int64, error) {
	if err := w.WriteFile(path); err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}
