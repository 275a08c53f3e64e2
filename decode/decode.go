// Package decode is the generation policy shared by every way sluice runs a
// model: how a request becomes a token sequence, how a sequence's next forward
// pass is planned (prompt prefill in chunks, then one token per step), how the
// next token is chosen and when a sequence stops, and how its text is printed.
// The graph stages in package stages are thin adapters over an Engine; Generate
// runs the same steps in a plain loop, for embedding and for tests.
package decode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
)

// Request is one prompt to complete.
type Request struct {
	ID           string
	Index        uint64 // request number r: the keyed RNG draws (seed, r, t)
	Prompt       string
	Tokens       []int32         // a pre-tokenized prompt; used instead of Prompt when set (no BOS added)
	MaxNewTokens int             // 0 = Options.MaxNewTokens
	Sampling     *sample.Options // nil = Options.Sampling
	// Adapter names a LoRA adapter set registered on the model
	// (model.Adaptable.AddAdapter); "" runs the base model.
	Adapter string
}

// Options are the engine-wide defaults.
type Options struct {
	Sampling     sample.Options
	MaxNewTokens int  // 0 = until a stop token or the context is full
	PrefillChunk int  // prompt tokens per forward pass; default 64
	AddBOS       bool // prepend BOS to the prompt
	NoStop       bool // keep going past EOS/BOS (benchmarks)
	Context      int  // KV tokens per sequence; 0 = the model's context length
	MaxSeqs      int  // sequences in flight at once; default 1
	PageTokens   int  // KV page size; default 16
	// AllLogits computes logits at every prompt position too (perplexity, tests).
	AllLogits bool
	// OnLogits, when set, sees every row of logits computed for s, in position
	// order: pos is the position of the token the logits were computed at.
	OnLogits func(s *Seq, pos int32, logits []float32)
}

// Finish reasons, as OpenAI names them.
const (
	FinishStop   = "stop"   // a stop token
	FinishLength = "length" // MaxNewTokens or the context
	FinishError  = "error"
)

// Seq is one sequence on its way through the engine.
type Seq struct {
	Req     Request
	Tokens  []int32 // prompt (with BOS) then generated tokens
	NPrompt int
	Cached  int // tokens whose keys and values are in the KV cache
	Finish  string
	Err     error

	Start, FirstToken, End time.Time

	kvID    int32 // KV-cache sequence; -1 when none
	maxNew  int
	sampler *sample.Sampler
	scratch sample.Scratch
}

// Done reports whether s has finished (or failed).
func (s *Seq) Done() bool { return s.Finish != "" }

// Generated is the number of new tokens.
func (s *Seq) Generated() int { return len(s.Tokens) - s.NPrompt }

// Engine owns the model's KV cache and the per-sequence state; it is safe for
// the concurrent use the graph makes of it (different sequences at once).
type Engine struct {
	Model model.Model
	Tok   tokenizer.Tokenizer
	Store offload.Store
	KV    *kvcache.Cache
	Opt   Options
	arch  model.Arch

	mu     sync.Mutex
	freeKV []int32
	// states are reusable forward-pass States, a free list under mu rather
	// than a sync.Pool: a pool's per-P private slot is invisible to a
	// goroutine that moved to another P, and the GC empties it, and either
	// way a fresh State regrows every scratch buffer (seen as allocations
	// in the decode loop with two threads).
	states []*model.State
}

// New builds an engine over a loaded model.
func New(l *model.Loaded, o Options) (*Engine, error) {
	a := l.Model.Arch()
	if o.PrefillChunk <= 0 {
		o.PrefillChunk = 64
	}
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = 1
	}
	if o.PageTokens <= 0 {
		o.PageTokens = 16
	}
	if o.Context <= 0 || o.Context > a.Context {
		o.Context = a.Context
	}
	if err := o.Sampling.Validate(); err != nil {
		return nil, err
	}
	kv, err := kvcache.New(kvcache.Options{
		Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
		PageTokens: o.PageTokens, MaxTokens: o.Context * o.MaxSeqs, MaxSeqLen: o.Context,
		Window: a.SlidingWindow,
	})
	if err != nil {
		return nil, err
	}
	e := &Engine{Model: l.Model, Tok: l.Tokenizer, Store: l.Store, KV: kv, Opt: o, arch: a}
	for i := o.MaxSeqs - 1; i >= 0; i-- {
		e.freeKV = append(e.freeKV, int32(i))
	}
	return e, nil
}

