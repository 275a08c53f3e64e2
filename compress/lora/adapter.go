package lora

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/tensor"
)

// File names inside a PEFT adapter directory.
const (
	ConfigFile        = "adapter_config.json"
	WeightsFile       = "adapter_model.safetensors"
	PickleWeightsFile = "adapter_model.bin"
)

// Module is one adapted weight: the factors A and B, widened to float32.
type Module struct {
	Name      string  // HF module path: "model.layers.0.self_attn.q_proj"
	Tensor    string  // the GGUF weight it adapts: "blk.0.attn_q.weight"; "" when the path has no GGUF counterpart
	Embedding bool    // lora_embedding_A/B of an nn.Embedding: ΔW = scale·(B·A)ᵀ
	R         int     // rank
	Alpha     float64 // α for this module (alpha_pattern or lora_alpha)
	Scale     float32 // α/r, or α/√r with use_rslora
	In, Out   int     // A is (R, In), B is (Out, R)
	A         []float32
	B         []float32
}

// BaseShape is the (rows, cols) of the weight the module adapts: (Out, In) for
// a linear layer, (In, Out) = (vocab, dim) for an embedding table.
func (m *Module) BaseShape() (rows, cols int) {
	if m.Embedding {
		return m.In, m.Out
	}
	return m.Out, m.In
}

// Adapter is a loaded PEFT LoRA adapter.
type Adapter struct {
	Config  Config
	Modules []Module // sorted by Name

	// QKPermuted records that PermuteQK has run, so it is not applied twice.
	QKPermuted bool
}

// Tensor is one saved adapter tensor, widened to float32.
type Tensor struct {
	Name  string // as saved: "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
	Shape []int
	Data  []float32
}

