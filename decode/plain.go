package decode

import (
	"context"

	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
)

// Plain is decoding one token per step: each output row's logits go to the
// session, which at its last position samples (or takes the argmax) and
// applies its stop rules. It is the engine strategy unless the pipeline
// speculates, and what every strategy falls back on for a span it adds
// nothing to (a prompt chunk, a step without room for a draft).
type Plain struct{}

// Owns is never asked: Plain is only ever the engine strategy.
func (Plain) Owns(*session.Session) bool { return false }

// Expand adds nothing.
func (Plain) Expand(context.Context, *sched.Step, []int) error { return nil }

// Settle hands the span's logits to its session.
func (Plain) Settle(_ context.Context, st *sched.Step, i int) error { return SettlePlain(st, i) }

// Close holds nothing.
func (Plain) Close() error { return nil }

// SettlePlain settles span i as plain decoding: its rows are history and its
// session sees the logits of each of its output rows in position order
// (sampling at the last one).
func SettlePlain(st *sched.Step, i int) error {
	sp := &st.Spans[i]
	q := sp.S
	q.Cached += sp.Len
	b := st.State.Batch
	for j := sp.Out; j >= 0 && j < sp.Out+sp.NOut; j++ {
		if err := q.Logits(b.Positions[b.Outputs[j]], st.Logits(j)); err != nil {
			return err
		}
	}
	return nil
}
