package spec

import (
	"slices"
	"testing"

	"github.com/sluicehq/sluice/sample"
)

const fakeVocab = 12

// fakeLogits is a deterministic "model": logits that depend on the whole
// history through a hash, with a few strong tokens so a draft can guess.
func fakeLogits(history []int32, salt uint64) []float32 {
	h := uint64(1469598103934665603)
	for _, t := range history {
		h = (h ^ uint64(t)) * 1099511628211
	}
	out := make([]float32, fakeVocab)
	for i := range out {
		u := sample.UniformAt(h, uint64(i), 0, 1) // a hash, not a sampling draw
		out[i] = float32(4 * u * u * u)
	}
	if salt != 0 { // the draft: the target's logits with noise
		for i := range out {
			out[i] += float32(sample.UniformAt(h, uint64(i), salt, 1))
		}
	}
	return out
}

// TestTreeVerifyEqualsPlainDecoding checks for 20 seeds that SpecExec's
// loop (grow a tree with a draft, verify with the target's sampler, commit)
// emits exactly the tokens of plain step-by-step sampling.
func TestTreeVerifyEqualsPlainDecoding(t *testing.T) {
	const n = 60
	prompt := []int32{1, 5, 2}
	opts := []sample.Options{
		{Temperature: 0.7, TopK: 6, TopP: 0.95, RepeatPenalty: 1.1},
		{Temperature: 1, MinP: 0.05},
		{}, // greedy
	}
	draftS, _ := sample.New(sample.Options{Temperature: 1})
	accepted, rounds := 0, 0
	for _, o := range opts {
		for seed := range uint64(20) {
			o.Seed = seed
			s, err := sample.New(o)
			if err != nil {
				t.Fatal(err)
			}
			const req = 3
			plain := slices.Clone(prompt)
			for len(plain) < n {
				tok, err := s.Next(fakeLogits(plain, 0), plain, req, uint64(len(plain)), nil)
				if err != nil {
					t.Fatal(err)
				}
				plain = append(plain, tok)
			}

			tr, err := NewTree(0, TreeOptions{Budget: 12, MaxDepth: 5, MaxBeams: 4, Branch: 3, Decay: 0.9})
			if err != nil {
				t.Fatal(err)
			}
			hist := slices.Clone(prompt)
			var buf []int32
			for len(hist) < n {
				tr.Reset(hist[len(hist)-1])
				for {
					ids, err := tr.Expand()
					if err != nil {
						t.Fatal(err)
					}
					if len(ids) == 0 {
						break
					}
					dists := make([]sample.Dist, len(ids))
					for i, id := range ids {
						buf = tr.Path(append(buf[:0], hist...), id)
						d, err := draftS.Dist(fakeLogits(buf, 7), nil, nil)
						if err != nil {
							t.Fatal(err)
						}
						dists[i] = sample.Dist{IDs: slices.Clone(d.IDs), Probs: slices.Clone(d.Probs)}
					}
					if err := tr.Add(dists); err != nil {
						t.Fatal(err)
					}
				}
				path, emitted, err := tr.Verify(func(node int32) (int32, error) {
					buf = tr.Path(append(buf[:0], hist...), node)
					return s.Next(fakeLogits(buf, 0), buf, req, uint64(len(buf)), nil)
				})
				if err != nil {
					t.Fatal(err)
				}
				if len(emitted) != len(path)+1 {
					t.Fatalf("%d emitted for a path of %d", len(emitted), len(path))
				}
				for i, id := range path {
					if tr.Node(id).Token != emitted[i] || int(tr.Node(id).Depth) != i+1 {
						t.Fatalf("path node %d: token %d depth %d, emitted %d", id, tr.Node(id).Token, tr.Node(id).Depth, emitted[i])
					}
				}
				accepted += len(path)
				rounds++
				hist = append(hist, emitted...)
			}
			hist = hist[:n]
			if !slices.Equal(hist, plain) {
				t.Fatalf("options %+v: tree decoding\n%v\nplain decoding\n%v", o, hist, plain)
			}
		}
	}
	if accepted == 0 {
		t.Fatalf("no draft token was ever accepted in %d rounds: the test exercised nothing", rounds)
	}
	t.Logf("%d rounds, %.2f accepted draft tokens per round", rounds, float64(accepted)/float64(rounds))
}

// A literal tree: Order's parent rows and Verify's walk.
func TestTreeOrderAndVerifyWalk(t *testing.T) {
	m := draftByPath{
		"":  {tA: .6, tB: .4},
		"A": {tX: .7, tY: .3},
		"B": {tM: .9, tN: .1},
	}
	tr, _ := NewTree(0, TreeOptions{Budget: 5, Branch: 2, MaxBeams: 2, MaxDepth: 2})
	grow(t, tr, m)
	nodes, parents := tr.Order()
	// A .6, B .4, Ax .42, Bm .36, Ay .18 (Bn .04 is the sixth).
	var got []string
	for i, id := range nodes {
		got = append(got, pathKey(tr.Path(nil, id)))
		if p := parents[i]; p >= 0 && nodes[p] != tr.Node(id).Parent {
			t.Errorf("node %d: parent index %d is node %d, want %d", id, p, nodes[p], tr.Node(id).Parent)
		}
		if p := parents[i]; p >= int32(i) {
			t.Errorf("node %d comes before its parent", id)
		}
	}
	if want := []string{"A", "B", "Ax", "Bm", "Ay"}; !slices.Equal(got, want) {
		t.Errorf("Order = %v, want %v", got, want)
	}
	if want := []int32{-1, -1, 0, 1, 0}; !slices.Equal(parents, want) {
		t.Errorf("parents = %v, want %v", parents, want)
	}
	// Target picks B, then n (not in the tree): path [B], emitted [B, n].
	choice := map[string]int32{"": tB, "B": tN}
	path, emitted, err := tr.Verify(func(node int32) (int32, error) {
		return choice[pathKey(tr.Path(nil, node))], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(path) != 1 || tr.Node(path[0]).Token != tB || !slices.Equal(emitted, []int32{tB, tN}) {
		t.Errorf("path %v emitted %v, want [B] and [B n]", path, emitted)
	}
	// Target picks A, x, then anything: the deepest path.
	choice = map[string]int32{"": tA, "A": tX, "Ax": tC}
	path, emitted, _ = tr.Verify(func(node int32) (int32, error) { return choice[pathKey(tr.Path(nil, node))], nil })
	if len(path) != 2 || !slices.Equal(emitted, []int32{tA, tX, tC}) {
		t.Errorf("path %v emitted %v, want 2 nodes and [A x C]", path, emitted)
	}
	// Rejected at the root: nothing accepted, one token emitted.
	path, emitted, _ = tr.Verify(func(int32) (int32, error) { return tC, nil })
	if len(path) != 0 || !slices.Equal(emitted, []int32{tC}) {
		t.Errorf("path %v emitted %v, want none and [C]", path, emitted)
	}
}
