// Package stages adapts the domain packages to graph stages. Each stage is a
// few lines: the logic lives in decode (the step and its strategies),
// session (sampling, stopping), sched (batching) and model (the math). A
// *sched.Step is one forward pass of one batch; it circulates in the decode
// loop, and ownership passes downstream with emit.
package stages

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer"
)

// Env is what the stages of one engine share.
type Env struct {
	Model   model.Model
	Store   offload.Store
	Tok     tokenizer.Tokenizer
	Sched   *sched.Scheduler
	Session session.Options
	// Loop is the decode step: the scheduler stage runs its first half
	// (plan, expand, reserve), the sample stage its second (settle).
	Loop *decode.Loop
	// Draft is the draft model of speculative decoding (nil: none), for the
	// draft_tree stage's strategy; DraftKVBudget is its share of kv_budget
	// (0: none).
	Draft         *model.Loaded
	DraftKVBudget int64
}

// Tokenize turns requests into sessions.
type Tokenize struct {
	E      *Env
	AddBOS bool
}

func (s *Tokenize) Process(ctx context.Context, r session.Request, emit graph.Emit[*session.Session]) error {
	o := s.E.Session
	o.AddBOS = s.AddBOS
	q := session.New(r, s.E.Tok, o)
	if err := model.CheckAdapter(s.E.Model, r.Adapter); err != nil {
		q.Fail(fmt.Errorf("request %s: %w", r.ID, err))
	}
	return emit(ctx, q)
}

// Admit hands sessions to the scheduler and, with the first one, puts the
// one Step into the decode loop. When its input ends it closes admission, so
// the loop drains and ends.
type Admit struct {
	E       *Env
	started bool
}

func (s *Admit) Process(ctx context.Context, q *session.Session, emit graph.Emit[*sched.Step]) error {
	if err := s.E.Sched.Admit(ctx, q); err != nil {
		return err
	}
	if !s.started {
		s.started = true
		return emit(ctx, sched.NewStep())
	}
	return nil
}

// Flush closes admission; with no request at all it still starts the loop,
// so the scheduler sees the end and closes its retired side.
func (s *Admit) Flush(ctx context.Context, emit graph.Emit[*sched.Step]) error {
	s.E.Sched.Close()
	if !s.started {
		s.started = true
		return emit(ctx, sched.NewStep())
	}
	return nil
}

func (s *Admit) Close() error { s.E.Sched.Close(); return nil }

// Schedule runs the step up to the forward pass (decode.Loop.Before): the
// plan, each strategy's rows, the KV reservation.
type Schedule struct{ E *Env }

func (s *Schedule) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	if err := s.E.Loop.Before(ctx, st); err != nil {
		return err
	}
	return emit(ctx, st)
}

// forward runs fn unless an earlier stage failed the step. A failure marks
// the step, so its sessions fail at Sample and the engine goes on. A memory
// fault reading mapped weights (a model file truncated under the mmap tier)
// is such a failure too, naming file, tensor and offset (offload.Guard).
func forward(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step], store offload.Store, fn func(*model.State) error) error {
	if st.Err == nil {
		if err := offload.Guard(store, func() error { return fn(st.State) }); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.Err = err
		}
	}
	return emit(ctx, st)
}

// Embed looks up token embeddings.
type Embed struct{ E *Env }

func (s *Embed) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	if st.State.Pass == nil && st.Err == nil {
		return fmt.Errorf("embed: the step has no KV reservation: the scheduler stage must come before it")
	}
	return forward(ctx, st, emit, s.E.Store, func(ms *model.State) error { return s.E.Model.Embed(ctx, ms, s.E.Store) })
}

// Blocks runs a run of consecutive transformer blocks. Before each block
// it hints the store about the weights of the block Ahead blocks further
// down the model (All), wrapping around into the next pass, so a tier that
// loads from disk reads them while this block computes, and layer 0 of the
// next pass loads while the last layer computes.
type Blocks struct {
	E      *Env
	Blocks []model.Block
	All    []model.Block // every block of the model, for the hint; nil: Blocks
	Ahead  int           // 0: no prefetch
}

func (s *Blocks) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	all := s.All
	if all == nil {
		all = s.Blocks
	}
	return forward(ctx, st, emit, s.E.Store, func(ms *model.State) error {
		return model.RunBlocks(ctx, s.Blocks, all, s.Ahead, ms, s.E.Store)
	})
}

// Head computes logits for the output rows.
type Head struct{ E *Env }

func (s *Head) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	return forward(ctx, st, emit, s.E.Store, func(ms *model.State) error { return s.E.Model.Head(ctx, ms, s.E.Store) })
}

// Settle runs the step past the forward pass (decode.Loop.After): the KV
// rows become history and each session's strategy turns its logits into
// tokens (plain decoding samples here); the step goes back to the scheduler.
type Settle struct{ E *Env }

func (s *Settle) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	if err := s.E.Loop.After(ctx, st); err != nil {
		return err
	}
	return emit(ctx, st)
}

// Retired is the source of finished sessions, in the order they finished.
func Retired(e *Env) func(ctx context.Context, emit graph.Emit[*session.Session]) error {
	return func(ctx context.Context, emit graph.Emit[*session.Session]) error {
		for {
			select {
			case q, ok := <-e.Sched.Retired():
				if !ok {
					return nil
				}
				if err := emit(ctx, q); err != nil {
					return err
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// Result is a finished session as text.
type Result struct {
	Session    *session.Session
	Text       string // llama2.c-style: prompt and completion
	Completion string
}

// Detokenize renders finished sessions.
type Detokenize struct{ E *Env }

func (s *Detokenize) Process(ctx context.Context, q *session.Session, emit graph.Emit[Result]) error {
	r := Result{Session: q}
	if q.Err == nil || q.Generated() > 0 {
		r.Text = session.Text(s.E.Tok, q.Tokens)
		r.Completion = q.Completion()
	}
	return emit(ctx, r)
}

var (
	_ graph.Stage[session.Request, *session.Session] = (*Tokenize)(nil)
	_ graph.Stage[*session.Session, *sched.Step]     = (*Admit)(nil)
	_ graph.Stage[*sched.Step, *sched.Step]          = (*Blocks)(nil)
	_ graph.Stage[*session.Session, Result]          = (*Detokenize)(nil)
)
