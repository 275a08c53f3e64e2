package pipelines

import (
	"fmt"
	"math"
	"strconv"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/spec"
)

// ParamError reports one bad params value. A params Validate method returns
// it (or several, joined) so the loader can point at the key's line.
type ParamError struct {
	Key string // the TOML key inside [stage.params], e.g. "top_p"
	Msg string // what is wrong, e.g. "1.5 is greater than 1"
}

func (e *ParamError) Error() string { return e.Key + ": " + e.Msg }

// TokenizeParams configures the tokenize stage.
type TokenizeParams struct {
	// AddBOS prepends the beginning-of-sequence token, as llama2.c and
	// llama.cpp do for Llama-family prompts. Default true.
	AddBOS bool `toml:"add_bos"`
}

// DefaultTokenizeParams returns the tokenize defaults.
func DefaultTokenizeParams() *TokenizeParams { return &TokenizeParams{AddBOS: true} }

// SchedulerParams configures continuous batching: every step's batch holds
// one row for each generating sequence plus prompt chunks of newly admitted
// ones, up to max_batch_tokens rows, and one forward pass carries it.
type SchedulerParams struct {
	// MaxInFlight is how many sequences are active at once (each holds a
	// KV-cache sequence of the full context); more requests wait in a
	// bounded queue. ≥ 1, default 4.
	MaxInFlight int `toml:"max_in_flight"`
	// PrefillChunk is the most prompt tokens one step carries for one
	// sequence, so a long prompt does not stall the others. ≥ 1, default 64.
	PrefillChunk int `toml:"prefill_chunk"`
	// MaxBatchTokens is the most rows one step carries, across all sequences
	// (vLLM's max_num_batched_tokens). 0 = max_in_flight × prefill_chunk.
	// When set it must be ≥ prefill_chunk and ≥ max_in_flight.
	MaxBatchTokens int `toml:"max_batch_tokens"`
	// MaxNewTokens caps generated tokens per request; 0 = until EOS or the
	// context is full. ≥ 0, default 256.
	MaxNewTokens int `toml:"max_new_tokens"`
	// StopAtEOS ends a sequence when the model emits its end-of-sequence
	// token. Default true.
	StopAtEOS bool `toml:"stop_at_eos"`
}

// DefaultSchedulerParams returns the scheduler defaults.
func DefaultSchedulerParams() *SchedulerParams {
	return &SchedulerParams{MaxInFlight: 4, PrefillChunk: 64, MaxNewTokens: 256, StopAtEOS: true}
}

// Validate checks the ranges documented on the fields.
func (p *SchedulerParams) Validate() error {
	return firstErr(
		atLeast("max_in_flight", p.MaxInFlight, 1),
		atLeast("prefill_chunk", p.PrefillChunk, 1),
		atLeast("max_new_tokens", p.MaxNewTokens, 0),
		atLeast("max_batch_tokens", p.MaxBatchTokens, 0),
		batchFits(p),
	)
}

func batchFits(p *SchedulerParams) error {
	switch {
	case p.MaxBatchTokens == 0:
		return nil
	case p.MaxBatchTokens < p.PrefillChunk:
		return &ParamError{Key: "max_batch_tokens", Msg: fmt.Sprintf("%d is less than prefill_chunk = %d: one prompt chunk must fit in a step", p.MaxBatchTokens, p.PrefillChunk)}
	case p.MaxBatchTokens < p.MaxInFlight:
		return &ParamError{Key: "max_batch_tokens", Msg: fmt.Sprintf("%d is less than max_in_flight = %d: every generating sequence needs its row in each step", p.MaxBatchTokens, p.MaxInFlight)}
	}
	return nil
}

