// Package pipelines reads pipeline files: TOML documents that declare one
// generation graph as a chain of stages (built in: tokenize → scheduler →
// embed → transformer_layers → head → sample → detokenize), the model to run
// and a per-request timeout. Parse, Load and Preset guarantee that what they return
// is complete and valid, so a bad file fails before any model is loaded;
// Build (build.go) then wires the stages into a graph.
//
// The loader is strict. Every key must be known: a misspelled "top_pp" is an
// error naming the stage id, the key and its line, never a silently ignored
// setting. BurntSushi/toml's MetaData.Undecoded cannot give that on its own:
// its keys carry no array index ("stage.params.top_k" for every stage), so a
// key that is valid in one stage hides the same key misplaced in another, and
// it matches struct fields case-insensitively. The loader therefore decodes the
// document once into toml.Primitive values, decodes each stage's params with
// MetaData.PrimitiveDecode into the struct its kind registered, and checks the
// keys of every stage and table itself, exactly and per element.
//
// Stage kinds are registered constructors in a Registry (see Kind): each
// declares its params, the element types of its input and output ports, its
// part in the decode loop and a builder. Any chain whose ports fit (the first
// stage takes session.Request, each the previous stage's output, the last
// gives stages.Result) and that opens the decode loop before closing it is
// accepted, so later kinds (draft_tree, verify, beam) are added by
// registering them, and tests can build their own registry without touching
// Default. Types cannot tell the stages inside the loop apart (all carry
// *sched.Step), so a chain missing head, say, parses; the presets are the
// reference chains.
package pipelines

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/tensor"
)

// Sentinel errors. Every *Error unwraps to exactly one of them (and to the
// underlying TOML error, when there is one).
var (
	// ErrSyntax: the file is not valid TOML.
	ErrSyntax = errors.New("pipelines: syntax error")
	// ErrUnknownKey: a key the schema does not have (often a typo).
	ErrUnknownKey = errors.New("pipelines: unknown key")
	// ErrUnknownKind: a stage kind that is not registered.
	ErrUnknownKind = errors.New("pipelines: unknown stage kind")
	// ErrDuplicateID: two stages share an id.
	ErrDuplicateID = errors.New("pipelines: duplicate stage id")
	// ErrStageOrder: the stages do not connect: a stage's input type is not
	// the previous stage's output, or the decode loop is not opened and then
	// closed once.
	ErrStageOrder = errors.New("pipelines: bad stage order")
	// ErrInvalid: a value of the wrong type or out of range, or a missing
	// required key.
	ErrInvalid = errors.New("pipelines: invalid value")
	// ErrDuplicateKind: Register was called twice for one kind name.
	ErrDuplicateKind = errors.New("pipelines: duplicate kind")
	// ErrUnknownPreset: Preset was given a name with no embedded file.
	ErrUnknownPreset = errors.New("pipelines: unknown preset")
)

