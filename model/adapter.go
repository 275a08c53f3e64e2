package model

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"

	"github.com/sluicehq/sluice/compress/lora"
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
