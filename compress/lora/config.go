// Package lora reads, validates, merges and applies PEFT LoRA adapters
// (Hu et al., 2021) as Hugging Face's peft library saves them: a directory
// with adapter_config.json and adapter_model.safetensors.
//
// # Conventions
//
// sluice stores a linear layer as a row-major weight W of shape (out, in) and
// computes y = W x for a column vector x: the layout of nn.Linear.weight and of
// GGUF. PEFT's tensors follow the same convention:
//
//	lora_A.weight: A, (r, in)
//	lora_B.weight: B, (out, r)
//	ΔW = scale · B·A, (out, in)      scale = α/r, or α/√r with use_rslora
//
// so the merged weight is W' = W + scale·B·A and the unmerged layer is
// y = W x + scale·B(A x); for a batch of row vectors X (n, in) that is
// Y = X Wᵀ + scale·(X Aᵀ) Bᵀ.
//
// The seed text writes the transposed, row-vector form y = x W_s + (α/r) x A_s B_s
// with W_s (in, out), A_s (in, r), B_s (r, out). Its example maps to ours by
// transposing every matrix: W = W_sᵀ, A = A_sᵀ, B = B_sᵀ. With W_s = [[1,2],[3,4]],
// A_s = [[1],[0]], B_s = [[0.5,0.5]], α = 2, r = 1 that is W = [[1,3],[2,4]],
// A = [[1, 0]], B = [[0.5],[0.5]], and W' = W + 2·B·A = [[2,3],[3,4]] (= W'_sᵀ,
// which happens to be symmetric); x = (1, 1) gives (5, 7) both ways.
//
// fan_in_fan_out (GPT-2's Conv1D) never changes the shapes of A and B; it says
// the Hugging Face *base* weight is stored (in, out). GGUF converters transpose
// such weights to (out, in), so Merge applies; MergeTransposed serves a base
// still in the (in, out) layout.
//
// Embedding adapters (lora_embedding_A (r, vocab), lora_embedding_B (dim, r))
// update a (vocab, dim) table by (B·A)ᵀ: row t gains scale·B·A[:, t].
package lora

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Sentinel errors; every error this package returns wraps one of them (or an
// error from package safetensors or the file system).
var (
	// ErrConfig: adapter_config.json is malformed or inconsistent.
	ErrConfig = errors.New("lora: bad adapter config")
	// ErrUnsupported: a valid PEFT feature sluice does not implement (DoRA,
	// trained biases, modules_to_save, non-LoRA adapters, pickle files).
	ErrUnsupported = errors.New("lora: unsupported")
	// ErrMissing: a module has lora_A without lora_B or the reverse.
	ErrMissing = errors.New("lora: missing tensor")
	// ErrRank: A and B disagree on r, or the tensors disagree with the config.
	ErrRank = errors.New("lora: rank mismatch")
	// ErrShape: a tensor is not 2-D, or B·A does not fit the base tensor.
	ErrShape = errors.New("lora: shape mismatch")
	// ErrNoBase: a module (or a target_modules entry) has no tensor in the base model.
	ErrNoBase = errors.New("lora: no base tensor")
)

// Config is the part of adapter_config.json that decides the math. Unknown
// keys (task_type, lora_dropout, inference_mode, …) are ignored, as PEFT does.
type Config struct {
	PEFTType      string   `json:"peft_type,omitempty"` // "LORA" (or absent)
	R             int      `json:"r"`
	Alpha         float64  `json:"lora_alpha"`
	TargetModules Targets  `json:"target_modules"`
	UseRSLoRA     bool     `json:"use_rslora"`
	FanInFanOut   bool     `json:"fan_in_fan_out"`
	BaseModel     string   `json:"base_model_name_or_path,omitempty"`
	RankPattern   Pattern  `json:"rank_pattern,omitempty"`  // per-module r overrides
	AlphaPattern  Pattern  `json:"alpha_pattern,omitempty"` // per-module α overrides
	Bias          string   `json:"bias,omitempty"`          // "none" (others unsupported)
	UseDoRA       bool     `json:"use_dora,omitempty"`      // unsupported when true
	ModulesToSave []string `json:"modules_to_save,omitempty"`
}

// DefaultConfig has PEFT's defaults: r = 8, lora_alpha = 8, bias "none".
func DefaultConfig() Config { return Config{PEFTType: "LORA", R: 8, Alpha: 8, Bias: "none"} }

// ParseConfig decodes adapter_config.json (path is for error messages), starting
// from DefaultConfig for absent keys, and checks it.
func ParseConfig(data []byte, path string) (Config, error) {
	cfg := DefaultConfig()
	if err := json.Unmarshal(data, &cfg); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %s", ErrConfig, path, jsonErr(err))
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.PEFTType == "" {
		cfg.PEFTType = "LORA" // an explicit "" means the same as absent
	}
	return cfg, nil
}

// jsonErr adds the byte offset to encoding/json's errors, which omit it.
func jsonErr(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("offset %d: %v", se.Offset, se)
	}
	// Only an unwrapped type error carries an offset into the whole document;
	// one returned through a field's UnmarshalJSON counts from that field.
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		return fmt.Sprintf("offset %d: %v", te.Offset, te)
	}
	return err.Error()
}