// Error is one problem at one place in one pipeline file. Parse returns a
// single *Error, or several joined with errors.Join (in line order) when the
// file has more than one problem; errors.AsType[*Error] finds the first.
type Error struct {
	Source string // file path, or "<preset greedy>"
	Line   int    // 1-based; 0 when unknown
	Col    int    // 1-based; 0 when unknown (set for syntax errors)
	Stage  string // id of the stage concerned; "" for file-level problems
	Msg    string // what was found and what was expected
	Kind   error  // one of the ErrXxx sentinels
	Cause  error  // the underlying TOML error, if any
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("pipelines: ")
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Stage != "" {
		fmt.Fprintf(&b, "stage %q: ", e.Stage)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap exposes the sentinel and the TOML cause to errors.Is / errors.AsType.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Cause != nil {
		errs = append(errs, e.Cause)
	}
	return errs
}

// Pipeline is a validated pipeline file.
type Pipeline struct {
	Name        string
	Description string
	Timeout     time.Duration // per request; 0 = none
	Model       ModelSpec
	// Draft is the [draft] table: the draft model of speculative decoding
	// (same keys as [model]; context and page_tokens follow [model]). nil
	// when the file has none.
	Draft *ModelSpec
	// Cache is the [cache] table: the KV cache's memory budget.
	Cache  CacheSpec
	Stages []StageSpec // in file order, which is the order of the chain
	Source string      // file path, or "<preset greedy>"

	reg *Registry // the registry that parsed it; nil = Default
}

// Registry is the registry that parsed the pipeline (Default for one made in
// Go); Build and Describe use its kinds.
func (p *Pipeline) Registry() *Registry {
	if p.reg == nil {
		return Default
	}
	return p.reg
}

// ModelSpec is the [model] table. Every field is optional, because CLI flags
// override them; the zero value of each means "not given" and the
// documented default applies.
type ModelSpec struct {
	// Path is a .gguf file or a llama2.c .bin checkpoint. Load makes a
	// relative path relative to the pipeline file's directory.
	Path string
	// Tokenizer is the llama2.c tokenizer.bin a .bin checkpoint needs
	// (GGUF files carry their own). Resolved like Path.
	Tokenizer string
	// TokenizerPre, when set, replaces a GGUF vocabulary's
	// tokenizer.ggml.pre: the byte-level BPE pre-tokenizer, by a name
	// tokenizer.PreTokenizers lists (for a file whose value sluice does not
	// know, which is otherwise an error).
	TokenizerPre string
	// Tier is where weights live: "auto" (default: "ram" when the file fits
	// in half the available memory and in MemBudget, else "mmap", or "ssd"
	// with a MemBudget), "ram", "mmap" or "ssd" (a pinned set plus layers
	// streamed from the file through a ring of buffers).
	Tier string
	// Threads for the kernels; 0 = GOMAXPROCS.
	Threads int
	// Context is the KV capacity in tokens per sequence; 0 = the model's
	// context length.
	Context int
	// PageTokens is the KV page size in tokens; 0 = the KV cache's default.
	PageTokens int
	// MemBudget bounds resident weight bytes; 0 = none. The file's
	// mem_budget takes units ("512MiB", "2GB") or an integer of bytes.
	MemBudget int64
}

// CacheSpec is the [cache] table; the zero value is "not given".
type CacheSpec struct {
	// KVBudget bounds the KV-cache bytes resident in memory; 0 = none.
	// Pages beyond it live in a spill file and are read back when a step
	// needs them (never dropped). The file's kv_budget takes units
	// ("64MiB") or an integer of bytes.
	KVBudget int64
	// SpillDir is the directory of the spill file; "" = the system's temp
	// directory. Resolved like ModelSpec.Path.
	SpillDir string
	// KVType is the KV cache's element type, "f32" or "f16" (binary16
	// pages: half the memory and attention bandwidth); "" = DefaultKVType.
	KVType string
	// NoPrefixCache turns prefix caching off (the file's prefix_cache =
	// false); it is on by default: a request starts from the cached KV
	// pages of the longest prefix of its prompt earlier requests computed.
	NoPrefixCache bool
	// PrefixCacheSize bounds the bytes of cached KV pages no request holds
	// (prefix_cache_size, with units like kv_budget); 0 = kv_budget when
	// set, else the KV pool.
	PrefixCacheSize int64
}

// DefaultKVType is the KV element type when neither [cache] kv_type nor a
// flag names one.
const DefaultKVType = "f32"

// KVDType is c.KVType as a tensor type ("" = DefaultKVType); the loader has
// checked it names one.
func (c CacheSpec) KVDType() tensor.DType {
	if c.KVType == "f16" || (c.KVType == "" && DefaultKVType == "f16") {
		return tensor.F16
	}
	return tensor.F32
}

// Tiers a ModelSpec may name.
const (
	TierMmap = "mmap"
	TierRAM  = "ram"
	TierAuto = "auto"
	TierSSD  = "ssd"
)

// StageSpec is one [[stage]] entry: what the file says of a stage (graph.Stage
// is the running thing a kind builds from it).
type StageSpec struct {
	ID      string // unique within the pipeline
	Kind    string // a registered kind, e.g. "sample"
	Buffer  int    // capacity of the stage's output channel, ≥ 1 (default 1)
	Workers int    // parallel Process loops, ≥ 1 (default 1); > 1 only for stateless kinds
	// Fuse runs the stage's nodes on the goroutine of the node before them
	// (graph.Fused): no channel, no hand-off. Only for Fusable kinds and
	// one worker. Default false.
	Fuse bool
	// Params is the kind's params struct, decoded over its defaults:
	// *TokenizeParams, *SchedulerParams, *TransformerLayersParams,
	// *SampleParams, or nil for kinds without params (embed, head,
	// detokenize).
	Params any
	Line   int // line of the stage's [[stage]] header; 0 if unknown
}

// StageOfKind returns the first stage of the given kind.
func (p *Pipeline) StageOfKind(kind string) (*StageSpec, bool) {
	for i := range p.Stages {
		if p.Stages[i].Kind == kind {
			return &p.Stages[i], true
		}
	}
	return nil, false
}
