//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestVisibleRun: walking a row with visibleRun yields exactly the slots
// Mask.Visible admits, in order, in runs that never cross a page, on random
// tree masks (bases, ranges and bit densities) and plain causal ones.
func TestVisibleRun(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 9))
	for it := 0; it < 3000; it++ {
		slots := 1 + r.IntN(300)
		pt := []int{1, 3, 16, 64, 100}[r.IntN(5)]
		m := &Mask{Lo: []int32{int32(r.IntN(slots))}, Hi: []int32{int32(r.IntN(slots + 1))}}
		tree := r.IntN(4) != 0
		if tree {
			base := r.IntN(slots + 1)
			words := make([]uint64, (slots-base+63)/64+r.IntN(2))
			density := r.Float64()
			for k := 0; k < slots-base; k++ {
				if r.Float64() < density {
					words[k/64] |= 1 << (k % 64)
				}
			}
			m.Tree, m.TreeBase = [][]uint64{words}, []int32{int32(base)}
		}
		lo, hi := int(m.Lo[0]), min(int(m.Hi[0]), slots)
		var want, got []int
		for j := lo; j < hi; j++ {
			if m.Visible(0, int32(j)) {
				want = append(want, j)
			}
		}
		for j := lo; ; {
			j0, n := visibleRun(m, tree, 0, j, hi, pt)
			if n == 0 {
				break
			}
			if j0 < j || j0/pt != (j0+n-1)/pt {
				t.Fatalf("case %d: run [%d,%d) from %d crosses a page of %d or goes back", it, j0, j0+n, j, pt)
			}
			for k := j0; k < j0+n; k++ {
				got = append(got, k)
			}
			j = j0 + n
		}
		if len(got) != len(want) {
			t.Fatalf("case %d (pt %d, tree %v): runs give %v, Visible %v", it, pt, tree, got, want)
		}
		for k := range got {
			if got[k] != want[k] {
				t.Fatalf("case %d (pt %d, tree %v): runs give %v, Visible %v", it, pt, tree, got, want)
			}
		}
	}
}
