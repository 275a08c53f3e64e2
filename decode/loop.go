// Package decode is the engine's decode step in one place: what one forward
// pass of the continuous batch does, top to bottom, and the decoding
// strategies that differ in it.
//
// One step, as Loop.Step runs it (and the engine's stages run it: Before in
// the scheduler stage, the forward pass in embed, transformer_layers and
// head, After in the sample stage):
//
//	plan     the scheduler admits queued sessions, retires finished ones and
//	         picks each active session's rows (a decode row, prompt chunks)
//	expand   each session's strategy adds its rows: draft-tree nodes,
//	         the rows of its other beams or candidates
//	reserve  every row of the batch gets its KV-cache slot
//	forward  embed → blocks → head: logits for the output rows
//	settle   the pass ends (its rows become history) and each strategy turns
//	         its sessions' logits into tokens: a draw, an accepted draft path,
//	         the next beams; the session streams them and applies its stop
//	         rules
//
// A Strategy owns what differs between decoding modes: plain sampling,
// speculative decoding (SpecExec trees, chains, prompt lookup: one engine-wide
// strategy chosen by the pipeline's draft_tree stage), beam search and
// best-of-n (request strategies: a request asks for them). Each lives in its
// own file; the loop, the scheduler and the stages know none of them.
package decode

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
)

// Strategy is one way of decoding. A strategy sees only the spans of the
// sessions it owns, and runs on the goroutine of the one step in flight:
// its methods never overlap.
type Strategy interface {
	// Owns reports whether the strategy decodes q. The loop asks the
	// request strategies, in order, when q first appears in a step; the
	// engine strategy takes every session none of them owns.
	Owns(q *session.Session) bool
	// Expand runs after the plan and before the KV reservation, with the
	// indices into st.Spans of the strategy's sessions. It may add rows
	// for them within st.Room: the engine strategy (which runs first) by
	// rebuilding the batch with each span's rows kept contiguous, a request
	// strategy by appending rows at the batch's end.
	Expand(ctx context.Context, st *sched.Step, spans []int) error
	// Settle runs once the pass has ended, for each of the strategy's spans
	// in batch order (i indexes st.Spans): it advances the session by the
	// span's logits (st.Logits). An error fails that session alone.
	Settle(ctx context.Context, st *sched.Step, i int) error
	// Close releases what the strategy holds (a draft model's KV cache).
	Close() error
}

// Needs is what a strategy asks of the engine before the engine sizes its
// scheduler and KV cache: a pipeline kind declares it from its params.
type Needs struct {
	// Rows is the most rows the strategy adds to a step for one generating
	// session besides the session's own row (draft nodes). The scheduler
	// keeps that many KV slots of headroom per sequence, and a step's
	// max_batch_tokens must hold one such draft.
	Rows int
	// Reach is how many positions past a sequence's last token the
	// strategy may use in one step, counting the draft cache's nodes of a
	// pass beyond the draft's budget: a draft that would reach past the
	// context decodes plainly, so a benchmark leaves this much room.
	Reach int
	// DraftKV, when set, is the KV cache a second (draft) model keeps for
	// the scheduler's options, so that the engine can give it a share of
	// kv_budget.
	DraftKV func(draft model.Arch, so sched.Options) kvcache.Options
}

// Loop runs decode steps: the scheduler's plan and pass, and the strategies
// between them.
type Loop struct {
	sched *sched.Scheduler
	model model.Model
	store offload.Store
	ahead int // prefetch hint distance for Step's forward pass

	engine   Strategy   // decodes every session no request strategy owns
	requests []Strategy // own the sessions that ask for them
	all      []Strategy // engine, then requests: the order Expand runs in
	owner    map[*session.Session]Strategy
	mine     map[Strategy][]int // this step's span indices per strategy
}

// Options configure a Loop.
type Options struct {
	Model model.Model
	Store offload.Store
	// Ahead is how many blocks ahead Step hints the store (prefetch_ahead).
	Ahead int
}

