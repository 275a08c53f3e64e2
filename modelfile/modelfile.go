// Package modelfile writes model files derived from a model: a copy with
// LoRA adapters merged into its weights, in the base's own format. Package
// model only loads and binds models; the CLI's lora merge command writes
// through here.
package modelfile

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/llama2c"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// WriteMerged writes a copy of l's model file to path with adapters merged
// into the weights: W' = W + scale·B·A per adapted module (α/r, α/√r with
// rsLoRA, times AdapterOptions.Scale), in the order given. The output has the
// base's format: a GGUF keeps every metadata key, the tokenizer and the
// untouched tensors byte for byte, and stores each adapted tensor as F32 (a
// quantized base is dequantized for the merge and not requantized, so the
// merge loses nothing); a llama2.c checkpoint stays a llama2.c checkpoint.
// The adapters must fit the model (model.FitAdapter).
func WriteMerged(ctx context.Context, l *model.Loaded, path string, adapters ...*lora.Adapter) error {
	src := l.Source
	if same, err := SameFile(src.Path, path); err != nil || same {
		if err == nil {
			err = fmt.Errorf("%w: the output %s is the base model itself", model.ErrAdapter, path)
		}
		return err
	}
	mods := map[string][]*lora.Module{}
	for _, ad := range adapters {
		for i := range ad.Modules {
			m := &ad.Modules[i]
			if _, ok := src.Tensor(m.Tensor); !ok || m.Tensor == "" {
				return fmt.Errorf("%w: module %s adapts %q, which %s does not have", model.ErrAdapter, m.Name, m.Tensor, src.Path)
			}
			mods[m.Tensor] = append(mods[m.Tensor], m)
		}
	}
	var pins []offload.Pinned
	defer func() {
		for _, p := range pins {
			p.Release()
		}
	}()
	// read pins a tensor: its raw bytes for an unadapted GGUF tensor, else
	// float32 values with the adapters merged in (pins are held until the write ends).
	read := func(t tensor.Info) ([]byte, []float32, error) {
		r := offload.Ref{Name: t.Name, DType: t.DType, Shape: t.Shape, Offset: t.Offset, Size: t.Size}
		p, err := l.Store.Acquire(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		pins = append(pins, p)
		ms := mods[t.Name]
		rows, cols := r.Rows(), r.Cols()
		// The store may hold a matrix in a kernel layout (offload.LayoutOf):
		// kernels.RowBytes and DecodeRow give the file's rows back.
		kw := kernels.Weight{DType: t.DType, Data: p.Bytes(), Rows: rows, Cols: cols, Layout: offload.LayoutOf(p)}
		if len(ms) == 0 && src.Format == model.GGUF {
			if kw.Layout == kernels.RowMajor {
				return p.Bytes(), nil, nil
			}
			raw := make([]byte, len(p.Bytes()))
			rb := len(raw) / rows
			for i := range rows {
				kernels.RowBytes(raw[i*rb:], kw, i)
			}
			return raw, nil, nil
		}
		w := make([]float32, rows*cols)
		if _, err := t.DType.RowBytes(cols); err != nil {
			return nil, nil, fmt.Errorf("modelfile: %s: tensor %s: %w", src.Path, t.Name, err)
		}
		for i := range rows { // row by row: grouped layouts restart their groups on every row
			kernels.DecodeRow(w[i*cols:(i+1)*cols], kw, i)
		}
		for _, m := range ms {
			if err := m.Merge(w, rows, cols); err != nil {
				return nil, nil, fmt.Errorf("modelfile: %s: tensor %s: %w", src.Path, t.Name, err)
			}
		}
		return nil, w, nil
	}
	switch src.Format {
	case model.GGUF:
		gw := gguf.NewWriter()
		for _, kv := range src.GGUF.KV {
			if err := gw.AddKV(kv.Key, kv.Value); err != nil {
				return fmt.Errorf("modelfile: %s: %w", src.Path, err)
			}
		}
		for _, t := range src.Tensors {
			raw, w, err := read(t)
			if err != nil {
				return err
			}
			dt := t.DType
			if w != nil {
				raw, dt = tensor.F32Bytes(w), tensor.F32
			}
			if err := gw.AddTensor(t.Name, dt, t.Shape, raw); err != nil {
				return fmt.Errorf("modelfile: %s: %w", path, err)
			}
		}
		return gw.WriteFile(path)
	case model.Llama2C:
		lf, err := llama2c.Open(src.Path)
		if err != nil {
			return err
		}
		ts := map[string][]float32{}
		for _, t := range src.Tensors {
			_, w, err := read(t)
			if err != nil {
				return err
			}
			ts[t.Name] = w
		}
		return writeFile(path, func(f io.Writer) error { return llama2c.Write(f, lf.Config, ts) })
	}
	return fmt.Errorf("modelfile: %s: cannot write a merged %s model", src.Path, src.Format)
}

// SameFile reports whether a and b name one existing file: b not existing
// is false, a not existing an error. Writers check it so that an output never
// replaces the input it is read from.
func SameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, fmt.Errorf("modelfile: %w", err)
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("modelfile: %w", err)
	}
	return os.SameFile(sa, sb), nil
}

// writeFile writes path through a temporary file renamed into place, so a
// failed write never leaves half a model behind.
func writeFile(path string, fn func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("modelfile: %w", err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = fn(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("modelfile: write %s: %w", path, err)
	}
	return nil
}
