package decode

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/spec"
)

// chainMode is classic speculative decoding: γ tokens drafted one draft pass
// each, verified by min(1, p/q) with the residual drawn on rejection
// (spec.VerifyChain): exact in distribution, and byte-identical to plain
// decoding under greedy.
type chainMode struct{}

// grow drafts γ tokens per session, one draft pass per token, each drawn
// from the draft's processed distribution with the draft stream. A token the
// request's grammar forces (session.Forced) joins the chain with
// probability 1 and no pass of its own (jump-forward): the pass for the next
// drawn token feeds the forced ones before it, without logits.
func (chainMode) grow(ctx context.Context, d *Speculative, st *sched.Step, idx []int) error {
	b := &input.Batch{}
	d.catchUp(b, st, idx)
	hist := make([][]int32, len(idx))
	for j, i := range idx {
		q := st.Spans[i].S
		s := d.seqs[q]
		s.chain, s.q, s.chainFed, s.chainForced = s.chain[:0], s.q[:0], 0, s.chainForced[:0]
		hist[j] = slices.Clone(q.Tokens)
	}
	// out[j] is the output row of session j in the pass just run, -1 when
	// it had none (its chain is complete).
	out := make([]int, len(idx))
	for j := range out {
		out[j] = j // catchUp gave every session one output row, in order
	}
	for first := true; ; first = false {
		if !first {
			b.Reset()
			for j, i := range idx {
				q := st.Spans[i].S
				s := d.seqs[q]
				out[j] = -1
				if len(s.chain) == d.o.DraftMax {
					continue
				}
				// Feed what the draft has not seen of the chain, the last
				// token with logits.
				for k := s.chainFed; k < len(s.chain); k++ {
					b.Add(s.chain[k], s.fed, q.Seq, k == len(s.chain)-1)
					s.fed++
				}
				s.chainFed = len(s.chain)
				out[j] = len(b.Outputs) - 1
			}
			if b.Len() == 0 {
				return nil
			}
		}
		if err := d.forward(ctx, b, nil); err != nil {
			return err
		}
		for j, i := range idx {
			if out[j] < 0 {
				continue
			}
			q := st.Spans[i].S
			s := d.seqs[q]
			dist, err := q.Dist(d.draftLogits(out[j]), hist[j], &d.sc)
			if err != nil {
				return err
			}
			dist = sample.Dist{IDs: slices.Clone(dist.IDs), Probs: slices.Clone(dist.Probs)}
			o := q.Sampler().Options()
			u := spec.KeyedUniforms(o.Seed, q.Req.Index, uint64(len(q.Tokens)))
			x := spec.Draw(dist, u(len(s.chain), spec.StreamDraft))
			s.q, s.chain, hist[j] = append(s.q, dist), append(s.chain, x), append(hist[j], x)
			s.chainForced = append(s.chainForced, false)
			for len(s.chain) < d.o.DraftMax {
				f, ok := q.Forced(hist[j])
				if !ok || q.Stops(f) {
					break
				}
				s.q = append(s.q, sample.Dist{IDs: []int32{f}, Probs: []float32{1}})
				s.chain, hist[j] = append(s.chain, f), append(hist[j], f)
				s.chainForced = append(s.chainForced, true)
				d.mu.Lock()
				d.stats.ForcedNodes++
				d.mu.Unlock()
			}
		}
	}
}

func (chainMode) rows(nb *input.Batch, s *seqState, q *session.Session, _ int32) int {
	return chainRows(nb, s, q)
}

func (chainMode) verify(d *Speculative, sp *sched.Span, s *seqState, logits func(int32) []float32) (keep, accept []int32, err error) {
	return verifyChain(d, sp, s, logits)
}

// chainRows puts a chain's tokens after the root, each the next position.
func chainRows(nb *input.Batch, s *seqState, q *session.Session) int {
	root := int32(q.Cached)
	for k, x := range s.chain {
		nb.AddChild(x, root+1+int32(k), q.Seq, -1, -1, true)
	}
	return len(s.chain)
}

// verifyChain accepts a chain's longest verified prefix and the target's
// next token (chain and lookup drafts).
func verifyChain(d *Speculative, sp *sched.Span, s *seqState, logits func(int32) []float32) (keep, accept []int32, err error) {
	q := sp.S
	hist := slices.Clone(q.Tokens)
	p := make([]sample.Dist, 0, len(s.chain)+1)
	for k := 0; k <= len(s.chain); k++ {
		dist, err := q.Dist(logits(int32(sp.Start+k)), hist, &d.sc)
		if err != nil {
			return nil, nil, err
		}
		p = append(p, sample.Dist{IDs: slices.Clone(dist.IDs), Probs: slices.Clone(dist.Probs)})
		if k < len(s.chain) {
			hist = append(hist, s.chain[k])
		}
	}
	o := q.Sampler().Options()
	var acc int
	var next int32
	if o.Temperature == 0 {
		// Greedy: the target's own choice at each prefix (with its repetition
		// penalty), exactly plain decoding's; accept while the draft agrees.
		hist = hist[:len(q.Tokens)]
		for acc = 0; ; acc++ {
			if next, err = q.Sample(logits(int32(sp.Start+acc)), hist); err != nil {
				return nil, nil, err
			}
			if acc == len(s.chain) || next != s.chain[acc] {
				break
			}
			hist = append(hist, next)
		}
	} else {
		u := spec.KeyedUniforms(o.Seed, q.Req.Index, uint64(len(q.Tokens)))
		if acc, next, err = spec.VerifyChain(p, s.q, s.chain, u, nil); err != nil {
			return nil, nil, err
		}
	}
	keep = append(keep, int32(sp.Start))
	for k := range acc {
		keep = append(keep, int32(sp.Start+1+k))
	}
	accept = append(append(accept, s.chain[:acc]...), next)
	emitted := q.Keeps(accept) // counted before the session takes them
	if d.kv != nil {
		// The draft was fed the root and the proposals before the last
		// drawn one (chainFed of them).
		fedDraft := min(acc, s.chainFed)
		if err := d.kv.Truncate(q.Seq, int32(q.Cached)+1+int32(fedDraft)); err != nil {
			return nil, nil, fmt.Errorf("draft cache: %w", err)
		}
		s.fed = int32(q.Cached) + 1 + int32(fedDraft)
	}
	if acc < len(s.chainForced) && s.chainForced[acc] {
		d.mu.Lock()
		d.stats.ForcedMissed++
		d.mu.Unlock()
	}
	d.count(emitted, acc)
	return keep, accept, nil
}
