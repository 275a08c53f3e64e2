// Package sluice runs open-weight language models on local hardware as a
// dataflow graph of stages. It is the one place where a model, the scheduler
// and the stage graph are put together; the CLI, a server or an ETL job embed
// the engine through it.
//
//	eng, err := sluice.Open(ctx, sluice.Options{Model: "stories260K.gguf"})
//	...
//	defer eng.Close()
//	res, err := eng.Complete(ctx, sluice.Request{Prompt: "Once upon a time", MaxNewTokens: 64})
//
// An Engine is long-lived: requests from every goroutine join one continuous
// batch (each step's forward pass carries a row of every generating request
// on the same LoRA adapter set as the oldest one; see package sched),
// tokens stream out as they are sampled (Generate), and each request ends
// alone when its context is cancelled or its deadline passes.
package sluice

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/archs" // every architecture
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
	"github.com/sluicehq/sluice/tokenizer"
)

// Request is one prompt to complete; see session.Request. Ctx and Tag are set
// by the engine.
type Request = session.Request

// Finish reasons.
const (
	FinishStop      = session.FinishStop
	FinishLength    = session.FinishLength
	FinishError     = session.FinishError
	FinishCancelled = session.FinishCancelled
	FinishTimeout   = session.FinishTimeout
)

// ErrClosed is returned by Generate and Complete once the engine is closing.
var ErrClosed = errors.New("sluice: engine closed")

// Options configure an engine.
type Options struct {
	// Pipeline is the stage graph and its settings; nil is the greedy preset.
	// Its [model] table says what to load unless Model is set.
	Pipeline *pipelines.Pipeline
	// Model and Tokenizer override the pipeline's [model] path and tokenizer.
	Model, Tokenizer string
	// Logger receives the engine's logs; the zero value discards them.
	Logger zerolog.Logger
	// Progress, when set, is called while the weights load.
	Progress func(done, total int64)
	// Setup runs after the model has loaded and before the engine starts
	// (registering LoRA adapters, say); an error fails Open.
	Setup func(*model.Loaded) error
	// Draft is the draft model of speculative decoding, for New (Open loads
	// the pipeline's [draft] itself). The engine closes it if Open loaded it.
	Draft *model.Loaded
}

// Result is a finished request.
type Result struct {
	ID         string
	Text       string // llama2.c-style: the prompt's text and the completion
	Completion string // the generated text
	Tokens     []int32
	// PromptTokens and CompletionTokens count Tokens' two parts.
	PromptTokens, CompletionTokens int
	// CachedTokens are the prompt tokens the prefix cache supplied (not
	// computed for this request).
	CachedTokens int
	// JumpedTokens are the completion tokens a grammar forced and
	// jump-forward took without a target pass of their own
	// (session.Session.JumpForward).
	JumpedTokens           int
	Finish                 string // FinishStop, FinishLength, …
	Err                    error  // set for FinishError, FinishCancelled and FinishTimeout
	Start, FirstToken, End time.Time
	// Beams are a beam search's returned sequences, best first (Tokens and
	// Text are the best's).
	Beams []BeamResult
}

// BeamResult is one sequence a beam search returned.
type BeamResult struct {
	Tokens []int32 // generated, the end-of-sequence token included when it ended there
	Text   string
	Score  float64 // Σ log p / len^length_penalty
}

// Token is one sampled token and the text it completes ("" while a character
// is incomplete).
type Token struct {
	ID   int32
	Text string
}

// Engine is a loaded model and its running stage graph.
type Engine struct {
	loaded *model.Loaded
	owned  bool
	pipe   *pipelines.Pipeline
	env    *stages.Env
	g      *graph.Graph
	log    zerolog.Logger

	reqs chan session.Request
	quit chan struct{} // closed by Close: the request source ends
	ran  chan error    // the graph's Run result
	stop context.CancelFunc

	mu      sync.Mutex
	closing bool
	open    map[*pending]struct{} // accepted, not yet finished
}

// pending is an accepted request waiting for its result.
type pending struct {
	done func(Result)
}

