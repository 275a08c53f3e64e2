package decode

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
)

// treeMode is SpecExec: each step grows a draft tree per session by
// budgeted best-first search over several batched draft passes (each node
// fed with ParentSlot to its parent's draft slot), puts every node into the
// target batch, and verifies the tree with the session's own sampler, so
// the text is plain decoding's whatever the draft (spec.Tree).
type treeMode struct{}

// softmax is the draft's plain distribution over the children of a node
// (temperature 1, or the request's when it samples), which the tree search
// ranks by.
func softmax(logits []float32, temp float32, dst []float32) sample.Dist {
	if temp <= 0 {
		temp = 1
	}
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64((v - mx) / temp))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
	return sample.Dist{Probs: dst}
}

func (treeMode) grow(ctx context.Context, d *Speculative, st *sched.Step, idx []int) error {
	b := &input.Batch{}
	d.catchUp(b, st, idx)
	var slots []int32
	if err := d.forward(ctx, b, &slots); err != nil {
		return err
	}
	vocab := d.vocab
	probs := make([]float32, len(idx)*vocab)
	var dists []sample.Dist
	var hist []int32
	budget := d.treeBudget(len(idx))
	for k, i := range idx {
		q := st.Spans[i].S
		s := d.state(q)
		s.tree.Reset(q.Tokens[q.Cached])
		if err := s.tree.SetBudget(budget); err != nil {
			return err
		}
		s.budget = budget
		s.slot = append(s.slot[:0], int32(q.Cached)) // the root
		s.fedNodes = 0
		s.open = false
		if ids, err := s.tree.Expand(); err != nil || len(ids) != 1 || ids[0] != 0 {
			return fmt.Errorf("request %s: tree expansion of the root gave %v, %v", q.Req.ID, ids, err)
		}
		logits, err := q.Process(d.draftLogits(k), q.Tokens)
		if err != nil {
			return err
		}
		dist := softmax(logits, q.Sampler().Options().Temperature, probs[k*vocab:(k+1)*vocab])
		if err := s.tree.Add([]sample.Dist{dist}); err != nil {
			return err
		}
		if err := d.force(s, q, 1, &hist); err != nil {
			return err
		}
	}
	type exp struct {
		s   *seqState
		q   *session.Session
		ids []int32 // the expanded nodes, one output row each
		fed []int32 // every node this pass feeds, in row order
		row int     // the batch row of fed[0]
	}
	var round []exp
	for {
		b.Reset()
		round = round[:0]
		for _, i := range idx {
			q := st.Spans[i].S
			s := d.seqs[q]
			// Stop growing before the expanded nodes' draft slots would
			// pass the cache (near the context's end; the tree is then
			// finished early).
			room := q.Context() + d.o.draftRoom() - (q.Cached + 1 + s.fedNodes)
			if room < d.o.Tree.MaxBeams {
				continue
			}
			ids, err := s.tree.Expand()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				continue
			}
			e := exp{s: s, q: q, row: b.Len()}
			root := int32(q.Cached)
			for _, id := range ids {
				// The draft has not seen a forced chain above id (nor the
				// node it hangs from): feed it first, without logits.
				chain := s.unfed(id)
				if len(chain) > room {
					// No room for its slots: id stays a leaf (no
					// children); the tree is near the cache's end.
					e.ids = append(e.ids, -1-id)
					continue
				}
				room -= len(chain)
				parentRow, parentSlot := int32(-1), s.slotOf(s.tree.Node(chain[0]).Parent)
				for k, c := range chain {
					n := s.tree.Node(c)
					parentRow = b.AddChild(n.Token, root+int32(n.Depth), q.Seq, parentRow, parentSlot, k == len(chain)-1)
					parentSlot = -1
					e.fed = append(e.fed, c)
				}
				e.ids = append(e.ids, id)
			}
			s.fedNodes += len(e.fed)
			round = append(round, e)
		}
		if len(round) == 0 {
			return nil
		}
		if b.Len() > 0 {
			if err := d.forward(ctx, b, &slots); err != nil {
				return err
			}
		}
		if need := len(b.Outputs) * vocab; cap(probs) < need {
			probs = make([]float32, need)
		}
		out := 0
		for _, e := range round {
			for k, c := range e.fed {
				for int(c) >= len(e.s.slot) {
					e.s.slot = append(e.s.slot, -1)
				}
				e.s.slot[c] = slots[e.row+k]
				e.s.open = true
			}
			dists = dists[:0]
			for _, id := range e.ids {
				if id < 0 {
					dists = append(dists, sample.Dist{}) // not fed: no children
					continue
				}
				logits := d.draftLogits(out)
				if e.q.Processes() {
					// The draft's row is processed at the node's prefix as
					// the target's will be, so the tree grows along tokens
					// the target can take.
					hist = e.s.tree.Path(append(hist[:0], e.q.Tokens...), id)
					var err error
					if logits, err = e.q.Process(logits, hist); err != nil {
						return err
					}
				}
				dists = append(dists, softmax(logits, e.q.Sampler().Options().Temperature, probs[out*vocab:(out+1)*vocab]))
				out++
			}
			from := int32(e.s.tree.Ids())
			if err := e.s.tree.Add(dists); err != nil {
				return err
			}
			if err := d.force(e.s, e.q, from, &hist); err != nil {
				return err
			}
		}
	}
}

