package spec

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/sample"
)

// ErrState is returned when a Tree's methods are called out of order.
var ErrState = errors.New("spec: call out of order")

// TreeOptions shape SpecExec's draft tree. Budget, MaxDepth, MaxBeams and
// Branch are required (≥ 1).
type TreeOptions struct {
	// Budget is the most draft nodes the tree holds (the root excluded): the
	// size of the target batch that verifies it, SpecExec's max_budget.
	Budget int
	// MaxDepth is the deepest a node may be (the root is depth 0, its
	// children 1). It stops a confident draft from growing one long stem that
	// a single mistake would throw away, and bounds the positions a tree
	// reaches past its root (the engine drafts only where they fit the
	// context). The reference has no such cap of its own: its depth is bounded
	// by its pass count (MaxPasses).
	MaxDepth int
	// MaxBeams is the most nodes expanded in one draft pass, the rows of one
	// batched draft forward (SpecExec's max_n_beams).
	MaxBeams int
	// Branch is the most children taken from one expanded node, its top
	// tokens by draft probability (SpecExec's max_branch_width).
	Branch int
	// Decay in (0, 1] multiplies a node's probability once per level, so the
	// search prefers shallow nodes whose acceptance is less uncertain. As in
	// the reference, a child's score is parent score + log(Decay) + log q, so
	// a node at depth d scores Σ log q + d·log(Decay). 0 means 1 (no decay).
	Decay float64
	// MaxPasses, when > 0, caps the draft passes per tree, the root's
	// included: SpecExec's max_beam_len, the reference's limit on its growth
	// iterations (each pass adds at most one level, so it bounds the depth
	// too). 0 is no cap: the budget and MaxDepth end the search.
	MaxPasses int
}

// Validate reports the first bad field.
func (o TreeOptions) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrOptions, field, v, want)
	}
	switch {
	case o.Budget < 1:
		return bad("Budget", o.Budget, ">= 1")
	case o.MaxDepth < 1:
		return bad("MaxDepth", o.MaxDepth, ">= 1")
	case o.MaxBeams < 1:
		return bad("MaxBeams", o.MaxBeams, ">= 1")
	case o.Branch < 1:
		return bad("Branch", o.Branch, ">= 1")
	case !(o.Decay >= 0 && o.Decay <= 1):
		return bad("Decay", o.Decay, "in (0, 1], or 0 for none")
	case o.MaxPasses < 0:
		return bad("MaxPasses", o.MaxPasses, ">= 0")
	}
	return nil
}

// Node is one token of a draft tree. Node ids are stable for the life of a
// tree (until Reset): node 0 is the root and every node's id is above its
// parent's, so ascending id order is a topological order.
type Node struct {
	Token  int32
	Parent int32 // node id of the parent; -1 for the root
	// Depth is the distance from the root: the node's position is the
	// root's position + Depth.
	Depth int32
	// LogP is the search score: the cumulative draft log-probability from
	// the root, with log(Decay) per level.
	LogP float64
	// Expanded reports whether the node's children are decided: it went
	// through the draft model, or the one token that may follow it was
	// forced below it (Force), which needs no draft pass. Expand never
	// picks an expanded node.
	Expanded bool
	// Forced reports whether the node was added by Force: its token is the
	// only one the target can take after its parent (a grammar allows no
	// other), so it carries its parent's score and has no draft
	// distribution of its own.
	Forced bool
	// Live is false once the node was pushed out of the budget by a better
	// one. A dropped node never has live children.
	Live bool
}