// Open loads the model and starts the engine.
func Open(ctx context.Context, o Options) (*Engine, error) {
	p, err := pipelineOf(o)
	if err != nil {
		return nil, err
	}
	if p.Model.Path == "" {
		return nil, fmt.Errorf("sluice: no model: set Options.Model or [model] path in %s", p.Source)
	}
	tier, err := offload.ParseTier(p.Model.Tier)
	if err != nil {
		return nil, err
	}
	l, err := model.Load(ctx, model.LoadOptions{
		Path: p.Model.Path, Tokenizer: p.Model.Tokenizer, TokenizerPre: p.Model.TokenizerPre, Tier: tier, Threads: p.Model.Threads,
		Logger: o.Logger, Progress: o.Progress, Budget: p.Model.MemBudget,
	})
	if err != nil {
		return nil, err
	}
	if o.Setup != nil {
		if err := o.Setup(l); err != nil {
			l.Close()
			return nil, err
		}
	}
	var draft *model.Loaded
	if p.Draft != nil && p.Draft.Path != "" {
		if draft, err = OpenDraft(ctx, p, l, o.Logger); err != nil {
			l.Close()
			return nil, err
		}
		o.Draft = draft
	}
	o.Pipeline = p
	e, err := New(l, o)
	if err != nil {
		l.Close()
		if draft != nil {
			draft.Close()
		}
		return nil, err
	}
	e.owned = true
	return e, nil
}