// TransformerLayersParams configures the transformer blocks. The one
// transformer_layers entry expands to one stage per block when the graph is
// built, because the number of blocks comes from the model.
type TransformerLayersParams struct {
	// PrefetchAhead is how many layers ahead of the one computing the store
	// is asked to load (wrapping into the next pass); 0 disables prefetch.
	// The ssd tier loads at most as far as its ring holds. ≥ 0, default 1.
	PrefetchAhead int `toml:"prefetch_ahead"`
	// BlocksPerStage is how many consecutive blocks one stage runs. One step
	// (one batch) is in flight at a time and the kernel pool parallelises
	// within it, so stage boundaries buy no compute overlap: they are where
	// weight reads can be overlapped with compute and where per-stage
	// metrics are taken, and each costs a goroutine hand-off per step.
	// 0 = auto: all blocks in one stage. ≥ 0, default 0.
	BlocksPerStage int `toml:"blocks_per_stage"`
}

// DefaultTransformerLayersParams returns the transformer_layers defaults.
func DefaultTransformerLayersParams() *TransformerLayersParams {
	return &TransformerLayersParams{PrefetchAhead: 1}
}

// Validate checks the ranges documented on the fields.
func (p *TransformerLayersParams) Validate() error {
	return firstErr(
		atLeast("prefetch_ahead", p.PrefetchAhead, 0),
		atLeast("blocks_per_stage", p.BlocksPerStage, 0),
	)
}

// SampleParams configures the sampler. The defaults are llama.cpp's and
// ollama's (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05), so a file that
// only names the kind samples the way users of those tools expect; the greedy
// preset sets temperature = 0.
type SampleParams struct {
	// Temperature divides the logits; 0 = greedy (argmax). ≥ 0, default 0.8.
	Temperature float64 `toml:"temperature"`
	// TopK keeps the k most likely tokens; 0 = off. ≥ 0, default 40.
	TopK int `toml:"top_k"`
	// TopP keeps the smallest set whose probability reaches p; 0 or 1 = off.
	// In [0, 1], default 0.95.
	TopP float64 `toml:"top_p"`
	// MinP drops tokens less likely than min_p times the most likely one;
	// 0 = off. In [0, 1], default 0.05.
	MinP float64 `toml:"min_p"`
	// RepeatPenalty divides positive logits (multiplies negative ones) of
	// recently seen tokens; 1 = off. > 0, default 1.
	RepeatPenalty float64 `toml:"repeat_penalty"`
	// RepeatLastN is how many recent tokens the penalty looks at; 0 = off.
	// ≥ 0, default 64.
	RepeatLastN int `toml:"repeat_last_n"`
	// Seed keys the sampler's random generator. nil means the file did not
	// give one: the CLI then picks a seed and logs it, so every run can be
	// reproduced. TOML integers are signed, so seeds ≥ 2⁶³ cannot be written.
	Seed *uint64 `toml:"seed"`
	// JSONSchema (a JSON Schema, as JSON text) or Grammar (GBNF) constrains
	// every request of the pipeline that carries no constraint of its own:
	// an ETL job's record shape, written once. At most one; each is
	// compiled when the file is loaded, so one the engine cannot enforce is
	// an error naming the key.
	JSONSchema string `toml:"json_schema,omitempty"`
	Grammar    string `toml:"grammar,omitempty"`
	// NoJumpForward makes every token a grammar forces cost a pass of its
	// own, as before jump-forward (session.Options.NoJumpForward): the same
	// text, the baseline a benchmark measures jump-forward against.
	NoJumpForward bool `toml:"no_jump_forward,omitempty"`
}

// Constraint is the params' default output constraint, or nil.
func (ps *SampleParams) Constraint() *grammar.Spec {
	switch {
	case ps.JSONSchema != "":
		return &grammar.Spec{Schema: []byte(ps.JSONSchema)}
	case ps.Grammar != "":
		return &grammar.Spec{GBNF: ps.Grammar}
	}
	return nil
}

// DefaultSampleParams returns the sample defaults (Seed nil: not given).
func DefaultSampleParams() *SampleParams {
	return &SampleParams{
		Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05,
		RepeatPenalty: 1, RepeatLastN: 64,
	}
}