// Tree is SpecExec's draft tree, built by a budgeted best-first search (the
// paper's modified Dijkstra over −log q edge weights) and verified against
// the target. It is a state machine the engine drives:
//
//	t, _ := spec.NewTree(lastToken, opts)
//	for {
//		ids, _ := t.Expand()          // the best leaves still worth a pass
//		if len(ids) == 0 { break }
//		// one draft forward: row i is node ids[i]'s token at position
//		// root+Depth, parent = its parent's draft KV slot (ParentSlot);
//		// its output is the distribution over ids[i]'s children
//		t.Add(dists)
//		// where a constraint allows one token only after a new node:
//		t.Force(id, forcedRun)        // no draft pass for those
//	}
//	nodes, parents := t.Order()       // one target batch, root row first
//	path, emitted, _ := t.Verify(next) // next samples with the target
//	// kvcache CommitPath(path's slots); emitted[len-1] is the next root
//
// KV bookkeeping is the engine's. Draft cache: the first pass's row is the
// root's token extending the draft's committed tail; every later row's
// parent is the draft slot of its parent node (input.Batch.ParentSlot), so
// only nodes fed to the draft have draft slots: the ones a pass expanded,
// and the nodes of a forced chain (and the node above it), which the pass
// that expands the chain's last node feeds before it as rows without
// logits (input.Batch.Parent links them). Target cache: the root row then the
// Order rows, in one pass. After Verify, CommitPath the target slots of
// path; in the draft cache CommitPath the longest prefix of path whose nodes
// were fed, and feed the draft the rest of emitted (except the last
// token, the new root, which the next tree's first pass feeds) as plain
// rows. Nodes pushed out of the budget may hold draft slots; CommitPath
// drops them with the rest of the tree.
//
// A Tree is not safe for concurrent use.
type Tree struct {
	o        TreeOptions
	logDecay float64
	nodes    []Node
	live     int     // live nodes, root excluded
	pending  []int32 // the last Expand's nodes, awaiting Add
	passes   int
	cand     []candidate
	order    []int32
	// children of a node for Verify: first child and next sibling, by id.
	first, next []int32
	posOf       []int32
}

type candidate struct {
	parent int32
	token  int32
	logp   float64
	rank   int // tie order: expansion order, then token rank
}

// NewTree validates o and returns a tree whose root is the last accepted
// token.
func NewTree(root int32, o TreeOptions) (*Tree, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	t := &Tree{o: o}
	if o.Decay > 0 {
		t.logDecay = math.Log(o.Decay)
	}
	t.Reset(root)
	return t, nil
}

// Reset starts a new tree from root with the same options, keeping buffers.
func (t *Tree) Reset(root int32) {
	t.nodes = append(t.nodes[:0], Node{Token: root, Parent: -1, Live: true})
	t.live, t.passes = 0, 0
	t.pending = t.pending[:0]
}

// SetBudget changes the budget of the tree Reset just started (before its
// first Expand), so an engine can size each tree to what a target pass
// costs (decode's --budget auto) without rebuilding the tree's buffers.
func (t *Tree) SetBudget(b int) error {
	if t.passes > 0 || len(t.nodes) > 1 {
		return fmt.Errorf("%w: SetBudget after the tree started growing", ErrState)
	}
	if b < 1 {
		return fmt.Errorf("%w: Budget = %d, want >= 1", ErrOptions, b)
	}
	t.o.Budget = b
	return nil
}

// Options returns the options t was built with (with the last SetBudget's
// budget).
func (t *Tree) Options() TreeOptions { return t.o }

// Node returns a copy of node id, for the engine to read its token, parent,
// depth and score when it builds a batch.
func (t *Tree) Node(id int32) Node { return t.nodes[id] }

// Ids is the number of node ids given out so far, the root's and dropped
// nodes' included: the next node added gets id Ids().
func (t *Tree) Ids() int { return len(t.nodes) }

// Probs appends to dst the draft probability of reaching each live node
// from the root (the product of its path's draft probabilities, without
// Decay), best first. When the draft is the target, the k-th is the chance
// that the k-th node is accepted, so the sum of the first k is the expected
// accepted length of a tree of budget k grown the same way (decode's budget
// chooser reads the acceptance curve from it).
func (t *Tree) Probs(dst []float64) []float64 {
	start := len(dst)
	for i := 1; i < len(t.nodes); i++ {
		if n := &t.nodes[i]; n.Live {
			dst = append(dst, math.Exp(n.LogP-float64(n.Depth)*t.logDecay))
		}
	}
	slices.SortFunc(dst[start:], func(a, b float64) int { return cmp.Compare(b, a) })
	return dst
}

