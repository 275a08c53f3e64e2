package kernels

import (
	"sync/atomic"
	"testing"
)

// Many calls with varying part counts on pools of several sizes: every index
// is run exactly once per call and no helper runs outside a call.
func TestPoolStress(t *testing.T) {
	for _, th := range []int{2, 3, 5} {
		p := NewPool(th)
		var hits [8]atomic.Int32
		calls := 20000
		if testing.Short() {
			calls = 3000
		}
		for i := range calls {
			n := 1 + i%7
			p.For(n, func(lo, hi int) {
				for j := lo; j < hi; j++ {
					hits[j].Add(1)
				}
			})
			for j := range n {
				if got := hits[j].Swap(0); got != 1 {
					t.Fatalf("threads %d call %d: index %d ran %d times", th, i, j, got)
				}
			}
		}
		p.Close()
	}
}