// Validate checks the values PEFT would reject and the features sluice lacks.
func (c *Config) Validate() error {
	switch {
	case c.PEFTType != "" && c.PEFTType != "LORA":
		return fmt.Errorf("%w: peft_type %q (only LORA adapters)", ErrUnsupported, c.PEFTType)
	case c.R <= 0:
		return fmt.Errorf("%w: r = %d, want > 0", ErrConfig, c.R)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("%w: lora_alpha = %v, want a finite number", ErrConfig, c.Alpha)
	case c.UseDoRA:
		return fmt.Errorf("%w: use_dora (DoRA magnitude vectors)", ErrUnsupported)
	case c.Bias != "" && c.Bias != "none":
		return fmt.Errorf("%w: bias %q (trained biases); want \"none\"", ErrUnsupported, c.Bias)
	case len(c.ModulesToSave) > 0:
		return fmt.Errorf("%w: modules_to_save %q (full replacement weights)", ErrUnsupported, c.ModulesToSave)
	}
	if err := c.TargetModules.compile(); err != nil {
		return err
	}
	for _, p := range []*Pattern{&c.RankPattern, &c.AlphaPattern} {
		if err := p.compile(); err != nil {
			return err
		}
	}
	for _, e := range c.RankPattern {
		if e.Value <= 0 || e.Value != math.Trunc(e.Value) {
			return fmt.Errorf("%w: rank_pattern[%q] = %v, want a positive integer", ErrConfig, e.Key, e.Value)
		}
	}
	for _, e := range c.AlphaPattern {
		if math.IsNaN(e.Value) || math.IsInf(e.Value, 0) {
			return fmt.Errorf("%w: alpha_pattern[%q] = %v, want a finite number", ErrConfig, e.Key, e.Value)
		}
	}
	return nil
}

// RankAlpha returns r and α for a module (its HF path, "model.layers.0.self_attn.q_proj"):
// the first rank_pattern / alpha_pattern key that matches, else r and lora_alpha.
func (c *Config) RankAlpha(module string) (r int, alpha float64) {
	r, alpha = c.R, c.Alpha
	if v, ok := c.RankPattern.Lookup(module); ok {
		r = int(v)
	}
	if v, ok := c.AlphaPattern.Lookup(module); ok {
		alpha = v
	}
	return r, alpha
}

// Scale is the factor B·A is multiplied by: α/r, or α/√r with use_rslora
// (Kalajdzievski, 2023), which keeps updates stable as r grows.
func (c *Config) Scale(r int, alpha float64) float32 {
	if c.UseRSLoRA {
		return float32(alpha / math.Sqrt(float64(r)))
	}
	return float32(alpha / float64(r))
}

