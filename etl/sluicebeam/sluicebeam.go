// Package sluicebeam runs sluice inside Apache Beam pipelines: Generate is a
// transform from prompts to completions, keyed by custom_id.
//
// On each worker the model is opened once (in the DoFn's Setup, shared by
// every DoFn instance of the process with the same Config) and every
// element of a bundle joins the engine's one continuous batch: ProcessElement
// submits and returns at once, FinishBundle waits for the bundle's requests
// and emits their results. A request that fails (a prompt longer than the
// context, a bad adapter name) becomes a Result with Error set, never a
// failed bundle; only a model that cannot be opened fails the DoFn.
//
// Config is serialized with the DoFn (exported fields only), so it names
// files, not open handles: the model path must exist on every worker (copy
// it there, bake it into the container image, or mount the object store).
package sluicebeam

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/pipelines"
)

// Config says which model to run and how. It travels with the pipeline.
type Config struct {
	// Model is the model file (.gguf, or a llama2.c .bin with Tokenizer),
	// at this path on every worker.
	Model     string `json:"model"`
	Tokenizer string `json:"tokenizer,omitempty"`
	// Pipeline is a preset name ("greedy", "sample", …) or the text of a
	// pipeline TOML file; "" is greedy.
	Pipeline string `json:"pipeline,omitempty"`
	// MaxNewTokens, when > 0, replaces the pipeline's max_new_tokens.
	MaxNewTokens int `json:"max_new_tokens,omitempty"`
	// MaxInFlight, when > 0, replaces the pipeline's max_in_flight: how
	// many prompts share one forward pass.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// Threads, when > 0, is the kernel threads of each worker's engine.
	Threads int `json:"threads,omitempty"`
	// JSONSchema, when set, constrains every element without a constraint
	// of its own to the values of this JSON Schema (its text): the
	// pipeline's default schema. One the engine cannot enforce fails Open.
	JSONSchema string `json:"json_schema,omitempty"`
}

// Prompt is one request.
type Prompt struct {
	CustomID string `json:"custom_id"`
	Prompt   string `json:"prompt"`
	// MaxTokens caps generated tokens; 0 is the pipeline's.
	MaxTokens int `json:"max_tokens,omitempty"`
	// JSONSchema (a JSON Schema's text) or Grammar (GBNF) constrains this
	// element's output instead of Config.JSONSchema; one the engine cannot
	// enforce is this element's error result.
	JSONSchema string `json:"json_schema,omitempty"`
	Grammar    string `json:"grammar,omitempty"`
}

// Result is one completion, or why there is none.
type Result struct {
	CustomID         string `json:"custom_id"`
	Text             string `json:"text,omitempty"`
	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	CachedTokens     int    `json:"cached_tokens,omitempty"` // prompt tokens the prefix cache supplied
	FinishReason     string `json:"finish_reason,omitempty"`
	Error            string `json:"error,omitempty"`
}

func init() {
	register.DoFn3x1[context.Context, Prompt, func(string, Result), error](&generateFn{})
	register.Emitter2[string, Result]()
	beam.RegisterType(reflect.TypeOf((*Prompt)(nil)).Elem())
	beam.RegisterType(reflect.TypeOf((*Result)(nil)).Elem())
}

// Generate completes every Prompt of prompts (a PCollection<Prompt>) and
// returns a PCollection<KV<string, Result>> keyed by custom_id.
func Generate(s beam.Scope, cfg Config, prompts beam.PCollection) beam.PCollection {
	s = s.Scope("sluicebeam.Generate")
	return beam.ParDo(s, &generateFn{Config: cfg}, prompts)
}

// generateFn is Generate's DoFn. Only Config is serialized; the rest is set
// up on the worker.
type generateFn struct {
	Config Config

	eng *shared
	mu  sync.Mutex
	out []Result
	wg  sync.WaitGroup
}

func (f *generateFn) Setup(ctx context.Context) error {
	eng, err := acquire(ctx, f.Config)
	if err != nil {
		return err
	}
	f.eng = eng
	return nil
}

func (f *generateFn) StartBundle(context.Context, func(string, Result)) {
	f.out = f.out[:0]
}