// NewLoop makes a loop over sc whose engine strategy is Plain until SetEngine
// replaces it, with the built-in request strategies (beam search, best-of-n).
func NewLoop(sc *sched.Scheduler, o Options) *Loop {
	l := &Loop{
		sched: sc, model: o.Model, store: o.Store, ahead: o.Ahead,
		engine: Plain{},
		owner:  map[*session.Session]Strategy{},
		mine:   map[Strategy][]int{},
	}
	l.requests = builtinRequests(sc)
	l.all = append([]Strategy{l.engine}, l.requests...)
	return l
}

// SetEngine makes s the engine strategy (the pipeline's speculative
// decoding); it must be called before the first step.
func (l *Loop) SetEngine(s Strategy) { l.engine, l.all[0] = s, s }

// Engine is the engine strategy.
func (l *Loop) Engine() Strategy { return l.engine }

// Step runs one whole step on the caller's goroutine: plan, expand,
// reserve, forward, settle. The engine's graph runs the same phases as
// stages; Step is the loop without the graph.
func (l *Loop) Step(ctx context.Context, st *sched.Step) error {
	if err := l.Before(ctx, st); err != nil || st.Done {
		return err
	}
	if st.Err == nil {
		if err := offload.Guard(l.store, func() error { return model.Forward(ctx, l.model, st.State, l.store, l.ahead) }); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.Err = err
		}
	}
	return l.After(ctx, st)
}

// Before is the step up to the forward pass: plan, expand, reserve. It waits
// while there is nothing to run, and sets st.Done when the scheduler has
// closed with no session left. It returns an error only when ctx ends; a
// failure of the step's work is st.Err, which fails the step's sessions
// at After.
func (l *Loop) Before(ctx context.Context, st *sched.Step) error {
	// plan: admit, retire, pick each active session's rows.
	if err := l.sched.Plan(ctx, st); err != nil || st.Done {
		return err
	}
	l.assign(st)
	// expand: the engine strategy first (it may rebuild the batch), then
	// the request strategies (they append).
	for _, s := range l.all {
		if err := s.Expand(ctx, st, l.mine[s]); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.Err = err
			break
		}
	}
	// reserve: every row gets its KV slot.
	return l.sched.Reserve(ctx, st)
}

// After is the step past the forward pass: the pass ends and each span is
// settled by its session's strategy.
func (l *Loop) After(ctx context.Context, st *sched.Step) error {
	if !l.sched.EndPass(st) {
		return nil
	}
	for i := range st.Spans {
		q := st.Spans[i].S
		if err := l.ownerOf(q).Settle(ctx, st, i); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			q.Fail(err)
		}
	}
	return nil
}

// Close closes every strategy.
func (l *Loop) Close() error {
	var errs []error
	for _, s := range l.all {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// assign finds each span's strategy, forgetting sessions that have ended, and
// lists the spans per strategy.
func (l *Loop) assign(st *sched.Step) {
	for q := range l.owner {
		if q.Done() {
			delete(l.owner, q)
		}
	}
	for s, idx := range l.mine {
		l.mine[s] = idx[:0]
	}
	for i := range st.Spans {
		s := l.ownerOf(st.Spans[i].S)
		l.mine[s] = append(l.mine[s], i)
	}
}

func (l *Loop) ownerOf(q *session.Session) Strategy {
	if s, ok := l.owner[q]; ok {
		return s
	}
	s := l.engine
	for _, r := range l.requests {
		if r.Owns(q) {
			s = r
			break
		}
	}
	l.owner[q] = s
	return s
}

// SpecStats is what the engine strategy's speculative decoding did (zero
// when the engine decodes plainly).
func (l *Loop) SpecStats() SpecStats {
	if s, ok := l.engine.(interface{ Stats() SpecStats }); ok {
		return s.Stats()
	}
	return SpecStats{}
}
