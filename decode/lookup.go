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

// grow proposes each session's chain: its n-gram match, cut at the first
// token the grammar refuses and followed by the tokens it forces there; a
// session with neither decodes plainly this step (its span gets no rows).
func (lookupMode) grow(_ context.Context, d *Speculative, st *sched.Step, idx []int) error {
	for _, i := range idx {
		q := st.Spans[i].S
		s := d.state(q)
		s.chain, _ = spec.PromptLookup(s.chain[:0], q.Tokens, d.o.Lookup)
		s.chainForced = s.chainForced[:0]
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
			// Then the tokens the grammar forces after it (jump-forward):
			// proposals the target takes for certain once it gets there.
			for range s.chain {
				s.chainForced = append(s.chainForced, false)
			}
			for len(s.chain) < d.o.DraftMax {
				f, ok := q.Forced(hist)
				if !ok || q.Stops(f) {
					break
				}
				s.chain, s.chainForced, hist = append(s.chain, f), append(s.chainForced, true), append(hist, f)
				d.mu.Lock()
				d.stats.ForcedNodes++
				d.mu.Unlock()
			}
		}
		s.q = s.q[:0]
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
