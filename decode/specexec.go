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
	}
	for {
		b.Reset()
		type exp struct {
			s   *seqState
			q   *session.Session
			ids []int32
		}
		var round []exp
		for _, i := range idx {
			q := st.Spans[i].S
			s := d.seqs[q]
			// Stop growing before the expanded nodes' draft slots would
			// pass the cache (near the context's end; the tree is then
			// finished early).
			if q.Cached+1+s.fedNodes+d.o.Tree.MaxBeams > q.Context()+d.o.draftRoom() {
				continue
			}
			ids, err := s.tree.Expand()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				continue
			}
			s.fedNodes += len(ids)
			root := int32(q.Cached)
			for _, id := range ids {
				n := s.tree.Node(id)
				b.AddChild(n.Token, root+int32(n.Depth), q.Seq, -1, s.slot[n.Parent], true)
			}
			round = append(round, exp{s, q, ids})
		}
		if len(round) == 0 {
			return nil
		}
		if err := d.forward(ctx, b, &slots); err != nil {
			return err
		}
		if need := b.Len() * vocab; cap(probs) < need {
			probs = make([]float32, need)
		}
		row := 0
		for _, e := range round {
			e.s.open = true
			dists = dists[:0]
			for _, id := range e.ids {
				for int(id) >= len(e.s.slot) {
					e.s.slot = append(e.s.slot, -1)
				}
				e.s.slot[id] = slots[row]
				logits := d.draftLogits(row)
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
				dists = append(dists, softmax(logits, e.q.Sampler().Options().Temperature, probs[row*vocab:(row+1)*vocab]))
				row++
			}
			if err := e.s.tree.Add(dists); err != nil {
				return err
			}
		}
	}
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