// Validate checks the ranges documented on the fields.
func (p *SampleParams) Validate() error {
	var seedErr error
	// BurntSushi stores a negative TOML integer into a uint64 as its two's
	// complement; no non-negative TOML integer reaches 2⁶³.
	if p.Seed != nil && *p.Seed > math.MaxInt64 {
		seedErr = &ParamError{Key: "seed", Msg: fmt.Sprintf("%d is negative; want an integer ≥ 0", int64(*p.Seed))}
	}
	var gramErr error
	switch {
	case p.JSONSchema != "" && p.Grammar != "":
		gramErr = &ParamError{Key: "grammar", Msg: "json_schema is set too; give one"}
	case p.JSONSchema != "":
		if _, err := grammar.FromJSONSchema([]byte(p.JSONSchema)); err != nil {
			gramErr = &ParamError{Key: "json_schema", Msg: err.Error()}
		}
	case p.Grammar != "":
		if _, err := grammar.ParseGBNF(p.Grammar); err != nil {
			gramErr = &ParamError{Key: "grammar", Msg: err.Error()}
		}
	}
	return firstErr(
		floatIn("temperature", p.Temperature, 0, math.Inf(1), false),
		atLeast("top_k", p.TopK, 0),
		floatIn("top_p", p.TopP, 0, 1, true),
		floatIn("min_p", p.MinP, 0, 1, true),
		positive("repeat_penalty", p.RepeatPenalty),
		atLeast("repeat_last_n", p.RepeatLastN, 0),
		seedErr,
		gramErr,
	)
}

func atLeast(key string, v, lo int) error {
	if v < lo {
		return &ParamError{Key: key, Msg: fmt.Sprintf("%d is less than %d", v, lo)}
	}
	return nil
}

// floatIn checks lo ≤ v (≤ hi when closed, else any finite v); NaN and ±Inf
// are always rejected, since TOML can spell them (nan, inf).
func floatIn(key string, v, lo, hi float64, closed bool) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return &ParamError{Key: key, Msg: fmt.Sprintf("%v is not a finite number", v)}
	case v < lo:
		return &ParamError{Key: key, Msg: fmt.Sprintf("%g is less than %g", v, lo)}
	case closed && v > hi:
		return &ParamError{Key: key, Msg: fmt.Sprintf("%g is greater than %g", v, hi)}
	}
	return nil
}

