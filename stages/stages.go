// Package stages adapts the domain packages to graph stages. Each stage is a
// few lines: the logic lives in decode (planning, sampling, stopping) and model
// (the math). Ownership of a Step passes downstream with emit.
package stages

import (
	"context"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/model"
)

// Step is one forward pass of one sequence moving through the model stages.
// State is nil when the sequence failed before or during the pass: later
// stages pass such steps along untouched so the failure reaches the output.
type Step struct {
	Seq   *decode.Seq
	State *model.State
}

// Tokenize turns requests into sequences.
type Tokenize struct{ E *decode.Engine }

func (s *Tokenize) Process(ctx context.Context, r decode.Request, emit graph.Emit[*decode.Seq]) error {
	return emit(ctx, s.E.Start(r))
}

// Schedule plans the next forward pass of a sequence (a prefill chunk or one
// decode token) and reserves its KV cache.
type Schedule struct{ E *decode.Engine }

func (s *Schedule) Process(ctx context.Context, q *decode.Seq, emit graph.Emit[Step]) error {
	if q.Done() {
		return emit(ctx, Step{Seq: q})
	}
	st, err := s.E.Plan(ctx, q)
	if err != nil {
		s.E.Fail(q, nil, err)
		return emit(ctx, Step{Seq: q})
	}
	return emit(ctx, Step{Seq: q, State: st})
}

// forward runs fn on live steps and turns a failure into a failed sequence, so
// one bad request never stops the others.
func forward(ctx context.Context, e *decode.Engine, in Step, emit graph.Emit[Step], fn func(*model.State) error) error {
	if in.State != nil {
		if err := fn(in.State); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			e.Fail(in.Seq, in.State, err)
			in.State = nil
		}
	}
	return emit(ctx, in)
}

// Embed looks up token embeddings.
type Embed struct{ E *decode.Engine }

func (s *Embed) Process(ctx context.Context, in Step, emit graph.Emit[Step]) error {
	return forward(ctx, s.E, in, emit, func(st *model.State) error { return s.E.Model.Embed(ctx, st, s.E.Store) })
}

// Layers runs a run of consecutive transformer blocks (one, by default).
// Before each pass it hints the store about the weights of the block Ahead
// (k layers down), so a tier that loads from disk overlaps that read with
// this stage's compute.
type Layers struct {
	E      *decode.Engine
	Blocks []model.Block
	Ahead  model.Block // nil: no prefetch
}

func (s *Layers) Process(ctx context.Context, in Step, emit graph.Emit[Step]) error {
	if in.State != nil && s.Ahead != nil {
		s.E.Store.Prefetch(s.Ahead.Weights()...)
	}
	return forward(ctx, s.E, in, emit, func(st *model.State) error {
		for _, b := range s.Blocks {
			if err := b.Forward(ctx, st, s.E.Store); err != nil {
				return err
			}
		}
		return nil
	})
}

// Head computes logits for the output rows.
type Head struct{ E *decode.Engine }

func (s *Head) Process(ctx context.Context, in Step, emit graph.Emit[Step]) error {
	return forward(ctx, s.E, in, emit, func(st *model.State) error { return s.E.Model.Head(ctx, st, s.E.Store) })
}

// Sample ends the pass: it commits the KV rows, picks the next token, checks
// stop conditions, and sends the sequence back to the scheduler (or out).
type Sample struct{ E *decode.Engine }

func (s *Sample) Process(ctx context.Context, in Step, emit graph.Emit[*decode.Seq]) error {
	if in.State != nil {
		if err := s.E.Advance(in.Seq, in.State); err != nil {
			s.E.Fail(in.Seq, nil, err)
		}
	}
	return emit(ctx, in.Seq)
}

// Result is a finished sequence as text.
type Result struct {
	Seq        *decode.Seq
	Text       string // llama2.c-style: prompt and completion
	Completion string
}

// Detokenize renders finished sequences.
type Detokenize struct{ E *decode.Engine }

func (s *Detokenize) Process(ctx context.Context, q *decode.Seq, emit graph.Emit[Result]) error {
	r := Result{Seq: q}
	if q.Err == nil {
		r.Text = decode.Text(s.E.Tok, q.Tokens)
		r.Completion = decode.Completion(s.E.Tok, q)
	}
	return emit(ctx, r)
}

var (
	_ graph.Stage[decode.Request, *decode.Seq] = (*Tokenize)(nil)
	_ graph.Stage[*decode.Seq, Step]           = (*Schedule)(nil)
	_ graph.Stage[Step, Step]                  = (*Layers)(nil)
	_ graph.Stage[Step, *decode.Seq]           = (*Sample)(nil)
	_ graph.Stage[*decode.Seq, Result]         = (*Detokenize)(nil)
)
