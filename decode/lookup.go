package decode

import (
	"context"
	"slices"

	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/spec"
)

// lookupMode is prompt-lookup decoding: up to γ tokens proposed from an
// n-gram match over the session's prompt and output (spec.PromptLookup), no
// draft model, verified as a chain whose proposals have probability 1.
type lookupMode struct{}

// grow proposes each session's chain; a session with no match decodes
// plainly this step (its span gets no rows).
func (lookupMode) grow(_ context.Context, d *Speculative, st *sched.Step, idx []int) error {
	for _, i := range idx {
		q := st.Spans[i].S
		s := d.state(q)
		s.chain, _ = spec.PromptLookup(s.chain[:0], q.Tokens, d.o.Lookup)
		if q.Processes() {
			// Cut at the first token the request's constraints refuse: the
			// target would reject it, and its rows would be processed at a
			// history outside the grammar.
			hist := slices.Clone(q.Tokens)
			for k, x := range s.chain {
				ok, err := q.Allows(hist, x)
				if err != nil {
					return err
				}
				if !ok {
					s.chain = s.chain[:k]
					break
				}
				hist = append(hist, x)
			}
		}
		s.q, s.chainForced = s.q[:0], s.chainForced[:0]
		for _, x := range s.chain {
			s.q = append(s.q, sample.Dist{IDs: []int32{x}, Probs: []float32{1}})
		}
	}
	return nil
}

func (lookupMode) rows(nb *input.Batch, s *seqState, q *session.Session, _ int32) int {
	return chainRows(nb, s, q)
}

func (lookupMode) verify(d *Speculative, sp *sched.Span, s *seqState, logits func(int32) []float32) (keep, accept []int32, err error) {
	return verifyChain(d, sp, s, logits)
}
