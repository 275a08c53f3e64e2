package convert

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/compress/quant"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

// MixInput is a model to re-encode under a K-quant mix: its metadata in
// output order (general.architecture first), its tensor index and the
// reader its tensor data is at (tensor.Info offsets are absolute in R).
type MixInput struct {
	Path    string // names the model in errors
	R       io.ReaderAt
	KV      []gguf.KV
	Tensors []tensor.Info
}

// MixResult is what QuantizeMix planned: the number of tensors re-encoded
// in each type and the general.quantization_notes it wrote.
type MixResult struct {
	Counts map[tensor.DType]int
	Note   string
}

// QuantizeMix returns a writer of in as llama.cpp's K-quant file type mix:
// each tensor gets the type mix.Plan assigns (llama.cpp's
// llama_tensor_get_type), encoded with ggml's reference rounding
// (quant.QuantizeMatrix); 1-D tensors, norms and tensors that keep their
// type are copied byte for byte; general.file_type is the mix's llama_ftype.
// Tensor data is read, converted and written one tensor at a time when the
// writer is written, and stops with ctx's error once ctx is done.
func QuantizeMix(ctx context.Context, in MixInput, mix quant.Mix) (*gguf.Writer, MixResult, error) {
	md, err := MixModelOf(in.KV, in.Path)
	if err != nil {
		return nil, MixResult{}, err
	}
	ts := make([]quant.MixTensor, len(in.Tensors))
	for i, t := range in.Tensors {
		ts[i] = quant.MixTensor{Name: t.Name, Shape: t.Shape, DType: t.DType}
	}
	plan, err := mix.Plan(ts, md)
	if err != nil {
		return nil, MixResult{}, fmt.Errorf("%s: %w", in.Path, err)
	}
	w := gguf.NewWriter()
	res := MixResult{Counts: map[tensor.DType]int{}}
	for i, t := range in.Tensors {
		dt := plan[i]
		if !quant.Quantizable(t.Name, t.Shape) || dt == t.DType {
			err = w.AddTensorFunc(t.Name, t.DType, t.Shape, func(o io.Writer) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				if _, err := io.CopyN(o, io.NewSectionReader(in.R, t.Offset, t.Size), t.Size); err != nil {
					return fmt.Errorf("%s: tensor %s at offset %d (%d bytes): %w", in.Path, t.Name, t.Offset, t.Size, err)
				}
				return nil
			})
		} else {
			res.Counts[dt]++
			err = w.AddTensorFunc(t.Name, dt, t.Shape, func(o io.Writer) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				vals, err := decodeF32(in.R, in.Path, t)
				if err != nil {
					return err
				}
				q, err := quant.QuantizeMatrix(vals, t.Rows(), t.Cols(), dt)
				if err != nil {
					return fmt.Errorf("%s: tensor %s: %w", in.Path, t.Name, err)
				}
				_, err = o.Write(q)
				return err
			})
		}
		if err != nil {
			return nil, MixResult{}, fmt.Errorf("%s: tensor %s: %w", in.Path, t.Name, err)
		}
	}
	var parts []string
	for _, dt := range slices.Sorted(maps.Keys(res.Counts)) {
		parts = append(parts, fmt.Sprintf("%d %v", res.Counts[dt], dt))
	}
	res.Note = fmt.Sprintf("sluice quantize --type %s: %s", mix.Name, strings.Join(parts, ", "))
	set := map[string]any{
		"general.file_type":            mix.FileType,
		"general.quantization_version": uint32(2),
		"general.quantization_notes":   res.Note,
	}
	if err := WriteKV(w, in.KV, set, in.Path); err != nil {
		return nil, MixResult{}, err
	}
	return w, res, nil
}

// WriteKV adds kv to w, with the values of set replacing those of the same
// keys, and set's other keys appended in sorted order.
func WriteKV(w *gguf.Writer, kv []gguf.KV, set map[string]any, path string) error {
	set = maps.Clone(set)
	for _, e := range kv {
		v := e.Value
		if nv, ok := set[e.Key]; ok {
			v = nv
			delete(set, e.Key)
		}
		if err := w.AddKV(e.Key, v); err != nil {
			return fmt.Errorf("%s: key %s: %w", path, e.Key, err)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := w.AddKV(k, set[k]); err != nil {
			return fmt.Errorf("%s: key %s: %w", path, k, err)
		}
	}
	return nil
}

// MixModelOf reads the model facts a K-quant mix depends on from GGUF
// metadata: the architecture, its block count and head counts.
func MixModelOf(kv []gguf.KV, path string) (quant.MixModel, error) {
	var md quant.MixModel
	get := func(key string) (any, bool) {
		for _, e := range kv {
			if e.Key == key {
				return e.Value, true
			}
		}
		return nil, false
	}
	a, ok := get("general.architecture")
	if md.Arch, _ = a.(string); !ok || md.Arch == "" {
		return md, fmt.Errorf("%w: %s: no general.architecture string: a K-quant mix needs the layer count", ErrConfig, path)
	}
	num := func(key string, need bool) (int, error) {
		v, ok := get(key)
		if !ok {
			if need {
				return 0, fmt.Errorf("%w: %s: missing key %s (a K-quant mix depends on it)", ErrConfig, path, key)
			}
			return 0, nil
		}
		switch x := v.(type) {
		case uint32:
			return int(x), nil
		case int32:
			return int(x), nil
		case uint64:
			return int(x), nil
		case int64:
			return int(x), nil
		case uint16:
			return int(x), nil
		}
		return 0, fmt.Errorf("%w: %s: key %s is %T, want an integer", ErrConfig, path, key, v)
	}
	var err error
	if md.Layers, err = num(md.Arch+".block_count", true); err != nil {
		return md, err
	}
	if md.Heads, err = num(md.Arch+".attention.head_count", false); err != nil {
		return md, err
	}
	if md.KVHeads, err = num(md.Arch+".attention.head_count_kv", false); err != nil {
		return md, err
	}
	return md, nil
}

// decodeF32 reads a tensor and decodes it row by row (rows of extension
// layouts have their own groups, so the tensor is not one long row).
func decodeF32(r io.ReaderAt, path string, t tensor.Info) ([]float32, error) {
	rows, cols := t.Rows(), t.Cols()
	rb, err := t.DType.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("%s: tensor %s: %w", path, t.Name, err)
	}
	if int64(rows)*rb > t.Size {
		return nil, fmt.Errorf("%w: %s: tensor %s: %d bytes, want %d for %v %v", ErrShape, path, t.Name, t.Size, int64(rows)*rb, t.DType, t.Shape)
	}
	b := make([]byte, t.Size)
	if _, err := r.ReadAt(b, t.Offset); err != nil {
		return nil, fmt.Errorf("%s: tensor %s at offset %d (%d bytes): %w", path, t.Name, t.Offset, t.Size, err)
	}
	out := make([]float32, rows*cols)
	for i := range rows {
		tensor.DequantizeRow(out[i*cols:(i+1)*cols], b[int64(i)*rb:], t.DType, cols)
	}
	return out, nil
}
