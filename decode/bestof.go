package decode

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
)

// BestOf is OpenAI's best_of as a request strategy: a request with
// Req.BestOf = k samples k candidate completions of its prompt and ranks them
// by their cumulative log-probability, best first (Session.Beams; the caller
// returns the n it wants and counts all k in its usage, as OpenAI does).
//
// The prompt is computed once, in the session's own KV sequence; at its last
// row the k candidates draw their first tokens from the same logits and the
// prompt's pages are forked copy-on-write into k−1 sequences lent by the
// scheduler. From then on every live candidate is a row of each step: the
// session's own row is the first live candidate's (the session follows it,
// as it follows beam 0 in beam search), the others are appended to the
// batch. Candidate 0 draws exactly as plain decoding of the request would
// (Session.Sample), so with k = 1 nothing changes; candidate c > 0 draws with
// its own stream of the request's keyed uniforms, so the result depends only
// on (seed, request index), not on the batch. A token's log-probability is
// its log-softmax under the request's processed logits (logit bias, grammar)
// at temperature 1, the model's probability, as OpenAI and vLLM rank by.
type BestOf struct {
	sc   *sched.Scheduler
	kv   *kvcache.Cache
	runs map[*session.Session]*bestOfRun
	sc2  sample.Scratch
	hist []int32 // a candidate's history, reused step to step
}

type bestOfRun struct {
	cands   []candidate
	own     int32 // the KV sequence the session holds (the scheduler frees it)
	stepped bool  // Expand hooked the run onto this step
}

type candidate struct {
	seq  int32
	toks []int32 // generated, with the stop token that ended it
	logp float64
	done bool
	out  int // output row this step
}

// bestOfStream is the first stream of candidate draws (sample.UniformAt),
// far from package spec's streams.
const bestOfStream = 0xB0F << 32

// NewBestOf makes the strategy over the scheduler's KV sequences.
func NewBestOf(sc *sched.Scheduler) *BestOf {
	return &BestOf{sc: sc, kv: sc.Cache, runs: map[*session.Session]*bestOfRun{}}
}

// Owns claims the requests that ask for more than one candidate.
func (b *BestOf) Owns(q *session.Session) bool { return q.Req.BestOf > 1 }

// Close holds nothing: lent sequences go back as runs finish.
func (b *BestOf) Close() error { return nil }

// Expand hooks the runs whose session's rows reach its end onto the step,
// appending a row for every live candidate but the session's own.
func (b *BestOf) Expand(_ context.Context, st *sched.Step, spans []int) error {
	if st.Err != nil {
		return nil
	}
	b.forget()
	batch := st.State.Batch
	for _, i := range spans {
		sp := &st.Spans[i]
		q := sp.S
		if q.Cached+sp.Len != len(q.Tokens) {
			continue // its prompt is not all in yet
		}
		r := b.runs[q]
		if r == nil {
			var err error
			if r, err = b.start(q); err != nil {
				q.Fail(err)
				continue
			}
		}
		pos := int32(len(q.Tokens) - 1)
		own := true
		for c := range r.cands {
			cd := &r.cands[c]
			switch {
			case cd.done:
			case len(cd.toks) == 0 || own:
				// Before the first draw every candidate reads the
				// prompt's last row; after it, the first live one is
				// the session's own row.
				cd.out, own = sp.Out+sp.NOut-1, false
			default:
				cd.out = len(batch.Outputs)
				batch.Add(cd.toks[len(cd.toks)-1], pos, cd.seq, true)
				st.Room--
			}
		}
		r.stepped = true
	}
	return nil
}

func (b *BestOf) start(q *session.Session) (*bestOfRun, error) {
	k := q.Req.BestOf
	r := &bestOfRun{own: q.Seq, cands: make([]candidate, k)}
	ids, ok := b.sc.TakeSeqs(k - 1)
	if !ok {
		return nil, fmt.Errorf("request %s: best_of = %d needs %d KV sequences and only %d are free: raise max_in_flight", q.Req.ID, k, k, b.sc.FreeSeqs()+1)
	}
	r.cands[0].seq = q.Seq
	for c, id := range ids {
		r.cands[c+1].seq = id
	}
	b.runs[q] = r
	return r, nil
}