// Start tokenizes a request. A request that cannot run comes back finished
// with Err set; it is never an error of the whole run.
func (e *Engine) Start(req Request) *Seq {
	s := &Seq{Req: req, kvID: -1, Start: time.Now()}
	so := e.Opt.Sampling
	if req.Sampling != nil {
		so = *req.Sampling
	}
	s.maxNew = e.Opt.MaxNewTokens
	if req.MaxNewTokens > 0 {
		s.maxNew = req.MaxNewTokens
	}
	var err error
	if s.sampler, err = sample.New(so); err != nil {
		return e.fail(s, err)
	}
	if req.Adapter != "" {
		ad, ok := e.Model.(model.Adaptable)
		if !ok || !slices.Contains(ad.Adapters(), req.Adapter) {
			return e.fail(s, fmt.Errorf("decode: request %s: %w: %q is not loaded (loaded: %v)", req.ID, model.ErrAdapter, req.Adapter, loadedAdapters(e.Model)))
		}
	}
	if len(req.Tokens) > 0 {
		s.Tokens = append([]int32(nil), req.Tokens...)
	} else {
		s.Tokens = e.Tok.Encode(req.Prompt, tokenizer.EncodeOptions{BOS: e.Opt.AddBOS})
	}
	s.NPrompt = len(s.Tokens)
	switch {
	case s.NPrompt == 0:
		return e.fail(s, errors.New("decode: empty prompt and no BOS token"))
	case s.NPrompt >= e.Opt.Context:
		return e.fail(s, fmt.Errorf("decode: prompt of %d tokens does not fit the context of %d", s.NPrompt, e.Opt.Context))
	}
	// Room for every token the sequence may reach, so the decode loop's
	// append never reallocates.
	room := e.Opt.Context
	if s.maxNew > 0 {
		room = min(room, s.NPrompt+s.maxNew)
	}
	s.Tokens = slices.Grow(s.Tokens, room-s.NPrompt)
	return s
}

func loadedAdapters(m model.Model) []string {
	if ad, ok := m.(model.Adaptable); ok {
		return ad.Adapters()
	}
	return nil
}

func (e *Engine) fail(s *Seq, err error) *Seq {
	s.Err, s.Finish, s.End = err, FinishError, time.Now()
	e.Release(s)
	return s
}

// Plan reserves the KV cache for s's next forward pass and returns its State:
// the next prompt chunk, or the last sampled token.
func (e *Engine) Plan(ctx context.Context, s *Seq) (*model.State, error) {
	if s.kvID < 0 {
		e.mu.Lock()
		if len(e.freeKV) == 0 {
			e.mu.Unlock()
			return nil, errors.New("decode: more sequences in flight than KV sequences (MaxSeqs)")
		}
		s.kvID = e.freeKV[len(e.freeKV)-1]
		e.freeKV = e.freeKV[:len(e.freeKV)-1]
		e.mu.Unlock()
	}
	st := e.getState()
	b := st.Batch
	b.Reset()
	end := min(len(s.Tokens), s.Cached+e.Opt.PrefillChunk)
	for i := s.Cached; i < end; i++ {
		out := i == len(s.Tokens)-1 || (e.Opt.AllLogits && e.Opt.OnLogits != nil)
		b.Add(s.Tokens[i], int32(i), s.kvID, out)
	}
	pass, err := e.KV.Begin(ctx, b)
	if err != nil {
		e.putState(st)
		return nil, err
	}
	st.KV, st.Mask = pass, pass.Mask()
	st.Adapter = s.Req.Adapter
	return st, nil
}

// Forward runs the whole model over st (the graph runs these pieces as stages).
func (e *Engine) Forward(ctx context.Context, st *model.State) error {
	if err := e.Model.Embed(ctx, st, e.Store); err != nil {
		return err
	}
	for _, b := range e.Model.Blocks() {
		if err := b.Forward(ctx, st, e.Store); err != nil {
			return err
		}
	}
	return e.Model.Head(ctx, st, e.Store)
}