// Targets is target_modules: a list of module names or a regular expression.
type Targets struct {
	// Names: a module matches when its path equals an entry or ends with
	// "." + entry ("q_proj" matches "model.layers.0.self_attn.q_proj").
	Names []string
	// Regex: the whole module path must match (Python re.fullmatch). The special
	// value "all-linear" matches every linear layer except the output head.
	Regex string

	re *regexp.Regexp
}

// AllLinear is PEFT's shorthand for "every linear layer but the output head".
const AllLinear = "all-linear"

// Empty reports whether no target modules are configured.
func (t *Targets) Empty() bool { return len(t.Names) == 0 && t.Regex == "" }

// UnmarshalJSON accepts a list of strings, a string, or null.
func (t *Targets) UnmarshalJSON(data []byte) error {
	*t = Targets{}
	switch d := bytes.TrimSpace(data); {
	case bytes.Equal(d, []byte("null")):
		return nil
	case len(d) > 0 && d[0] == '"':
		return json.Unmarshal(d, &t.Regex)
	}
	if err := json.Unmarshal(data, &t.Names); err != nil {
		return fmt.Errorf("target_modules: want a list of names or a regex string: %w", err)
	}
	return nil
}

// MarshalJSON writes the list, the string, or null.
func (t Targets) MarshalJSON() ([]byte, error) {
	switch {
	case t.Regex != "":
		return json.Marshal(t.Regex)
	case t.Names != nil:
		return json.Marshal(t.Names)
	}
	return []byte("null"), nil
}

func (t *Targets) compile() error {
	if t.Regex == "" || t.Regex == AllLinear {
		return nil
	}
	re, err := regexp.Compile(`^(?:` + t.Regex + `)$`)
	if err != nil {
		return fmt.Errorf("%w: target_modules regex %q: %v", ErrConfig, t.Regex, err)
	}
	t.re = re
	return nil
}

// Match reports whether a module (HF path) is targeted.
func (t *Targets) Match(module string) bool {
	switch {
	case t.Regex == AllLinear:
		return module != "lm_head" && !strings.HasSuffix(module, "embed_tokens")
	case t.Regex != "":
		if t.re == nil && t.compile() != nil {
			return false
		}
		return t.re.MatchString(module)
	}
	for _, n := range t.Names {
		if module == n || strings.HasSuffix(module, "."+n) {
			return true
		}
	}
	return false
}

// PatternEntry is one key of rank_pattern or alpha_pattern.
type PatternEntry struct {
	Key   string // a regex matched against the end of the module path, after a '.'
	Value float64

	re *regexp.Regexp
}

// Pattern is an ordered map from module-name pattern to value. Order matters:
// like PEFT, the first matching key wins, so the JSON order is kept.
type Pattern []PatternEntry

// UnmarshalJSON decodes an object, keeping its key order.
func (p *Pattern) UnmarshalJSON(data []byte) error {
	*p = nil
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("want an object of pattern: number")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		var v float64
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("pattern %q: %w", tok, err)
		}
		*p = append(*p, PatternEntry{Key: tok.(string), Value: v})
	}
	_, err := dec.Token()
	return err
}

// MarshalJSON writes the object in order.
func (p Pattern) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.Key)
		v, err := json.Marshal(e.Value)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func (p *Pattern) compile() error {
	for i := range *p {
		e := &(*p)[i]
		re, err := regexp.Compile(`^(?:.*\.)?(?:` + e.Key + `)$`)
		if err != nil {
			return fmt.Errorf("%w: pattern key %q: %v", ErrConfig, e.Key, err)
		}
		e.re = re
	}
	return nil
}

// Lookup returns the value of the first key matching module.
func (p Pattern) Lookup(module string) (float64, bool) {
	for _, e := range p {
		re := e.re
		if re == nil {
			var err error
			if re, err = regexp.Compile(`^(?:.*\.)?(?:` + e.Key + `)$`); err != nil {
				continue
			}
		}
		if re.MatchString(module) {
			return e.Value, true
		}
	}
	return 0, false
}
