package gemma_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model/gemma"
	"github.com/sluicehq/sluice/model/input"
)

// TestLocalMaskIsWindowedCache: narrowing a full cache's mask gives, for
// every row and slot, the visibility a cache with that window gives: linear
// prompts, decode rows, and draft trees grown over several passes, deeper
// than the window, beside a second, linear sequence.
func TestLocalMaskIsWindowedCache(t *testing.T) {
	for _, window := range []int{1, 3, 4, 7, 64} {
		t.Run(fmt.Sprint("window=", window), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(window), 9))
			newCache := func(w int) *kvcache.Cache {
				c, err := kvcache.New(kvcache.Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 512, Window: w})
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			full, win := newCache(0), newCache(window)
			var lm gemma.LocalMask
			// pass runs b through both caches and compares the masks.
			pass := func(name string, b *input.Batch) (slots []int32) {
				pf, err := full.Begin(t.Context(), b)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				pw, err := win.Begin(t.Context(), b)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				lm.Build(pf.Mask(), window)
				all := *lm.Rows(0, b.Len()) // a copy: Rows reuses its result
				got, want := &all, pw.Mask()
				hi := int32(0)
				for i := range b.Len() {
					hi = max(hi, want.Hi[i])
				}
				for i := range b.Len() {
					for j := int32(0); j < hi+2; j++ {
						if g, w := got.Visible(i, j), want.Visible(i, j); g != w {
							t.Fatalf("%s: row %d slot %d: local mask says %v, a window-%d cache %v", name, i, j, g, window, w)
						}
					}
				}
				// A run's rows are the same rows.
				if n := b.Len(); n > 1 {
					sub := lm.Rows(1, n)
					for i := 1; i < n; i++ {
						for j := int32(0); j < hi; j++ {
							if sub.Visible(i-1, j) != got.Visible(i, j) {
								t.Fatalf("%s: Rows(1, n) row %d differs", name, i-1)
							}
						}
					}
				}
				slots = append(slots, pf.Slots()...)
				for _, p := range []*kvcache.Pass{pf, pw} {
					if err := p.End(); err != nil {
						t.Fatal(err)
					}
				}
				return slots
			}
			// Two sequences' prompts in one batch.
			b := &input.Batch{}
			for i := range 13 {
				b.Add(int32(i), int32(i), 0, false)
				if i < 9 {
					b.Add(int32(i), int32(i), 1, false)
				}
			}
			pass("prompts", b)
			// A decode row of sequence 1; a tree over sequence 0: the root
			// is slot 12, nodes hang off random earlier nodes.
			b = &input.Batch{}
			add := func(seq, parent, pslot, pos int32) { b.AddChild(0, pos, seq, parent, pslot, true) }
			add(1, -1, -1, 9)
			depth := map[int32]int32{}
			first := int32(b.Len())
			add(0, -1, 12, 13)
			depth[first] = 1
			for range 12 {
				p := first + int32(r.IntN(b.Len()-int(first)))
				if r.IntN(3) > 0 { // mostly extend the deepest node: deep chains
					p = int32(b.Len() - 1)
					if b.Seq[p] != 0 {
						p = first
					}
				}
				depth[int32(b.Len())] = depth[p] + 1
				add(0, p, -1, 12+depth[p]+1)
			}
			slots := pass("tree", b)
			// Grow it from the last pass's nodes (ParentSlot), beside another
			// decode row of sequence 1.
			b2 := &input.Batch{}
			b, old := b2, b
			add(1, -1, -1, 10)
			for k := range 6 {
				row := first + int32(r.IntN(old.Len()-int(first)))
				if k%2 == 0 {
					add(0, -1, slots[row], 12+depth[row]+1)
				} else {
					add(0, int32(b.Len()-1), -1, b.Positions[b.Len()-1]+1)
				}
			}
			pass("tree, second pass", b)
		})
	}
}

// A window of 0 is never built (layers without one use the full mask); a
// plain mask keeps Tree nil.
func TestLocalMaskPlain(t *testing.T) {
	full := &kernels.Mask{Lo: []int32{0, 0, 0}, Hi: []int32{5, 6, 7}, TreeBase: []int32{5, 6, 7}}
	var lm gemma.LocalMask
	lm.Build(full, 2)
	m := lm.Rows(0, 3)
	if m.Tree != nil {
		t.Fatal("Tree set for a plain mask")
	}
	for i, want := range []int32{3, 4, 5} {
		if m.Lo[i] != want || m.Hi[i] != full.Hi[i] {
			t.Errorf("row %d: [%d,%d), want [%d,%d)", i, m.Lo[i], m.Hi[i], want, full.Hi[i])
		}
	}
}