// Advance completes a forward pass of s: the new rows become cached history,
// and when the pass reached the end of the sequence the next token is chosen
// and stop conditions are checked. st is recycled.
func (e *Engine) Advance(s *Seq, st *model.State) error {
	defer e.recycle(st)
	if err := st.KV.End(); err != nil {
		return err
	}
	b := st.Batch
	s.Cached += b.Len()
	vocab := e.arch.Vocab
	if e.Opt.OnLogits != nil {
		for j, r := range b.Outputs {
			e.Opt.OnLogits(s, b.Positions[r], st.Logits[j*vocab:(j+1)*vocab])
		}
	}
	if s.Cached < len(s.Tokens) {
		return nil // more prompt to prefill
	}
	if s.FirstToken.IsZero() {
		s.FirstToken = time.Now()
	}
	logits := st.Logits[(len(b.Outputs)-1)*vocab : len(b.Outputs)*vocab]
	t := uint64(len(s.Tokens))
	next, err := s.sampler.Next(logits, s.Tokens, s.Req.Index, t, &s.scratch)
	if err != nil {
		return err
	}
	if !e.Opt.NoStop && (next == e.Tok.EOS() || next == e.Tok.BOS()) {
		// llama2.c stops at BOS too: its vocabularies use BOS to delimit texts.
		e.finish(s, FinishStop)
		return nil
	}
	s.Tokens = append(s.Tokens, next)
	if (s.maxNew > 0 && s.Generated() >= s.maxNew) || len(s.Tokens) >= e.Opt.Context {
		e.finish(s, FinishLength)
	}
	return nil
}

func (e *Engine) finish(s *Seq, reason string) {
	s.Finish, s.End = reason, time.Now()
	e.Release(s)
}

// Fail ends s with err (an error during its forward pass) and frees its cache.
func (e *Engine) Fail(s *Seq, st *model.State, err error) {
	if st != nil {
		st.KV.Abort()
		e.recycle(st)
	}
	e.fail(s, err)
}

func (e *Engine) recycle(st *model.State) {
	st.KV, st.Mask = nil, nil
	e.putState(st)
}

func (e *Engine) getState() *model.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k := len(e.states) - 1; k >= 0 {
		st := e.states[k]
		e.states = e.states[:k]
		return st
	}
	return &model.State{Batch: &input.Batch{}}
}

func (e *Engine) putState(st *model.State) {
	e.mu.Lock()
	e.states = append(e.states, st)
	e.mu.Unlock()
}

// Release frees s's KV-cache sequence (idempotent).
func (e *Engine) Release(s *Seq) {
	if s.kvID < 0 {
		return
	}
	e.KV.Free(s.kvID)
	e.mu.Lock()
	e.freeKV = append(e.freeKV, s.kvID)
	e.mu.Unlock()
	s.kvID = -1
}

// Generate runs one request to completion without the graph.
func (e *Engine) Generate(ctx context.Context, req Request) *Seq {
	s := e.Start(req)
	for !s.Done() {
		if err := ctx.Err(); err != nil {
			return e.fail(s, err)
		}
		st, err := e.Plan(ctx, s)
		if err != nil {
			return e.fail(s, err)
		}
		if err := e.Forward(ctx, st); err != nil {
			e.Fail(s, st, err)
			return s
		}
		if err := e.Advance(s, st); err != nil {
			return e.fail(s, err)
		}
	}
	return s
}

// Text is what llama2.c's run.c prints for s: every token after the first,
// each as the tokenizer's streaming piece after its predecessor (so the space
// after BOS is dropped), skipping single bytes that are neither printable nor
// whitespace. The first token is printed too when it is not BOS.
func Text(tok tokenizer.Tokenizer, tokens []int32) string {
	return textAfter(tok, -1, tokens)
}

// Completion is the generated part of the text only: the pieces after the
// prompt, the first one printed after the prompt's last token.
func Completion(tok tokenizer.Tokenizer, s *Seq) string {
	return textAfter(tok, s.Tokens[s.NPrompt-1], s.Tokens[s.NPrompt:])
}

// textAfter prints tokens as run.c streams them, prev being the token before
// the first (-1: none, and a leading BOS is not printed).
func textAfter(tok tokenizer.Tokenizer, prev int32, tokens []int32) string {
	var sb strings.Builder
	for _, t := range tokens {
		if prev < 0 && t == tok.BOS() {
			prev = t
			continue
		}
		appendSafe(&sb, tok.Piece(prev, t))
		prev = t
	}
	return sb.String()
}

// appendSafe is run.c's safe_printf: a piece that is one raw byte is printed
// only if it is printable ASCII or whitespace.
func appendSafe(sb *strings.Builder, p string) {
	if p == "" {
		return
	}
	if len(p) == 1 {
		c := p[0]
		if !(c >= 0x20 && c < 0x7f) && !(c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') {
			return
		}
	}
	sb.WriteString(p)
}