func positive(key string, v float64) error {
	if err := floatIn(key, v, 0, 0, false); err != nil {
		return err
	}
	if v == 0 {
		return &ParamError{Key: key, Msg: "0 is not allowed; want a number > 0 (1 = off)"}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// DraftTreeParams configures speculative decoding (the draft_tree stage).
type DraftTreeParams struct {
	// Mode is "specexec" (a draft tree, verified so the text is exactly
	// plain decoding's), "chain" (draft_max tokens accepted by min(1, p/q):
	// exact in distribution, identical under greedy) or "lookup" (draft_max
	// tokens from an n-gram match over the prompt and output; no draft
	// model). Default "specexec".
	Mode string `toml:"mode"`
	// Budget is the most tree nodes per sequence per step (SpecExec). ≥ 1,
	// default 64; "auto" picks it each few steps for the most tokens per
	// second on this machine and tier, from the target pass's measured
	// cost per row count and the draft's acceptance (decode's budget
	// chooser), up to MaxBudget.
	Budget TreeBudget `toml:"budget"`
	// MaxBudget is the largest budget "auto" may pick; the engine's batch
	// and KV headroom are sized for it. ≥ 1, default 128. Unused with a
	// fixed budget.
	MaxBudget int `toml:"max_budget"`
	// MaxDepth is the deepest tree node (SpecExec). ≥ 1, default 8.
	MaxDepth int `toml:"max_depth"`
	// Branch is the most children of one node (SpecExec). ≥ 1, default 8.
	Branch int `toml:"branch"`
	// MaxBeams is the most nodes expanded in one draft pass (SpecExec). ≥ 1, default 16.
	MaxBeams int `toml:"max_beams"`
	// Decay multiplies a node's probability per level (SpecExec), in (0, 1]. Default 1.
	Decay float64 `toml:"decay"`
	// MaxPasses caps the draft passes per tree (SpecExec's max_beam_len);
	// ≥ 0, default 0: no cap.
	MaxPasses int `toml:"max_passes"`
	// DraftMax is γ, the tokens drafted per step (chain, lookup). ≥ 1, default 5.
	DraftMax int `toml:"draft_max"`
	// NgramMax and NgramMin bound the n-gram lookup matches (lookup).
	// Defaults 3 and 1.
	NgramMax int `toml:"ngram_max"`
	NgramMin int `toml:"ngram_min"`
}

// DefaultDraftTreeParams returns the draft_tree defaults.
func DefaultDraftTreeParams() *DraftTreeParams {
	return &DraftTreeParams{Mode: "specexec", Budget: 64, MaxBudget: 128, MaxDepth: 8, Branch: 8, MaxBeams: 16, Decay: 1, DraftMax: 5, NgramMax: 3, NgramMin: 1}
}

// Validate checks the ranges documented on the fields.
func (p *DraftTreeParams) Validate() error {
	var mode error
	switch p.Mode {
	case "specexec", "chain", "lookup":
	default:
		mode = &ParamError{Key: "mode", Msg: fmt.Sprintf("%q is not a mode; want \"specexec\", \"chain\" or \"lookup\"", p.Mode)}
	}
	var decay error
	if !(p.Decay > 0 && p.Decay <= 1) {
		decay = &ParamError{Key: "decay", Msg: fmt.Sprintf("%g is not in (0, 1]", p.Decay)}
	}
	var ngram error
	if p.NgramMin > p.NgramMax {
		ngram = &ParamError{Key: "ngram_min", Msg: fmt.Sprintf("%d is greater than ngram_max = %d", p.NgramMin, p.NgramMax)}
	}
	var budget error
	if p.Budget != AutoBudget {
		budget = atLeast("budget", int(p.Budget), 1)
	}
	return firstErr(mode,
		budget, atLeast("max_budget", p.MaxBudget, 1), atLeast("max_depth", p.MaxDepth, 1),
		atLeast("branch", p.Branch, 1), atLeast("max_beams", p.MaxBeams, 1),
		decay, atLeast("max_passes", p.MaxPasses, 0), atLeast("draft_max", p.DraftMax, 1),
		atLeast("ngram_max", p.NgramMax, 1), atLeast("ngram_min", p.NgramMin, 1), ngram)
}

// Options converts the params to the strategy's.
func (p *DraftTreeParams) Options() decode.SpecOptions {
	budget := int(p.Budget)
	if p.Budget == AutoBudget {
		budget = p.MaxBudget
	}
	return decode.SpecOptions{
		Mode:       p.Mode,
		AutoBudget: p.Budget == AutoBudget,
		Tree:       spec.TreeOptions{Budget: budget, MaxDepth: p.MaxDepth, Branch: p.Branch, MaxBeams: p.MaxBeams, Decay: p.Decay, MaxPasses: p.MaxPasses},
		DraftMax:   p.DraftMax,
		Lookup:     spec.LookupOptions{MaxNgram: p.NgramMax, MinNgram: p.NgramMin},
	}
}

// TreeBudget is draft_tree's budget: a node count, or AutoBudget.
type TreeBudget int

// AutoBudget is budget = "auto": the engine picks the budget as it runs.
const AutoBudget TreeBudget = -1

// UnmarshalTOML takes an integer or "auto"; the range is Validate's.
func (b *TreeBudget) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		if x < math.MinInt32 || x > math.MaxInt32 {
			return fmt.Errorf("budget %d is out of range", x)
		}
		*b = TreeBudget(x)
		return nil
	case string:
		if x == "auto" {
			*b = AutoBudget
			return nil
		}
		return fmt.Errorf("budget %q: want an integer or \"auto\"", x)
	}
	return fmt.Errorf("budget: got %T, want an integer or \"auto\"", v)
}

// ParseTreeBudget reads a budget as the command line writes it: "auto" or
// an integer (its range is Validate's).
func ParseTreeBudget(s string) (TreeBudget, error) {
	if s == "auto" {
		return AutoBudget, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
		return 0, fmt.Errorf("budget %q: want \"auto\" or an integer", s)
	}
	return TreeBudget(n), nil
}

func (b TreeBudget) String() string {
	if b == AutoBudget {
		return "auto"
	}
	return strconv.Itoa(int(b))
}