// ProcessElement submits p to the engine and returns; the result is emitted
// by FinishBundle. Submit blocks while the engine's queue is full, which is
// the backpressure on the bundle.
func (f *generateFn) ProcessElement(ctx context.Context, p Prompt, _ func(string, Result)) error {
	req := sluice.Request{ID: p.CustomID, Prompt: p.Prompt, MaxNewTokens: p.MaxTokens}
	if p.JSONSchema != "" || p.Grammar != "" {
		sp := &grammar.Spec{Schema: []byte(p.JSONSchema), GBNF: p.Grammar}
		if _, err := f.eng.e.Grammars().Matcher(*sp); err != nil {
			f.mu.Lock()
			f.out = append(f.out, Result{CustomID: p.CustomID, FinishReason: sluice.FinishError, Error: err.Error()})
			f.mu.Unlock()
			return nil
		}
		req.Grammar = sp
	}
	f.wg.Add(1)
	err := f.eng.e.Submit(context.WithoutCancel(ctx), req, func(res sluice.Result) {
		defer f.wg.Done()
		r := Result{CustomID: p.CustomID, Text: res.Completion, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, CachedTokens: res.CachedTokens, FinishReason: res.Finish}
		if res.Err != nil {
			r = Result{CustomID: p.CustomID, FinishReason: res.Finish, Error: res.Err.Error()}
		}
		f.mu.Lock()
		f.out = append(f.out, r)
		f.mu.Unlock()
	})
	if err != nil {
		f.wg.Done()
		if errors.Is(err, sluice.ErrClosed) {
			return err // the worker is going away: let the runner retry the bundle
		}
		f.mu.Lock()
		f.out = append(f.out, Result{CustomID: p.CustomID, FinishReason: sluice.FinishError, Error: err.Error()})
		f.mu.Unlock()
	}
	return nil
}

// FinishBundle waits for the bundle's requests and emits their results.
func (f *generateFn) FinishBundle(_ context.Context, emit func(string, Result)) error {
	f.wg.Wait()
	f.mu.Lock()
	out := f.out
	f.out = nil
	f.mu.Unlock()
	for _, r := range out {
		emit(r.CustomID, r)
	}
	return nil
}

func (f *generateFn) Teardown() {
	if f.eng != nil {
		release(f.eng)
		f.eng = nil
	}
}

// shared is one engine per Config in the worker process, reference counted
// across the DoFn instances that use it.
type shared struct {
	cfg  Config
	e    *sluice.Engine
	refs int
}

var (
	enginesMu sync.Mutex
	engines   = map[Config]*shared{}
)

func acquire(ctx context.Context, cfg Config) (*shared, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if sh, ok := engines[cfg]; ok {
		sh.refs++
		return sh, nil
	}
	e, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sh := &shared{cfg: cfg, e: e, refs: 1}
	engines[cfg] = sh
	return sh, nil
}

func release(sh *shared) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if sh.refs--; sh.refs == 0 {
		delete(engines, sh.cfg)
		sh.e.Drain(context.Background())
	}
}

// Open starts the engine cfg describes, as each worker does; a program
// that checks a pipeline's output against the engine run directly uses it
// too.
func Open(ctx context.Context, cfg Config) (*sluice.Engine, error) {
	if cfg.Model == "" {
		return nil, errors.New("sluicebeam: Config.Model is empty")
	}
	name := cfg.Pipeline
	if name == "" {
		name = "greedy"
	}
	var p *pipelines.Pipeline
	var err error
	if slices.Contains(pipelines.Presets(), name) {
		p, err = pipelines.Preset(name)
	} else {
		p, err = pipelines.Parse([]byte(name), "<sluicebeam.Config.Pipeline>")
	}
	if err != nil {
		return nil, fmt.Errorf("sluicebeam: %w", err)
	}
	if s := p.Scheduler(); s != nil {
		if cfg.MaxNewTokens > 0 {
			s.MaxNewTokens = cfg.MaxNewTokens
		}
		if cfg.MaxInFlight > 0 {
			s.MaxInFlight = cfg.MaxInFlight
		}
	}
	if cfg.Threads > 0 {
		p.Model.Threads = cfg.Threads
	}
	if cfg.JSONSchema != "" {
		sp := p.Sampler()
		if sp == nil {
			return nil, errors.New("sluicebeam: Config.JSONSchema needs a pipeline with a sample stage")
		}
		sp.JSONSchema = cfg.JSONSchema
		if err := sp.Validate(); err != nil {
			return nil, fmt.Errorf("sluicebeam: Config.JSONSchema: %w", err)
		}
	}
	e, err := sluice.Open(ctx, sluice.Options{Pipeline: p, Model: cfg.Model, Tokenizer: cfg.Tokenizer})
	if err != nil {
		return nil, fmt.Errorf("sluicebeam: open %s: %w", cfg.Model, err)
	}
	return e, nil
}
