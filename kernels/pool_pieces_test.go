package kernels

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolForPieces: forPieces covers every index of [0,n) exactly once,
// in contiguous pieces, for piece counts below, at and above the thread
// count and above n, on pools of 2 and 3 threads, with one goroutine
// stalled so that the others must take over its pieces; and a later
// forLocked call on the same pool is back to one fixed chunk per thread.
func TestPoolForPieces(t *testing.T) {
	for _, threads := range []int{2, 3} {
		p := NewPool(threads)
		for _, n := range []int{1, 2, 5, 17, 256} {
			for _, pieces := range []int{0, 1, threads, 8, 4 * threads, 1000} {
				for _, stall := range []bool{false, true} {
					what := fmt.Sprintf("threads=%d n=%d pieces=%d stall=%v", threads, n, pieces, stall)
					hits := make([]atomic.Int32, n)
					var calls atomic.Int32
					p.mu.Lock()
					p.forPieces(n, threads, pieces, func(lo, hi int) {
						if lo >= hi || lo < 0 || hi > n {
							t.Errorf("%s: piece [%d,%d)", what, lo, hi)
							return
						}
						if calls.Add(1) == 1 && stall {
							time.Sleep(2 * time.Millisecond)
						}
						for i := lo; i < hi; i++ {
							hits[i].Add(1)
						}
					})
					p.mu.Unlock()
					for i := range hits {
						if h := hits[i].Load(); h != 1 {
							t.Fatalf("%s: index %d run %d times", what, i, h)
						}
					}
					want := min(n, threads)
					if pieces > threads && n > threads {
						want = min(pieces, n)
					}
					if c := int(calls.Load()); c != want {
						t.Fatalf("%s: %d calls, want %d", what, c, want)
					}
				}
			}
		}
		var calls atomic.Int32
		p.For(64, func(lo, hi int) { calls.Add(1) })
		if c := calls.Load(); int(c) != threads {
			t.Fatalf("threads=%d: For after forPieces made %d calls, want %d", threads, c, threads)
		}
		p.Close()
	}
}