// OpenDraft opens the pipeline's [draft] model and checks its vocabulary
// against the target's, for callers of New (Open does it itself).
func OpenDraft(ctx context.Context, p *pipelines.Pipeline, target *model.Loaded, log zerolog.Logger) (*model.Loaded, error) {
	d := p.Draft
	tier, err := offload.ParseTier(d.Tier)
	if err != nil {
		return nil, err
	}
	threads := d.Threads
	if threads == 0 {
		threads = p.Model.Threads
	}
	l, err := model.Load(ctx, model.LoadOptions{Path: d.Path, Tokenizer: d.Tokenizer, Tier: tier, Threads: threads, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("sluice: draft: %w", err)
	}
	if err := decode.CheckVocab(target, l); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func pipelineOf(o Options) (*pipelines.Pipeline, error) {
	p := o.Pipeline
	if p == nil {
		var err error
		if p, err = pipelines.Preset("greedy"); err != nil {
			return nil, err
		}
	} else {
		cp := *p
		p = &cp
	}
	if o.Model != "" {
		p.Model.Path = o.Model
	}
	if o.Tokenizer != "" {
		p.Model.Tokenizer = o.Tokenizer
	}
	return p, nil
}

// New starts an engine over a model the caller loaded and keeps: Close does
// not close l. Options.Model, Tokenizer, Progress and Setup do not apply.
func New(l *model.Loaded, o Options) (*Engine, error) {
	p, err := pipelineOf(o)
	if err != nil {
		return nil, err
	}
	a := l.Model.Arch()
	so := p.SchedOptions()
	switch {
	case so.Context < 0:
		return nil, fmt.Errorf("sluice: %s: context = %d, want ≥ 0", p.Source, so.Context)
	case so.Context == 0:
		so.Context = a.Context
	case so.Context > a.Context:
		o.Logger.Warn().Int("context", so.Context).Int("model_context", a.Context).Msg("context larger than the model's: clamped")
		so.Context = a.Context
	}
	// What the pipeline's decoding strategy needs before the engine sizes
	// itself: a draft adds up to Rows rows per generating sequence to a
	// step, and a draft model's KV cache takes a share of the budget.
	needs := p.Needs()
	if needs.Rows > 0 {
		rows := needs.Rows + 1
		so.Headroom = rows
		if so.MaxBatchTokens == 0 {
			so.MaxBatchTokens = so.MaxSeqs * max(rows, so.PrefillChunk, 64)
		} else if so.MaxBatchTokens < rows {
			return nil, fmt.Errorf("sluice: %s: max_batch_tokens = %d cannot hold one draft of %d rows; raise it or lower the draft's budget", p.Source, so.MaxBatchTokens, rows)
		}
	}
	var draftKV int64
	if so.KVBudget > 0 && o.Draft != nil && needs.DraftKV != nil {
		if so.KVBudget, draftKV, err = splitKV(so.KVBudget, sched.KVOptions(a, so), needs.DraftKV(o.Draft.Model.Arch(), so), so.MaxSeqs); err != nil {
			return nil, fmt.Errorf("sluice: %s: %w", p.Source, err)
		}
	}
	sc, err := sched.New(a, so)
	if err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Source, err)
	}
	sess := p.SessionOptions()
	sess.Context = so.Context
	sess.Grammars = grammar.NewCache(l.Tokenizer)
	if err := sess.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("sluice: %s: %w", p.Source, err)
	}
	e := &Engine{
		loaded: l, pipe: p, log: o.Logger,
		env: &stages.Env{Model: l.Model, Store: l.Store, Tok: l.Tokenizer, Sched: sc, Session: sess, Draft: o.Draft, DraftKVBudget: draftKV,
			Loop: decode.NewLoop(sc, decode.Options{Model: l.Model, Store: l.Store})},
		reqs: make(chan session.Request),
		quit: make(chan struct{}),
		ran:  make(chan error, 1),
		open: map[*pending]struct{}{},
	}
	e.g, err = pipelines.Build(p, pipelines.BuildOptions{Env: e.env, Requests: e.source, Results: e.sink, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go func() { e.ran <- e.g.Run(ctx) }()
	return e, nil
}

// Encode tokenizes a prompt as the pipeline's tokenize stage does (with BOS
// when add_bos is set).
func (e *Engine) Encode(prompt string) []int32 {
	return e.env.Tok.Encode(prompt, tokenizer.EncodeOptions{BOS: e.pipe.AddBOS()})
}

// Text renders tokens as llama2.c's run.c prints them (see session.Text).
func (e *Engine) Text(tokens []int32) string { return session.Text(e.env.Tok, tokens) }

// Grammars is the engine's grammar cache: the matcher of every schema and
// grammar its requests carried (Request.Grammar), over the model's
// vocabulary. A front end compiles a request's constraint through it to
// refuse a bad one before submitting it (and warm the cache); its Stats
// are the time spent masking.
func (e *Engine) Grammars() *grammar.Cache { return e.env.Session.Grammars }

// Draft is the draft model (nil without one).
func (e *Engine) Draft() *model.Loaded { return e.env.Draft }

// Loaded is the model the engine runs.
func (e *Engine) Loaded() *model.Loaded { return e.loaded }

// Pipeline is the pipeline the engine runs (with its [model] table resolved).
func (e *Engine) Pipeline() *pipelines.Pipeline { return e.pipe }

// Context is the KV slots per sequence.
func (e *Engine) Context() int { return e.env.Session.Context }

// Stats is the scheduler's snapshot: queue, active sequences, KV pages.
func (e *Engine) Stats() sched.Stats { return e.env.Sched.Stats() }

// NodeStats is the per-stage metrics of the graph so far.
func (e *Engine) NodeStats() []graph.NodeStats { return e.g.Stats() }

func (e *Engine) source(ctx context.Context, emit graph.Emit[session.Request]) error {
	for {
		select {
		case r := <-e.reqs:
			if err := emit(ctx, r); err != nil {
				return err
			}
		case <-e.quit:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (e *Engine) sink(_ context.Context, r stages.Result) error {
	q := r.Session
	p, _ := q.Req.Tag.(*pending)
	if p == nil {
		return nil
	}
	e.mu.Lock()
	delete(e.open, p)
	e.mu.Unlock()
	res := Result{
		ID: q.Req.ID, Text: r.Text, Completion: r.Completion, Tokens: q.Tokens,
		PromptTokens: q.NPrompt, CompletionTokens: q.Generated(), CachedTokens: q.CachedTokens, JumpedTokens: q.Jumped,
		Finish: q.Finish, Err: q.Err, Start: q.Start, FirstToken: q.FirstToken, End: q.End,
	}
	for _, h := range q.Beams {
		res.Beams = append(res.Beams, BeamResult{Tokens: h.Tokens, Score: h.Score,
			Text: tokenizer.Decode(e.env.Tok, q.Tokens[q.NPrompt-1], h.Tokens)})
	}
	p.done(res)
	return nil
}

// Submit queues a request; done is called once with its result, on the
// engine's result goroutine (it must not block for long). ctx is the
// request's own: cancelling it, or its deadline, ends this request alone with
// finish reason cancelled or timeout. Submit blocks while the engine's queue
// is full, and fails with ErrClosed once Close has begun.
func (e *Engine) Submit(ctx context.Context, req Request, done func(Result)) error {
	p := &pending{done: done}
	req.Ctx, req.Tag = ctx, p
	e.mu.Lock()
	if e.closing {
		e.mu.Unlock()
		return ErrClosed
	}
	e.open[p] = struct{}{}
	e.mu.Unlock()
	select {
	case e.reqs <- req:
		return nil
	case <-e.quit:
	case <-ctx.Done():
	}
	e.mu.Lock()
	delete(e.open, p)
	e.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrClosed
}

// Generate starts a request and returns the stream of its tokens.
func (e *Engine) Generate(ctx context.Context, req Request) (*Stream, error) {
	s := newStream()
	user := req.OnToken
	req.OnToken = func(tok int32, text string) {
		if user != nil {
			user(tok, text)
		}
		s.push(Token{ID: tok, Text: text})
	}
	if err := e.Submit(ctx, req, s.finish); err != nil {
		return nil, err
	}
	return s, nil
}

// Complete runs a request to its end. The error is the request's own (a
// result with FinishError, FinishCancelled or FinishTimeout carries it too)
// or ErrClosed.
func (e *Engine) Complete(ctx context.Context, req Request) (Result, error) {
	s, err := e.Generate(ctx, req)
	if err != nil {
		return Result{ID: req.ID, Finish: FinishError, Err: err}, err
	}
	r := s.Result()
	return r, r.Err
}

// Drain stops accepting requests and waits until every accepted one has
// finished (or ctx ends: then the rest are cancelled), then closes.
func (e *Engine) Drain(ctx context.Context) error {
	e.beginClose()
	select {
	case err := <-e.ran:
		e.ran <- err
	case <-ctx.Done():
	}
	return e.Close()
}

// Close stops accepting requests, cancels those still running (each ends
// with finish reason cancelled and its stream closes), waits for every stage
// goroutine to stop and releases the model if Open loaded it.
func (e *Engine) Close() error {
	e.beginClose()
	e.env.Sched.Shutdown()
	err := <-e.ran
	e.ran <- err
	e.stop()
	if cerr := e.env.Sched.Cache.Close(); err == nil {
		err = cerr // the KV budget's spill file
	}
	if cerr := e.env.Loop.Close(); err == nil {
		err = cerr // the draft's share of it
	}
	e.mu.Lock()
	rest := e.open
	e.open = map[*pending]struct{}{}
	e.mu.Unlock()
	cause := err
	if cause == nil {
		cause = ErrClosed
	}
	for p := range rest {
		p.done(Result{Finish: FinishError, Err: cause})
	}
	if e.owned {
		e.owned = false
		if cerr := e.loaded.Close(); err == nil {
			err = cerr
		}
		if e.env.Draft != nil {
			if cerr := e.env.Draft.Close(); err == nil {
				err = cerr
			}
		}
	}
	return err
}

// SpecStats is what speculative decoding did (zero without a draft_tree stage).
func (e *Engine) SpecStats() decode.SpecStats { return e.env.Loop.SpecStats() }

func (e *Engine) beginClose() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closing {
		e.closing = true
		close(e.quit)
	}
}

// Stream is one request's tokens as they are sampled.
type Stream struct {
	mu     sync.Mutex
	toks   []Token
	read   int
	wake   chan struct{}
	done   chan struct{}
	result Result
}

func newStream() *Stream {
	return &Stream{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.toks = append(s.toks, t)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Stream) finish(r Result) {
	s.result = r
	close(s.done)
}

// Next returns the next token, waiting for it; false once the request has
// ended and every token was read (or ctx ended).
func (s *Stream) Next(ctx context.Context) (Token, bool) {
	for {
		s.mu.Lock()
		if s.read < len(s.toks) {
			t := s.toks[s.read]
			s.read++
			s.mu.Unlock()
			return t, true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.done:
			s.mu.Lock()
			more := s.read < len(s.toks)
			s.mu.Unlock()
			if !more {
				return Token{}, false
			}
		case <-ctx.Done():
			return Token{}, false
		}
	}
}

// Done is closed when the request has ended.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Result waits for the request to end and returns its result.
func (s *Stream) Result() Result {
	<-s.done
	return s.result
}

// splitKV divides one KV budget between the target's cache (tko) and the
// draft model's (dko), both for maxSeqs sequences, in proportion to what
// each needs to hold every page, the draft getting at least its minimum
// (one full-length step). Each cache then spills on its own: their frames
// differ in size and live in different caches, and a fixed split keeps
// each one's pass share independent of the other's load. A budget that
// holds both caches whole bounds neither.
func splitKV(budget int64, tko, dko kvcache.Options, maxSeqs int) (target, draft int64, err error) {
	tMin, tAll := sched.KVNeed(tko, maxSeqs)
	dMin, dAll := sched.KVNeed(dko, maxSeqs)
	if budget >= tAll+dAll {
		return tAll, dAll, nil
	}
	draft = max(int64(float64(budget)*float64(dAll)/float64(tAll+dAll)), dMin)
	target = budget - draft
	if target < tMin {
		return 0, 0, fmt.Errorf("kv_budget = %s is below what the KV caches of the target and the draft model need together: the target needs at least %s (one full-context step), the draft %s, %s in all",
			offload.FormatBytes(budget), offload.FormatBytes(tMin), offload.FormatBytes(dMin), offload.FormatBytes(tMin+dMin))
	}
	return target, draft, nil
}
