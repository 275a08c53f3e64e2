package spec

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sample"
)

// Tokens of the hand-built trees: the root is 0, A=1, B=2, C=3, and deeper
// tokens 4..9.
const (
	tA = iota + 1
	tB
	tC
	tX
	tY
	tZ
	tW
	tM
	tN
)

var tokName = map[int32]string{0: "r", tA: "A", tB: "B", tC: "C", tX: "x", tY: "y", tZ: "z", tW: "w", tM: "m", tN: "n"}

// draftByPath is a fake draft model: the distribution after a path of
// tokens (root excluded), as a dense vector over 10 ids.
type draftByPath map[string]map[int32]float32

func (m draftByPath) dist(t *testing.T, tr *Tree, id int32) sample.Dist {
	t.Helper()
	key := pathKey(tr.Path(nil, id))
	probs, ok := m[key]
	if !ok {
		t.Fatalf("draft asked for children of %q, which the test did not expect", key)
	}
	d := make([]float32, 10)
	for tok, p := range probs {
		d[tok] = p
	}
	return sample.Dist{Probs: d}
}

func pathKey(p []int32) string {
	var b strings.Builder
	for _, t := range p {
		b.WriteString(tokName[t])
	}
	return b.String()
}

// grow drives the tree to the end and records each pass's expanded nodes.
func grow(t *testing.T, tr *Tree, m draftByPath) []string {
	t.Helper()
	var passes []string
	for {
		ids, err := tr.Expand()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			return passes
		}
		var names []string
		dists := make([]sample.Dist, len(ids))
		for i, id := range ids {
			names = append(names, "("+pathKey(tr.Path(nil, id))+")")
			dists[i] = m.dist(t, tr, id)
		}
		passes = append(passes, strings.Join(names, " "))
		if err := tr.Add(dists); err != nil {
			t.Fatal(err)
		}
	}
}

// liveTree renders the live nodes in Order with parent indices and scores.
func liveTree(tr *Tree) []string {
	nodes, parents := tr.Order()
	var out []string
	for i, id := range nodes {
		n := tr.Node(id)
		out = append(out, fmt.Sprintf("%s p=%d d=%d %.3f", pathKey(tr.Path(nil, id)), parents[i], n.Depth, math.Exp(n.LogP)))
	}
	return out
}