// force puts below every live leaf of s's tree from id from on the run of
// tokens the request's grammar forces after it (session.Forced), up to the
// tree's depth and before an end token: jump-forward, a chain of nodes
// that costs no draft pass (spec.Tree.Force). The draft next sees them in
// the pass that expands the chain's last node.
func (d *Speculative) force(s *seqState, q *session.Session, from int32, hist *[]int32) error {
	end := int32(s.tree.Ids())
	maxDepth := int32(s.tree.Options().MaxDepth)
	var toks []int32
	for id := from; id < end; id++ {
		n := s.tree.Node(id)
		if !n.Live || n.Expanded || n.Depth >= maxDepth {
			continue
		}
		h := s.tree.Path(append((*hist)[:0], q.Tokens...), id)
		toks = toks[:0]
		for int32(len(toks)) < maxDepth-n.Depth {
			tok, ok := q.Forced(h)
			if !ok || q.Stops(tok) {
				break
			}
			toks = append(toks, tok)
			h = append(h, tok)
		}
		*hist = h
		if len(toks) == 0 {
			continue
		}
		added, err := s.tree.Force(id, toks)
		if err != nil {
			return fmt.Errorf("request %s: %w", q.Req.ID, err)
		}
		d.mu.Lock()
		d.stats.ForcedNodes += int64(added)
		d.mu.Unlock()
	}
	return nil
}

// rows puts the tree's nodes after the root in the tree's order, each row's
// parent the row of its parent node.
func (treeMode) rows(nb *input.Batch, s *seqState, q *session.Session, start int32) int {
	root := int32(q.Cached)
	nodes, parents := s.tree.Order()
	for int(slices.Max(append(nodes, 0))) >= len(s.row) {
		s.row = append(s.row, -1)
	}
	s.row[0] = start
	for k, id := range nodes {
		n := s.tree.Node(id)
		parent := start
		if parents[k] >= 0 {
			parent = start + 1 + parents[k]
		}
		s.row[id] = int32(nb.AddChild(n.Token, root+int32(n.Depth), q.Seq, parent, -1, true))
	}
	return len(nodes)
}

func (treeMode) verify(d *Speculative, sp *sched.Span, s *seqState, logits func(int32) []float32) (keep, accept []int32, err error) {
	q := sp.S
	hist := slices.Clone(q.Tokens)
	base := len(hist)
	path, emitted, err := s.tree.Verify(func(node int32) (int32, error) {
		hist = s.tree.Path(hist[:base], node)
		return q.Sample(logits(s.row[node]), hist)
	})
	if err != nil {
		return nil, nil, err
	}
	keep = append(keep, int32(sp.Start))
	for _, id := range path {
		keep = append(keep, s.row[id])
	}
	// The draft keeps the accepted nodes it has K/V for (the expanded ones,
	// a prefix of the path); the rest it is fed next round.
	var dkeep []int32
	for _, id := range path {
		if int(id) >= len(s.slot) || s.slot[id] < 0 {
			break
		}
		dkeep = append(dkeep, s.slot[id])
	}
	if s.open {
		if err := d.kv.CommitPath(q.Seq, dkeep); err != nil {
			return nil, nil, fmt.Errorf("draft cache: %w", err)
		}
	}
	s.fed = int32(q.Cached) + 1 + int32(len(dkeep))
	// A node with a forced child has no other: the walk can leave the
	// forced chain only at its end, where it stopped.
	last := int32(0)
	if len(path) > 0 {
		last = path[len(path)-1]
	}
	if s.tree.Node(last).Expanded {
		for id := last + 1; id < int32(s.tree.Ids()); id++ {
			if n := s.tree.Node(id); n.Forced && n.Live && n.Parent == last {
				d.mu.Lock()
				d.stats.ForcedMissed++
				d.mu.Unlock()
				break
			}
		}
	}
	d.mu.Lock()
	d.stats.Budgets[s.budget]++
	d.stats.Budget = s.budget
	if d.auto != nil {
		d.auto.acceptedLen(len(path), s.predicted)
	}
	d.mu.Unlock()
	d.count(q.Keeps(emitted), len(path))
	return keep, emitted, nil
}
