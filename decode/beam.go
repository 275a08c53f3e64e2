// Beam search (package beamsearch, Hugging Face's generate(num_beams=k)
// semantics) is a request strategy: a request that sets Beam is decoded by
// it. Its live beams are KV-cache sequences: the session's own and up to k−1
// more lent by the scheduler. Each step it adds a row for every live beam
// besides the session's own at the end of the batch; once the pass has ended
// it takes each beam's log-softmax, advances the search, and forks the chosen
// parents' sequences copy-on-write for the new beams (kvcache.Fork), reusing
// the sequences of beams nobody chose.
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

// Beam drives the beam searches of one engine.
type Beam struct {
	sc     *sched.Scheduler
	kv     *kvcache.Cache
	vocab  int
	eos    func(*session.Session) []int32
	search map[*session.Session]*search
}

type search struct {
	b    *beamsearch.Search
	ids  []int32 // KV sequence per live beam; ids[0] is the session's
	free []int32 // lent ids not in use
	outs []int   // output row per live beam this step
	lp   [][]float32
	hist []int32 // a beam's history, for the request's processors
	// stepped is set when Expand hooked the search onto this step (the
	// session's rows reach its end), so Settle advances it.
	stepped bool
}

// NewBeam makes the strategy over the scheduler's KV cache; eos lists a
// session's end-of-sequence ids.
func NewBeam(sc *sched.Scheduler, eos func(*session.Session) []int32) *Beam {
	return &Beam{sc: sc, kv: sc.Cache, eos: eos, search: map[*session.Session]*search{}}
}

// Owns claims the requests that ask for beam search.
func (r *Beam) Owns(q *session.Session) bool { return q.Req.Beam != nil }

// Close holds nothing: lent sequences go back as searches finish.
func (r *Beam) Close() error { return nil }

// Expand adds the rows of every live beam but the first to st's batch for
// the beam sessions whose rows reach their end.
func (r *Beam) Expand(ctx context.Context, st *sched.Step, spans []int) error {
	if st.Err != nil {
		return nil
	}
	r.forget()
	r.vocab = st.Vocab
	b := st.State.Batch
	for _, i := range spans {
		sp := &st.Spans[i]
		q := sp.S
		if q.Cached+sp.Len != len(q.Tokens) {
			continue // its prompt is not all in yet
		}
		s := r.search[q]
		if s == nil {
			var err error
			if s, err = r.start(q); err != nil {
				q.Fail(err)
				continue
			}
		}
		// Beam 0 is the session's own row (its last output row); the other
		// live beams get theirs at the end of the batch.
		s.outs = append(s.outs[:0], sp.Out+sp.NOut-1)
		pos := int32(len(q.Tokens) - 1)
		for j := 1; j < len(s.ids); j++ {
			toks := s.b.Tokens(j)
			s.outs = append(s.outs, len(b.Outputs))
			b.Add(toks[len(toks)-1], pos, s.ids[j], true)
		}
		st.Room -= len(s.outs) - 1
		s.stepped = true
	}
	return nil
}

// Settle advances span i's search by the pass's logits, or settles the span
// plainly when its prompt is still going in.
func (r *Beam) Settle(_ context.Context, st *sched.Step, i int) error {
	q := st.Spans[i].S
	s := r.search[q]
	if s == nil || !s.stepped {
		return SettlePlain(st, i)
	}
	s.stepped = false
	if err := r.step(q, s, st.Logits); err != nil {
		return fmt.Errorf("request %s: %w", q.Req.ID, err)
	}
	return nil
}

func (r *Beam) start(q *session.Session) (*search, error) {
	o := *q.Req.Beam
	o.Vocab = r.vocab
	if o.MaxNewTokens == 0 {
		o.MaxNewTokens = q.MaxNew()
	}
	if o.MaxNewTokens == 0 || q.NPrompt+o.MaxNewTokens > q.Context() {
		o.MaxNewTokens = q.Context() - q.NPrompt
	}
	if o.EOS == nil {
		o.EOS = r.eos(q)
	}
	b, err := beamsearch.New(o)
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", q.Req.ID, err)
	}
	free, ok := r.sc.TakeSeqs(o.NumBeams - 1)
	if !ok {
		return nil, fmt.Errorf("request %s: num_beams = %d needs %d KV sequences and only %d are free: raise max_in_flight", q.Req.ID, o.NumBeams, o.NumBeams, r.sc.FreeSeqs()+1)
	}
	s := &search{b: b, ids: []int32{q.Seq}, free: free}
	r.search[q] = s
	return s, nil
}

// step advances q's search with this pass's logits and arranges the KV
// sequences of the new beams.
func (r *Beam) step(q *session.Session, s *search, logits func(int) []float32) error {
	q.Cached = len(q.Tokens) // the fed rows are history now
	for len(s.lp) < len(s.outs) {
		s.lp = append(s.lp, make([]float32, r.vocab))
	}
	for j, out := range s.outs {
		sample.LogSoftmax(s.lp[j], logits(out)) // as HF takes log_softmax of the logits
		if q.Processes() {
			// As Hugging Face's beam search applies its logits processors:
			// to each beam's log-softmax scores, at the beam's own history.
			s.hist = append(append(s.hist[:0], q.Tokens[:q.NPrompt]...), s.b.Tokens(j)...)
			lp, err := q.Process(s.lp[j], s.hist)
			if err != nil {
				return err
			}
			copy(s.lp[j], lp)
		}
	}
	// The new beams' tokens are the last of s.b.Tokens(j); parents say whose
	// KV each extends.
	parents, _, done, err := s.b.Step(s.lp[:len(s.outs)])
	if err != nil {
		return err
	}
	if done {
		isEOS := func(t int32) bool { return slices.Contains(r.eos(q), t) }
		q.FinishBeams(s.b.Results(), isEOS)
		return nil
	}
	// New beam j extends old beam parents[j]: the first child of a parent
	// takes its sequence, the others fork it into sequences of old beams
	// nobody chose (or lent spares).
	n := int32(len(q.Tokens))
	claimed := make([]bool, len(s.ids))
	chosen := make([]bool, len(s.ids))
	for _, p := range parents {
		chosen[p] = true
	}
	for p, id := range s.ids {
		if !chosen[p] {
			s.free = append(s.free, id)
		}
	}
	ids := make([]int32, len(parents))
	var forks [][2]int32
	for j, p := range parents {
		if !claimed[p] {
			claimed[p], ids[j] = true, s.ids[p]
			continue
		}
		dst := s.free[len(s.free)-1]
		s.free = s.free[:len(s.free)-1]
		ids[j] = dst
		forks = append(forks, [2]int32{s.ids[p], dst})
	}
	for _, f := range forks {
		if err := r.kv.Fork(f[0], f[1], n); err != nil {
			return fmt.Errorf("beam fork: %w", err)
		}
	}
	for _, id := range s.free {
		r.kv.Free(id)
	}
	s.ids = ids
	// The session follows beam 0: its sequence and its tokens.
	q.Seq = ids[0]
	q.SetGenerated(s.b.Tokens(0))
	return nil
}

// forget returns the lent sequences of finished searches. ids[0] is the
// session's own, which the scheduler releases with the session.
func (r *Beam) forget() {
	for q, s := range r.search {
		if !q.Done() {
			continue
		}
		for _, id := range append(s.free, s.ids[1:]...) {
			r.sc.GiveSeq(id)
		}
		delete(r.search, q)
	}
}