func TestTreeBestFirstByHand(t *testing.T) {
	// Budget 4, Branch 2, MaxBeams 1, MaxDepth 3, no decay.
	//
	// pass 1: expand the root: children A .6, B .3 (C .1 is the third: Branch
	//         2 drops it). Tree {A .6, B .3}.
	// pass 2: expand A (best): Ax .6·.9 = .54, Ay .6·.05 = .03. Tree full:
	//         {A .6, Ax .54, B .3, Ay .03}.
	// pass 3: unexpanded B .3, Ax .54, Ay .03; the worst is Ay, and Ay itself
	//         cannot beat it. Expand Ax: Axz .54·.5 = .27 beats Ay (.03), which
	//         is dropped; Axw .54·.2 = .108 does not beat the new worst (.27).
	// pass 4: Axz is at MaxDepth; B (.3 > .27) is expanded: Bm .3·.95 = .285
	//         beats Axz (.27), which is dropped; Bn .3·.03 does not.
	// then:   the only unexpanded node is Bm, itself the worst: done.
	m := draftByPath{
		"":   {tA: .6, tB: .3, tC: .1},
		"A":  {tX: .9, tY: .05, tZ: .05},
		"Ax": {tZ: .5, tW: .2, tM: .3 - .1, tN: .1},
		"B":  {tM: .95, tN: .03, tX: .02},
	}
	tr, err := NewTree(0, TreeOptions{Budget: 4, Branch: 2, MaxBeams: 1, MaxDepth: 3})
	if err != nil {
		t.Fatal(err)
	}
	passes := grow(t, tr, m)
	wantPasses := []string{"()", "(A)", "(Ax)", "(B)"}
	if !slices.Equal(passes, wantPasses) {
		t.Errorf("expanded %q, want %q", passes, wantPasses)
	}
	want := []string{"A p=-1 d=1 0.600", "B p=-1 d=1 0.300", "Ax p=0 d=2 0.540", "Bm p=1 d=2 0.285"}
	if got := liveTree(tr); !slices.Equal(got, want) {
		t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tr.Len() != 4 || tr.Passes() != 4 {
		t.Errorf("Len %d Passes %d, want 4 and 4", tr.Len(), tr.Passes())
	}
	// Axz at depth 3 was pushed out; a MaxDepth 2 tree never expands Ax.
	tr2, _ := NewTree(0, TreeOptions{Budget: 4, Branch: 2, MaxBeams: 1, MaxDepth: 2})
	if p := grow(t, tr2, m); !slices.Equal(p, []string{"()", "(A)", "(B)"}) {
		t.Errorf("MaxDepth 2: expanded %q", p)
	}
	if got := liveTree(tr2); !slices.Equal(got, want) {
		t.Errorf("MaxDepth 2 tree:\n%s", strings.Join(got, "\n"))
	}
}

func TestTreeMaxBeamsBatchesAPass(t *testing.T) {
	// Budget 5, Branch 2, MaxBeams 2: pass 2 expands A and B together; of
	// their four children Ax .54, Bm .285, Ay .03, Bn .009 only the best
	// three fit beside A and B.
	m := draftByPath{
		"":  {tA: .6, tB: .3, tC: .1},
		"A": {tX: .9, tY: .05, tZ: .05},
		"B": {tM: .95, tN: .03, tX: .02},
	}
	tr, _ := NewTree(0, TreeOptions{Budget: 5, Branch: 2, MaxBeams: 2, MaxDepth: 2})
	if p := grow(t, tr, m); !slices.Equal(p, []string{"()", "(A) (B)"}) {
		t.Errorf("expanded %q", p)
	}
	// Ids follow insertion, best first within a pass: Bm before Ay.
	want := []string{"A p=-1 d=1 0.600", "B p=-1 d=1 0.300", "Ax p=0 d=2 0.540", "Bm p=1 d=2 0.285", "Ay p=0 d=2 0.030"}
	if got := liveTree(tr); !slices.Equal(got, want) {
		t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestTreeDecay(t *testing.T) {
	// Budget 3, Branch 3, MaxBeams 1, MaxDepth 2. Root: A .5, B .3, C .2;
	// after A: x .7.
	// No decay: Ax = .5·.7 = .35 beats C (.2) and replaces it.
	// Decay .5: A .25, B .15, C .1, and Ax = .25·.5·.7 = .0875 < C's .1:
	// the deeper node loses; the tree stays {A, B, C}.
	m := draftByPath{
		"":  {tA: .5, tB: .3, tC: .2},
		"A": {tX: .7, tY: .3},
		"B": {tM: 1},
	}
	tr, _ := NewTree(0, TreeOptions{Budget: 3, Branch: 3, MaxBeams: 1, MaxDepth: 2})
	grow(t, tr, m)
	if got, want := liveTree(tr), []string{"A p=-1 d=1 0.500", "B p=-1 d=1 0.300", "Ax p=0 d=2 0.350"}; !slices.Equal(got, want) {
		t.Errorf("no decay:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	tr, _ = NewTree(0, TreeOptions{Budget: 3, Branch: 3, MaxBeams: 1, MaxDepth: 2, Decay: 0.5})
	passes := grow(t, tr, m)
	if got, want := liveTree(tr), []string{"A p=-1 d=1 0.250", "B p=-1 d=1 0.150", "C p=-1 d=1 0.100"}; !slices.Equal(got, want) {
		t.Errorf("decay 0.5:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// After A, B (.15·.5 = .075 ≤ .1) cannot produce a child that beats C:
	// it is not expanded.
	if !slices.Equal(passes, []string{"()", "(A)"}) {
		t.Errorf("decay 0.5: expanded %q, want [() (A)]", passes)
	}
}

func TestTreeTiesAndMaxPasses(t *testing.T) {
	// A child with probability 1 ties its parent; the parent ranks first, so
	// the child does not push anything out of a full budget, and a node that
	// ties the worst does not enter.
	m := draftByPath{"": {tA: .5, tB: .5}, "A": {tX: 1}, "B": {tM: 1}}
	tr, _ := NewTree(0, TreeOptions{Budget: 2, Branch: 2, MaxBeams: 4, MaxDepth: 5})
	if p := grow(t, tr, m); !slices.Equal(p, []string{"()"}) {
		t.Errorf("expanded %q, want only the root", p)
	}
	if got := liveTree(tr); !slices.Equal(got, []string{"A p=-1 d=1 0.500", "B p=-1 d=1 0.500"}) {
		t.Errorf("tree %q", got)
	}
	// With room, the ties go in; MaxPasses stops the growth.
	tr, _ = NewTree(0, TreeOptions{Budget: 10, Branch: 2, MaxBeams: 4, MaxDepth: 5, MaxPasses: 2})
	m["Ax"], m["Bm"] = map[int32]float32{tY: 1}, map[int32]float32{tN: 1}
	if p := grow(t, tr, m); !slices.Equal(p, []string{"()", "(A) (B)"}) {
		t.Errorf("MaxPasses 2: expanded %q", p)
	}
	if tr.Len() != 4 {
		t.Errorf("MaxPasses 2: %d nodes, want 4", tr.Len())
	}
}

func TestTreeOptionsAndState(t *testing.T) {
	ok := TreeOptions{Budget: 4, MaxDepth: 2, MaxBeams: 2, Branch: 2}
	for _, o := range []TreeOptions{
		{Budget: 0, MaxDepth: 2, MaxBeams: 2, Branch: 2},
		{Budget: 4, MaxDepth: 0, MaxBeams: 2, Branch: 2},
		{Budget: 4, MaxDepth: 2, MaxBeams: 0, Branch: 2},
		{Budget: 4, MaxDepth: 2, MaxBeams: 2, Branch: 0},
		{Budget: 4, MaxDepth: 2, MaxBeams: 2, Branch: 2, Decay: 1.5},
		{Budget: 4, MaxDepth: 2, MaxBeams: 2, Branch: 2, Decay: math.NaN()},
		{Budget: 4, MaxDepth: 2, MaxBeams: 2, Branch: 2, MaxPasses: -1},
	} {
		if _, err := NewTree(0, o); !errors.Is(err, ErrOptions) {
			t.Errorf("NewTree(%+v): err = %v, want ErrOptions", o, err)
		}
	}
	tr, err := NewTree(0, ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Add(nil); !errors.Is(err, ErrState) {
		t.Errorf("Add before Expand: %v", err)
	}
	if _, err := tr.Expand(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Expand(); !errors.Is(err, ErrState) {
		t.Errorf("Expand twice: %v", err)
	}
	if _, _, err := tr.Verify(nil); !errors.Is(err, ErrState) {
		t.Errorf("Verify with a pass pending: %v", err)
	}
	if err := tr.Add([]sample.Dist{{}, {}}); !errors.Is(err, ErrInput) {
		t.Errorf("Add with 2 dists for 1 node: %v", err)
	}
	if err := tr.Add([]sample.Dist{{IDs: []int32{-3}, Probs: []float32{1}}}); !errors.Is(err, ErrInput) {
		t.Errorf("Add with a negative id: %v", err)
	}
}

func TestTreeForce(t *testing.T) {
	// Budget 6, Branch 2, MaxBeams 2, MaxDepth 5, decay .5. Root: A .6, B .4.
	// A constraint forces x y after A: the chain Ax .3, Axy .3 (no decay:
	// certain given A) goes in without a draft pass, A and Ax are expanded,
	// and the next pass expands Axy (the end of the chain, where the draft
	// has a choice) beside B, not A. Of its candidates Bm .2·.5·.9 = .09,
	// Axyz and Axyw .3·.5·.5 = .075 and Bn .01 the best two fill the budget
	// (Axyz before Axyw: the lower token).
	m := draftByPath{
		"":    {tA: .6, tB: .4},
		"Axy": {tZ: .5, tW: .5},
		"B":   {tM: .9, tN: .1},
	}
	tr, _ := NewTree(0, TreeOptions{Budget: 6, Branch: 2, MaxBeams: 2, MaxDepth: 5, Decay: .5})
	ids, err := tr.Expand()
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Add([]sample.Dist{m.dist(t, tr, ids[0])}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Force(1, []int32{tX, tY}); err != nil { // node 1 is A
		t.Fatal(err)
	}
	if p := grow(t, tr, m); !slices.Equal(p, []string{"(B) (Axy)"}) {
		t.Errorf("expanded %q, want [(B) (Axy)]", p)
	}
	want := []string{
		"A p=-1 d=1 0.300", "B p=-1 d=1 0.200", "Ax p=0 d=2 0.300", "Axy p=2 d=3 0.300",
		"Bm p=1 d=2 0.090", "Axyz p=3 d=4 0.075",
	}
	if got := liveTree(tr); !slices.Equal(got, want) {
		t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for id, forced := range map[int32]bool{1: false, 3: true, 4: true} {
		if n := tr.Node(id); n.Forced != forced || !n.Expanded {
			t.Errorf("node %d (%s): forced %v expanded %v, want forced %v, expanded", id, pathKey(tr.Path(nil, id)), n.Forced, n.Expanded, forced)
		}
	}
	// The target takes the forced chain like any draft path.
	target := map[string]int32{"": tA, "A": tX, "Ax": tY, "Axy": tZ, "Axyz": tC}
	path, emitted, err := tr.Verify(func(id int32) (int32, error) { return target[pathKey(tr.Path(nil, id))], nil })
	if err != nil {
		t.Fatal(err)
	}
	if got := pathKey(emitted); got != "AxyzC" || len(path) != 4 {
		t.Errorf("emitted %q along %d nodes, want AxyzC along 4", got, len(path))
	}
}

func TestTreeForceBudgetDepthAndState(t *testing.T) {
	// A forced chain counts against the budget: with budget 3 and the tree
	// {A .6, B .4}, one forced node fits; the next must beat the worst (B
	// .4) and does (.6 > .4), pushing B out; MaxDepth 3 stops the chain
	// there.
	m := draftByPath{"": {tA: .6, tB: .4}}
	tr, _ := NewTree(0, TreeOptions{Budget: 3, Branch: 2, MaxBeams: 2, MaxDepth: 3})
	if err := tr.Add(nil); !errors.Is(err, ErrState) {
		t.Fatalf("Add before Expand: %v", err)
	}
	ids, _ := tr.Expand()
	if _, err := tr.Force(0, []int32{tX}); !errors.Is(err, ErrState) {
		t.Errorf("Force with a pass pending: %v", err)
	}
	if err := tr.Add([]sample.Dist{m.dist(t, tr, ids[0])}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Force(0, []int32{tX}); !errors.Is(err, ErrInput) {
		t.Errorf("Force below the expanded root: %v", err)
	}
	if _, err := tr.Force(9, []int32{tX}); !errors.Is(err, ErrInput) {
		t.Errorf("Force below a node that does not exist: %v", err)
	}
	n, err := tr.Force(1, []int32{tX, tY, tZ, tW})
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("forced %d tokens, want 2 (the third would pass MaxDepth 3)", n)
	}
	want := []string{"A p=-1 d=1 0.600", "Ax p=0 d=2 0.600", "Axy p=1 d=3 0.600"}
	if got := liveTree(tr); !slices.Equal(got, want) {
		t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tr.Len() != 3 {
		t.Errorf("Len %d, want the budget, 3", tr.Len())
	}
	// Below the worst node a chain cannot enter a full tree.
	tr, _ = NewTree(0, TreeOptions{Budget: 2, Branch: 2, MaxBeams: 2, MaxDepth: 3})
	ids, _ = tr.Expand()
	if err := tr.Add([]sample.Dist{m.dist(t, tr, ids[0])}); err != nil {
		t.Fatal(err)
	}
	if n, err := tr.Force(2, []int32{tM}); err != nil || n != 0 { // node 2 is B, the worst
		t.Errorf("Force below the worst of a full tree: %d, %v; want 0", n, err)
	}
	if tr.Node(2).Expanded {
		t.Error("B was marked expanded though nothing was forced below it")
	}
}

// Random growth with forced chains keeps the tree's invariants: at most
// Budget live nodes, none deeper than MaxDepth, every live node's parent
// live (a dropped node has no live children), a forced node's score its
// parent's, a node with a forced child no other child, and Order listing
// parents before children.
func TestTreeForceInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		o := TreeOptions{Budget: 1 + rng.IntN(12), MaxDepth: 1 + rng.IntN(6), MaxBeams: 1 + rng.IntN(3), Branch: 1 + rng.IntN(3), Decay: []float64{0, .5, .9}[rng.IntN(3)]}
		tr, _ := NewTree(0, o)
		for pass := 0; ; pass++ {
			ids, err := tr.Expand()
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 {
				break
			}
			from := tr.Ids()
			dists := make([]sample.Dist, len(ids))
			for i := range dists {
				p := make([]float32, 10)
				for j := range p {
					p[j] = rng.Float32()
				}
				dists[i] = sample.Dist{Probs: p}
			}
			if err := tr.Add(dists); err != nil {
				t.Fatal(err)
			}
			for id := int32(from); id < int32(tr.Ids()); id++ {
				if n := tr.Node(id); n.Live && !n.Expanded && rng.IntN(2) == 0 {
					run := make([]int32, rng.IntN(5))
					for k := range run {
						run[k] = int32(rng.IntN(10))
					}
					if _, err := tr.Force(id, run); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if tr.Len() > o.Budget {
			t.Fatalf("trial %d: %d live nodes, budget %d", trial, tr.Len(), o.Budget)
		}
		kids := map[int32][]int32{}
		for id := int32(1); id < int32(tr.Ids()); id++ {
			n := tr.Node(id)
			if !n.Live {
				continue
			}
			p := tr.Node(n.Parent)
			switch {
			case !p.Live:
				t.Fatalf("trial %d: live node %d under dropped node %d", trial, id, n.Parent)
			case int(n.Depth) > o.MaxDepth || n.Depth != p.Depth+1:
				t.Fatalf("trial %d: node %d at depth %d under depth %d (max %d)", trial, id, n.Depth, p.Depth, o.MaxDepth)
			case n.Forced && n.LogP != p.LogP:
				t.Fatalf("trial %d: forced node %d scores %g, its parent %g", trial, id, n.LogP, p.LogP)
			}
			kids[n.Parent] = append(kids[n.Parent], id)
		}
		for parent, ks := range kids {
			for _, k := range ks {
				if tr.Node(k).Forced && len(ks) != 1 {
					t.Fatalf("trial %d: node %d has a forced child and %d children", trial, parent, len(ks))
				}
			}
		}
		nodes, parents := tr.Order()
		for i, p := range parents {
			if p >= int32(i) || (p >= 0 && tr.Node(nodes[i]).Parent != nodes[p]) {
				t.Fatalf("trial %d: Order row %d has parent row %d", trial, i, p)
			}
		}
	}
}
