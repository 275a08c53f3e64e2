package model

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/llama2c"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// ErrAdapter marks a LoRA adapter that does not fit the base model or is not
// loaded: wrong shapes, modules the architecture has no weight for, an
// unknown adapter name in a request.
var ErrAdapter = errors.New("model: adapter")

// Adaptable is a model that can serve LoRA adapters unmerged: the base
// weights stay shared and each request (State.Adapter) picks a named set of
// adapters whose low-rank updates are added after the matching matmuls.
type Adaptable interface {
	// AddAdapter registers adapters under name; a request that names it gets
	// the sum of their updates. The adapters must already fit the model
	// (FitAdapter). Adding a name twice is an error.
	AddAdapter(name string, adapters ...*lora.Adapter) error
	// Adapters lists the registered names, sorted.
	Adapters() []string
}

// AdapterOptions says how a PEFT adapter is fitted onto a base model.
type AdapterOptions struct {
	// Scale multiplies every module's α/r (α/√r with rsLoRA); 0 means 1.
	// It is llama.cpp's --lora-scaled factor.
	Scale float32
	// PermuteQK reorders the rows of B for q_proj and k_proj as llama.cpp's
	// HF→GGUF converter reordered the base Q and K weights (rotate-half RoPE
	// to adjacent pairs). Set it when the base is a GGUF converted from a
	// Hugging Face checkpoint and the adapter was trained on that checkpoint.
	// Never set it for llama2.c checkpoints or GGUFs converted from them
	// (stories260K): llama2.c already rotates adjacent pairs, so its Q/K rows
	// are in the adapter's order. The file does not record which case holds,
	// so the caller says so explicitly (sluice: --lora-permute-qk).
	PermuteQK bool
}

// AdapterName is the name an adapter directory is served under: its base
// name ("/tmp/adapters/pirate/" → "pirate").
func AdapterName(dir string) string {
	return filepath.Base(filepath.Clean(dir))
}

// LoadAdapter reads a PEFT adapter directory and fits it to src (FitAdapter).
func LoadAdapter(dir string, src *Source, a Arch, o AdapterOptions) (*lora.Adapter, error) {
	ad, err := lora.Load(dir)
	if err != nil {
		return nil, err
	}
	if err := FitAdapter(ad, src, a, o); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return ad, nil
}

// FitAdapter checks ad against the base model's tensor index (every module
// adapts a weight the file has, with exactly B·A's shape; every
// target_modules entry selects something) and then applies o: the Q/K row
// permutation and the scale multiplier. It changes ad in place, so call it
// once per adapter.
func FitAdapter(ad *lora.Adapter, src *Source, a Arch, o AdapterOptions) error {
	if err := ad.Validate(src.Tensors); err != nil {
		return fmt.Errorf("%w: does not fit %s: %w", ErrAdapter, src.Path, err)
	}
	if o.Scale != 0 {
		if math.IsNaN(float64(o.Scale)) || math.IsInf(float64(o.Scale), 0) {
			return fmt.Errorf("%w: scale %v is not a finite number", ErrAdapter, o.Scale)
		}
		for i := range ad.Modules {
			ad.Modules[i].Scale *= o.Scale
		}
	}
	if o.PermuteQK {
		if err := ad.PermuteQK(a.Heads, a.KVHeads); err != nil {
			return fmt.Errorf("%w: %w", ErrAdapter, err)
		}
	}
	return nil
}

// WriteMerged writes a copy of l's model file to path with adapters merged
// into the weights: W' = W + scale·B·A per adapted module (α/r, α/√r with
// rsLoRA, times AdapterOptions.Scale), in the order given. The output has the
// base's format: a GGUF keeps every metadata key, the tokenizer and the
// untouched tensors byte for byte, and stores each adapted tensor as F32 (a
// quantized base is dequantized for the merge and not requantized, so the
// merge loses nothing); a llama2.c checkpoint stays a llama2.c checkpoint.
// The adapters must fit the model (FitAdapter).
func (l *Loaded) WriteMerged(ctx context.Context, path string, adapters ...*lora.Adapter) error {
	src := l.Source
	if same, err := sameFile(src.Path, path); err != nil || same {
		if err == nil {
			err = fmt.Errorf("%w: the output %s is the base model itself", ErrAdapter, path)
		}
		return err
	}
	mods := map[string][]*lora.Module{}
	for _, ad := range adapters {
		for i := range ad.Modules {
			m := &ad.Modules[i]
			if _, ok := src.Tensor(m.Tensor); !ok || m.Tensor == "" {
				return fmt.Errorf("%w: module %s adapts %q, which %s does not have", ErrAdapter, m.Name, m.Tensor, src.Path)
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
		if len(ms) == 0 && src.Format == GGUF {
			return p.Bytes(), nil, nil
		}
		rows, cols := r.Rows(), r.Cols()
		w := make([]float32, rows*cols)
		rb, err := t.DType.RowBytes(cols)
		if err != nil {
			return nil, nil, fmt.Errorf("model: %s: tensor %s: %w", src.Path, t.Name, err)
		}
		for i := range rows { // row by row: grouped layouts restart their groups on every row
			tensor.DequantizeRow(w[i*cols:(i+1)*cols], p.Bytes()[int64(i)*rb:], t.DType, cols)
		}
		for _, m := range ms {
			if err := m.Merge(w, rows, cols); err != nil {
				return nil, nil, fmt.Errorf("model: %s: tensor %s: %w", src.Path, t.Name, err)
			}
		}
		return nil, w, nil
	}
	switch src.Format {
	case GGUF:
		gw := gguf.NewWriter()
		for _, kv := range src.GGUF.KV {
			if err := gw.AddKV(kv.Key, kv.Value); err != nil {
				return fmt.Errorf("model: %s: %w", src.Path, err)
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
				return fmt.Errorf("model: %s: %w", path, err)
			}
		}
		return gw.WriteFile(path)
	case Llama2C:
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
	return fmt.Errorf("model: %s: cannot write a merged %s model", src.Path, src.Format)
}

// sameFile reports whether a and b name one existing file.
func sameFile(a, b string) (bool, error) {
	sa, err := os.Stat(a)
	if err != nil {
		return false, fmt.Errorf("model: %w", err)
	}
	sb, err := os.Stat(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("model: %w", err)
	}
	return os.SameFile(sa, sb), nil
}

// writeFile writes path through a temporary file renamed into place, so a
// failed write never leaves half a model behind.
func writeFile(path string, fn func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("model: %w", err)
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
		return fmt.Errorf("model: write %s: %w", path, err)
	}
	return nil
}

// CheckAdapter reports whether m serves the adapter set name ("" is the base
// model, always served), naming the loaded sets when it does not.
func CheckAdapter(m Model, name string) error {
	if name == "" {
		return nil
	}
	var loaded []string
	if ad, ok := m.(Adaptable); ok {
		loaded = ad.Adapters()
		if slices.Contains(loaded, name) {
			return nil
		}
	}
	return fmt.Errorf("%w: %q is not loaded (loaded: %v)", ErrAdapter, name, loaded)
}