// Settle draws every live candidate's next token, or settles the span plainly
// while the prompt is still going in.
func (b *BestOf) Settle(_ context.Context, st *sched.Step, i int) error {
	q := st.Spans[i].S
	r := b.runs[q]
	if r == nil || !r.stepped {
		return SettlePlain(st, i)
	}
	r.stepped = false
	if err := b.step(q, r, st); err != nil {
		return fmt.Errorf("request %s: best_of: %w", q.Req.ID, err)
	}
	return nil
}

func (b *BestOf) step(q *session.Session, r *bestOfRun, st *sched.Step) error {
	first := len(r.cands[0].toks) == 0 && !r.cands[0].done
	q.Cached = len(q.Tokens) // the fed rows are history now
	prompt := q.Tokens[:q.NPrompt]
	o := q.Sampler().Options()
	for c := range r.cands {
		cd := &r.cands[c]
		if cd.done {
			continue
		}
		b.hist = append(append(b.hist[:0], prompt...), cd.toks...)
		hist := b.hist
		logits := st.Logits(cd.out)
		var tok int32
		var err error
		if c == 0 {
			tok, err = q.Sample(logits, hist) // plain decoding's draw
		} else {
			var d sample.Dist
			if d, err = q.Dist(logits, hist, &b.sc2); err == nil {
				tok = sample.Draw(d, sample.UniformAt(o.Seed, q.Req.Index, uint64(len(hist)), bestOfStream+uint64(c)))
			}
		}
		if err != nil {
			return err
		}
		processed, err := q.Process(logits, hist)
		if err != nil {
			return err
		}
		cd.logp += float64(processed[tok]) - sample.LogSumExp(processed)
		cd.toks = append(cd.toks, tok)
		// Plain decoding's stop rules, per candidate.
		if q.Stops(tok) || (q.MaxNew() > 0 && len(cd.toks) >= q.MaxNew()) || q.NPrompt+len(cd.toks) > q.Context() {
			cd.done = true
		}
	}
	if first {
		// The prompt's pages serve every candidate, copy-on-write.
		for _, cd := range r.cands[1:] {
			if err := b.kv.Fork(r.cands[0].seq, cd.seq, int32(q.NPrompt)); err != nil {
				return fmt.Errorf("fork of the prompt: %w", err)
			}
		}
	}
	live := -1
	for c := range r.cands {
		if !r.cands[c].done {
			live = c
			break
		}
	}
	if live < 0 {
		hyps := make([]beamsearch.Hypothesis, len(r.cands))
		for c, cd := range r.cands {
			hyps[c] = beamsearch.Hypothesis{Tokens: cd.toks, SumLogP: cd.logp, Score: cd.logp}
		}
		slices.SortStableFunc(hyps, func(a, b beamsearch.Hypothesis) int {
			return -cmpFloat(a.Score, b.Score)
		})
		q.FinishBeams(hyps, q.Stops)
		return nil
	}
	// The session follows the first live candidate: its sequence and tokens.
	cd := &r.cands[live]
	if r.own != cd.seq {
		// The candidate the session held has ended: its pages go.
		b.kv.Free(r.own)
		r.own = cd.seq
	}
	q.Seq = cd.seq
	q.SetGenerated(cd.toks)
	return nil
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// forget returns the lent sequences of finished runs. The one the session
// held, the scheduler releases with the session.
func (b *BestOf) forget() {
	for q, r := range b.runs {
		if !q.Done() {
			continue
		}
		for _, cd := range r.cands {
			if cd.seq != r.own {
				b.sc.GiveSeq(cd.seq)
			}
		}
		delete(b.runs, q)
	}
}