// Load reads a PEFT adapter directory: adapter_config.json and
// adapter_model.safetensors (F32, F16 or BF16).
func Load(dir string) (*Adapter, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	cfg, err := ParseConfig(data, cfgPath)
	if err != nil {
		return nil, err
	}
	wPath := filepath.Join(dir, WeightsFile)
	f, err := safetensors.Open(wPath)
	if errors.Is(err, os.ErrNotExist) {
		if _, perr := os.Stat(filepath.Join(dir, PickleWeightsFile)); perr == nil {
			return nil, fmt.Errorf("%w: %s: pickled %s; convert it to %s", ErrUnsupported, dir, PickleWeightsFile, WeightsFile)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	tensors := make([]Tensor, 0, len(f.Tensors))
	for _, info := range f.Tensors {
		v, err := f.ReadF32(info.Name)
		if err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		tensors = append(tensors, Tensor{Name: info.Name, Shape: info.Shape, Data: v})
	}
	a, err := New(cfg, tensors)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	return a, nil
}

// New assembles an adapter from its config and saved tensors, checking that
// every module has both factors, that their ranks agree with each other and with
// the config, and that every module is one target_modules selects. All problems
// are reported together (errors.Join), each naming its module.
func New(cfg Config, tensors []Tensor) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	type pair struct {
		a, b      *Tensor
		embedding bool
	}
	mods := map[string]*pair{}
	var errs []error
	for i := range tensors {
		t := &tensors[i]
		module, isB, emb, ok := splitPEFTName(t.Name)
		if !ok {
			if strings.HasSuffix(t.Name, suffixMagnt) {
				errs = append(errs, fmt.Errorf("%w: tensor %q is a DoRA magnitude vector", ErrUnsupported, t.Name))
			} else {
				errs = append(errs, fmt.Errorf("%w: tensor %q is not a LoRA factor (want %s<module>%s or %s)", ErrUnsupported, t.Name, peftPrefix, suffixA, suffixB))
			}
			continue
		}
		p := mods[module]
		if p == nil {
			p = &pair{embedding: emb}
			mods[module] = p
		}
		if p.embedding != emb {
			errs = append(errs, fmt.Errorf("%w: module %s has both linear (lora_A/B) and embedding (lora_embedding_A/B) factors", ErrConfig, module))
			continue
		}
		slot := &p.a
		if isB {
			slot = &p.b
		}
		if *slot != nil {
			errs = append(errs, fmt.Errorf("%w: tensor %q appears twice", ErrConfig, t.Name))
			continue
		}
		*slot = t
	}
	ad := &Adapter{Config: cfg}
	for _, name := range slices.Sorted(maps.Keys(mods)) {
		p := mods[name]
		m, err := newModule(&cfg, name, p.a, p.b, p.embedding)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ad.Modules = append(ad.Modules, m)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return ad, nil
}

func newModule(cfg *Config, name string, a, b *Tensor, embedding bool) (Module, error) {
	an, bn := PEFTNames(name, embedding)
	switch {
	case a == nil:
		return Module{}, fmt.Errorf("%w: module %s has %s but no %s", ErrMissing, name, bn, an)
	case b == nil:
		return Module{}, fmt.Errorf("%w: module %s has %s but no %s", ErrMissing, name, an, bn)
	case len(a.Shape) != 2 || len(b.Shape) != 2:
		return Module{}, fmt.Errorf("%w: module %s: A %v and B %v must both be 2-D", ErrShape, name, a.Shape, b.Shape)
	}
	for _, t := range []*Tensor{a, b} {
		if len(t.Data) != t.Shape[0]*t.Shape[1] {
			return Module{}, fmt.Errorf("%w: tensor %q: shape %v but %d values", ErrShape, t.Name, t.Shape, len(t.Data))
		}
	}
	rA, rB := a.Shape[0], b.Shape[1]
	if rA != rB {
		return Module{}, fmt.Errorf("%w: module %s: A is %v (r = %d) but B is %v (r = %d)", ErrRank, name, a.Shape, rA, b.Shape, rB)
	}
	r, alpha := cfg.RankAlpha(name)
	if r != rA {
		return Module{}, fmt.Errorf("%w: module %s: the config gives r = %d but A %v and B %v have rank %d", ErrRank, name, r, a.Shape, b.Shape, rA)
	}
	if !cfg.TargetModules.Empty() && !cfg.TargetModules.Match(name) {
		return Module{}, fmt.Errorf("%w: module %s has LoRA tensors but target_modules does not select it", ErrConfig, name)
	}
	g, _ := GGUFName(name)
	return Module{
		Name: name, Tensor: g, Embedding: embedding,
		R: r, Alpha: alpha, Scale: cfg.Scale(r, alpha),
		In: a.Shape[1], Out: b.Shape[0], A: a.Data, B: b.Data,
	}, nil
}

// Module returns the module adapting the named GGUF tensor.
func (a *Adapter) Module(tensorName string) (*Module, bool) {
	for i := range a.Modules {
		if a.Modules[i].Tensor == tensorName {
			return &a.Modules[i], true
		}
	}
	return nil, false
}

// Validate checks the adapter against the base model's tensor index (GGUF
// names, or HF names such as "model.layers.0.self_attn.q_proj.weight", which are
// mapped to GGUF): every module's weight exists and has exactly the (rows, cols)
// that B·A produces, and every target_modules entry selects at least one weight
// of the base model. All problems are reported together.
func (a *Adapter) Validate(base []tensor.Info) error {
	shapes := map[string][]int{}
	var modules []string // HF module paths of the base weights
	for _, t := range base {
		name := t.Name
		if hf, ok := strings.CutSuffix(name, ".weight"); ok {
			if g, ok := GGUFName(hf); ok {
				name = g
			}
		}
		shapes[name] = t.Shape
		if hf, ok := HFName(name); ok {
			modules = append(modules, hf)
		}
	}
	var errs []error
	for i := range a.Modules {
		m := &a.Modules[i]
		if m.Tensor == "" {
			errs = append(errs, fmt.Errorf("%w: module %s has no GGUF counterpart (sluice maps the llama-family attention, MLP, embedding and output modules)", ErrNoBase, m.Name))
			continue
		}
		shape, ok := shapes[m.Tensor]
		if !ok {
			errs = append(errs, fmt.Errorf("%w: module %s adapts %s, which the base model does not have", ErrNoBase, m.Name, m.Tensor))
			continue
		}
		rows, cols := m.BaseShape()
		if len(shape) != 2 || shape[0] != rows || shape[1] != cols {
			what := "B·A"
			if m.Embedding {
				what = "(B·A)ᵀ"
			}
			errs = append(errs, fmt.Errorf("%w: module %s: %s is [%d %d] (A %v, B %v) but base tensor %s is %v",
				ErrShape, m.Name, what, rows, cols, []int{m.R, m.In}, []int{m.Out, m.R}, m.Tensor, shape))
		}
	}
	t := &a.Config.TargetModules
	entries := t.Names
	if t.Regex != "" {
		entries = []string{t.Regex}
	}
	for _, e := range entries {
		one := Targets{Names: []string{e}}
		if t.Regex != "" {
			one = Targets{Regex: e}
		}
		if !slices.ContainsFunc(modules, one.Match) {
			errs = append(errs, fmt.Errorf("%w: target_modules entry %q selects no weight of the base model", ErrNoBase, e))
		}
	}
	return errors.Join(errs...)
}

// PermuteQK reorders the rows of B for attention Q and K modules the way
// llama.cpp's HF→GGUF converter reorders the base Q and K weights (it turns
// HF's rotate-half RoPE layout into GGML's adjacent-pair layout): within each
// head, row (j·d/2 + i) moves to (2i + j). Call it exactly once, before
// merging or applying, when the base model is a GGUF converted from HF; a base
// read from HF safetensors (rotate-half RoPE) needs no permutation.
func (a *Adapter) PermuteQK(heads, kvHeads int) error {
	if a.QKPermuted {
		return fmt.Errorf("%w: PermuteQK already applied", ErrConfig)
	}
	for i := range a.Modules {
		m := &a.Modules[i]
		h := 0
		switch {
		case strings.HasSuffix(m.Tensor, ".attn_q.weight"):
			h = heads
		case strings.HasSuffix(m.Tensor, ".attn_k.weight"):
			h = kvHeads
		default:
			continue
		}
		if err := PermuteRows(m.B, m.Out, m.R, h); err != nil {
			return fmt.Errorf("module %s: %w", m.Name, err)
		}
	}
	a.QKPermuted = true
	return nil
}

// Tensors returns the adapter's factors under their PEFT names, as F32
// safetensors tensors (sorted by name): what WriteAdapter stores.
func (a *Adapter) Tensors() ([]safetensors.Tensor, error) {
	var out []safetensors.Tensor
	for _, m := range a.Modules {
		an, bn := PEFTNames(m.Name, m.Embedding)
		ta, err := safetensors.NewTensor(an, tensor.F32, []int{m.R, m.In}, m.A)
		if err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		tb, err := safetensors.NewTensor(bn, tensor.F32, []int{m.Out, m.R}, m.B)
		if err != nil {
			return nil, fmt.Errorf("lora: %w", err)
		}
		out = append(out, ta, tb)
	}
	slices.SortFunc(out, func(x, y safetensors.Tensor) int { return cmp.Compare(x.Name, y.Name) })
	return out, nil
}

// WriteAdapter writes a PEFT adapter directory (created if needed):
// adapter_config.json from cfg and adapter_model.safetensors from tensors, as
// given. It does not validate, so tests can write deliberately broken adapters.
func WriteAdapter(dir string, cfg Config, tensors []safetensors.Tensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	if cfg.PEFTType == "" {
		cfg.PEFTType = "LORA"
	}
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return fmt.Errorf("lora: %s: %w", ConfigFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), tensors, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return nil
}