// Len is the number of live draft nodes (the root excluded), at most Budget.
func (t *Tree) Len() int { return t.live }

// Passes is the number of draft passes so far.
func (t *Tree) Passes() int { return t.passes }

// worst returns the live non-root node that ranks last (lowest LogP; of
// equal scores the newest, so a parent always outranks its children), or -1.
func (t *Tree) worst() int32 {
	w := int32(-1)
	for i := len(t.nodes) - 1; i > 0; i-- {
		n := &t.nodes[i]
		if n.Live && (w < 0 || n.LogP < t.nodes[w].LogP) {
			w = int32(i)
		}
	}
	return w
}

// Expand picks the nodes to run through the draft model next: up to
// MaxBeams live, unexpanded nodes with Depth < MaxDepth, best LogP first
// (ties: lower id), and, once the budget is full, only those that could
// still have a child beating the budget's worst node (LogP + log(Decay) >
// worst's LogP, since a child's log q is ≤ 0). It returns them in ascending
// id order and marks them expanded; Add must follow with their draft
// distributions. An empty result means the tree is finished: no candidate
// beats the budget, none is shallow enough, or MaxPasses was reached.
func (t *Tree) Expand() ([]int32, error) {
	if len(t.pending) > 0 {
		return nil, fmt.Errorf("%w: Expand before Add of the previous pass's %d nodes", ErrState, len(t.pending))
	}
	if t.o.MaxPasses > 0 && t.passes >= t.o.MaxPasses {
		return nil, nil
	}
	bar := math.Inf(-1)
	if t.live >= t.o.Budget {
		bar = t.nodes[t.worst()].LogP
	}
	pick := t.order[:0]
	for i := range t.nodes {
		n := &t.nodes[i]
		if n.Live && !n.Expanded && int(n.Depth) < t.o.MaxDepth && n.LogP+t.logDecay > bar {
			pick = append(pick, int32(i))
		}
	}
	slices.SortFunc(pick, func(a, b int32) int {
		if c := cmp.Compare(t.nodes[b].LogP, t.nodes[a].LogP); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	pick = pick[:min(len(pick), t.o.MaxBeams)]
	slices.Sort(pick)
	t.order = pick
	if len(pick) == 0 {
		return nil, nil
	}
	for _, id := range pick {
		t.nodes[id].Expanded = true
	}
	t.pending = append(t.pending[:0], pick...)
	t.passes++
	return slices.Clone(pick), nil
}

// Add takes the draft model's distribution over the children of each node
// the last Expand returned, in the same order (a sample.Dist, sparse or
// dense; the engine usually passes the draft's plain softmax, Temperature 1,
// or its processed distribution). From each it takes the Branch most likely
// tokens (ties: lower id; zero-probability tokens never) as candidates with
// LogP = parent's + log(Decay) + log q, and offers all candidates of the
// pass to the budget best first: a candidate joins while the tree has room,
// and once it is full only if it beats the worst live node strictly, which
// it then replaces. (The reference admits ties and trims afterwards; the
// strict rule gives one answer whatever the order.)
func (t *Tree) Add(dists []sample.Dist) error {
	if len(t.pending) == 0 {
		return fmt.Errorf("%w: Add without Expand", ErrState)
	}
	if len(dists) != len(t.pending) {
		return fmt.Errorf("%w: %d distributions for %d expanded nodes", ErrInput, len(dists), len(t.pending))
	}
	t.cand = t.cand[:0]
	for k, d := range dists {
		if d.IDs != nil && len(d.IDs) != len(d.Probs) {
			return fmt.Errorf("%w: distribution %d has %d ids and %d probabilities", ErrInput, k, len(d.IDs), len(d.Probs))
		}
		parent := t.pending[k]
		base := len(t.cand)
		// The Branch most likely children (probability down, token id up),
		// by insertion into a short sorted run: one pass over the
		// vocabulary, not a sort of it (which was a fifth of a SpecExec run
		// at budget 64).
		for j, p := range d.Probs {
			if !(p > 0) {
				continue
			}
			id := int32(j)
			if d.IDs != nil {
				id = d.IDs[j]
			}
			if id < 0 {
				return fmt.Errorf("%w: distribution %d has token id %d", ErrInput, k, id)
			}
			c := candidate{parent: parent, token: id, logp: float64(p)}
			n := len(t.cand) - base
			if n == t.o.Branch {
				if !before(c, t.cand[len(t.cand)-1]) {
					continue
				}
				t.cand = t.cand[:len(t.cand)-1]
			}
			t.cand = append(t.cand, c)
			for i := len(t.cand) - 1; i > base && before(c, t.cand[i-1]); i-- {
				t.cand[i], t.cand[i-1] = t.cand[i-1], c
			}
		}
		kids := t.cand[base:]
		pl := t.nodes[parent].LogP + t.logDecay
		for j := range kids {
			kids[j].logp = pl + math.Log(kids[j].logp)
			kids[j].rank = base + j
		}
	}
	t.pending = t.pending[:0]
	slices.SortFunc(t.cand, func(a, b candidate) int {
		if c := cmp.Compare(b.logp, a.logp); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	for _, c := range t.cand {
		if !t.nodes[c.parent].Live {
			continue
		}
		if t.live >= t.o.Budget {
			w := t.worst()
			if !(c.logp > t.nodes[w].LogP) {
				break // candidates are sorted: none after this one beats it either
			}
			t.nodes[w].Live = false
			t.live--
		}
		t.nodes = append(t.nodes, Node{
			Token:  c.token,
			Parent: c.parent,
			Depth:  t.nodes[c.parent].Depth + 1,
			LogP:   c.logp,
			Live:   true,
		})
		t.live++
	}
	return nil
}

// Force adds below leaf id the tokens the target is certain to take once it
// reaches id (jump-forward: a grammar allows only toks[0] after id, then
// only toks[1], ...), as a chain of Forced children, without a draft pass:
// id and every chain node but the last become Expanded, and the last is a
// leaf the next Expand may pick (the draft then runs once at the end of the
// chain, where there is a choice). A forced node's score is its parent's:
// given its parent it is accepted with probability 1, so no decay applies.
//
// Forced nodes are target rows, so they count against Budget like any node
// (the batch that verifies the tree and the KV headroom are sized by it),
// and they are offered to it as Add offers a candidate: while the tree has
// room, or replacing the worst live node when they beat it strictly. Since
// a forced node ties its parent, a chain below the worst node stops there.
// The chain stops at MaxDepth too. It returns how many tokens it added.
// Called between passes (after Add, before Expand); id must be a live leaf
// that is not expanded.
func (t *Tree) Force(id int32, toks []int32) (int, error) {
	if len(t.pending) > 0 {
		return 0, fmt.Errorf("%w: Force before Add of the last pass's %d nodes", ErrState, len(t.pending))
	}
	if id < 0 || int(id) >= len(t.nodes) {
		return 0, fmt.Errorf("%w: Force below node %d, the tree has %d", ErrInput, id, len(t.nodes))
	}
	if n := t.nodes[id]; !n.Live || n.Expanded {
		return 0, fmt.Errorf("%w: Force below node %d, which is not a live unexpanded leaf (live %v, expanded %v)", ErrInput, id, n.Live, n.Expanded)
	}
	added := 0
	for _, tok := range toks {
		if tok < 0 {
			return added, fmt.Errorf("%w: forced token id %d", ErrInput, tok)
		}
		p := &t.nodes[id]
		if int(p.Depth) >= t.o.MaxDepth {
			break
		}
		if t.live >= t.o.Budget {
			w := t.worst()
			if w == id || !(p.LogP > t.nodes[w].LogP) {
				break
			}
			t.nodes[w].Live = false
			t.live--
		}
		p.Expanded = true
		t.nodes = append(t.nodes, Node{
			Token:  tok,
			Parent: id,
			Depth:  p.Depth + 1,
			LogP:   p.LogP,
			Live:   true,
			Forced: true,
		})
		t.live++
		added++
		id = int32(len(t.nodes) - 1)
	}
	return added, nil
}

// Order returns the live draft nodes in ascending id order, parents before
// children, and for each the index in that list of its parent, -1 for a
// child of the root. It is the layout of the target batch: put the root's
// token first (a plain row extending the committed tail) and node nodes[i]
// at row i+1 with Parent row parents[i]+1 and position root+Depth; every
// row needs logits, the root's being the target's distribution for depth 1.
// The slices are the caller's.
func (t *Tree) Order() (nodes, parents []int32) {
	if cap(t.posOf) < len(t.nodes) {
		t.posOf = make([]int32, len(t.nodes))
	}
	pos := t.posOf[:len(t.nodes)]
	pos[0] = -1
	for i := 1; i < len(t.nodes); i++ {
		if !t.nodes[i].Live {
			continue
		}
		pos[i] = int32(len(nodes))
		nodes = append(nodes, int32(i))
		parents = append(parents, pos[t.nodes[i].Parent])
	}
	return nodes, parents
}

// Path returns the tokens from the root (exclusive) down to node id
// (inclusive), appended to dst: the history a node adds to the committed
// text, which the target's sampler needs at that node.
func (t *Tree) Path(dst []int32, id int32) []int32 {
	start := len(dst)
	for ; id > 0; id = t.nodes[id].Parent {
		dst = append(dst, t.nodes[id].Token)
	}
	slices.Reverse(dst[start:])
	return dst
}

// Verify walks the tree with the target's choices. next(node) must return
// the token the target picks after node (0 = the root): the engine calls
// sample.Sampler.Next with the target's logits at that node, the committed
// history plus Path(node), and (request, t) with t = root position +
// Depth + 1, the same call plain decoding makes at that prefix, so the text
// is byte-identical to plain decoding by construction (and top-p keeps
// sample's Hugging Face semantics, the smallest prefix reaching TopP, not
// the reference's inverted cut). Verify starts at the
// root; while the picked token is a live child of the current node it moves
// there; the first token that is not is the last one emitted.
//
// path lists the accepted nodes (root excluded), for kvcache CommitPath;
// emitted is their tokens followed by that last token, which becomes the
// next root. An error from next stops the walk and is returned.
func (t *Tree) Verify(next func(node int32) (int32, error)) (path, emitted []int32, err error) {
	if len(t.pending) > 0 {
		return nil, nil, fmt.Errorf("%w: Verify before Add of the last pass", ErrState)
	}
	n := len(t.nodes)
	if cap(t.first) < n {
		t.first, t.next = make([]int32, n), make([]int32, n)
	}
	first, sib := t.first[:n], t.next[:n]
	for i := range first {
		first[i] = -1
	}
	for i := n - 1; i > 0; i-- {
		if nd := t.nodes[i]; nd.Live {
			sib[i] = first[nd.Parent]
			first[nd.Parent] = int32(i)
		}
	}
	cur := int32(0)
	for {
		tok, err := next(cur)
		if err != nil {
			return path, emitted, err
		}
		emitted = append(emitted, tok)
		c := first[cur]
		for c >= 0 && t.nodes[c].Token != tok {
			c = sib[c]
		}
		if c < 0 {
			return path, emitted, nil
		}
		path = append(path, c)
		cur = c
	}
}

// before orders a node's children: more probable first, then the lower token id.
func before(a, b candidate) bool {
	return a.logp > b.logp || (a.logp == b.logp && a.token < b.token)
}
