package kernels_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/kernels"
	"go.uber.org/goleak"
)

func TestPoolFor(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, threads := range []int{1, 2, 3, 7} {
		t.Run(fmt.Sprintf("threads=%d", threads), func(t *testing.T) {
			p := kernels.NewPool(threads)
			defer p.Close()
			if p.Threads() != threads {
				t.Fatalf("Threads() = %d, want %d", p.Threads(), threads)
			}
			for n := 0; n <= 20; n++ {
				var mu sync.Mutex
				var chunks [][2]int
				hits := make([]int, n)
				p.For(n, func(lo, hi int) {
					mu.Lock()
					chunks = append(chunks, [2]int{lo, hi})
					mu.Unlock()
					for i := lo; i < hi; i++ {
						hits[i]++ // disjoint chunks: no race
					}
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("n=%d: index %d visited %d times (chunks %v)", n, i, h, chunks)
					}
				}
				if want := min(n, threads); len(chunks) != want {
					t.Fatalf("n=%d: %d chunks %v, want %d", n, len(chunks), chunks, want)
				}
				for _, c := range chunks {
					if c[0] >= c[1] {
						t.Fatalf("n=%d: empty chunk %v", n, c)
					}
				}
			}
		})
	}
}

func TestPoolNilAndClosed(t *testing.T) {
	defer goleak.VerifyNone(t)
	var nilPool *kernels.Pool
	if nilPool.Threads() != 1 {
		t.Fatalf("nil Pool Threads() = %d, want 1", nilPool.Threads())
	}
	calls := 0
	nilPool.For(5, func(lo, hi int) {
		calls++
		if lo != 0 || hi != 5 {
			t.Errorf("nil Pool chunk [%d,%d), want [0,5)", lo, hi)
		}
	})
	nilPool.Close()
	if calls != 1 {
		t.Fatalf("nil Pool: %d calls, want 1", calls)
	}

	p := kernels.NewPool(3)
	p.Close()
	p.Close() // idempotent
	calls = 0
	p.For(9, func(lo, hi int) { calls++ })
	if calls != 1 {
		t.Fatalf("closed Pool: %d calls, want 1 inline call", calls)
	}
	if d := kernels.NewPool(0); d.Threads() < 1 {
		t.Fatalf("NewPool(0).Threads() = %d", d.Threads())
	} else {
		d.Close()
	}
}

// TestPoolPanicWaits: a panic in the caller's chunk still waits for the
// helpers and leaves the pool usable.
func TestPoolPanicWaits(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in fn did not propagate")
			}
		}()
		p.For(2, func(lo, hi int) {
			if lo == 0 {
				panic("boom")
			}
		})
	}()
	calls := 0
	var mu sync.Mutex
	p.For(2, func(lo, hi int) { mu.Lock(); calls++; mu.Unlock() })
	if calls != 2 {
		t.Fatalf("after a panic: %d chunks ran, want 2", calls)
	}
}

func TestPoolForNoAlloc(t *testing.T) {
	p := kernels.NewPool(3)
	defer p.Close()
	sink := make([]int, 64)
	fn := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			sink[i]++
		}
	}
	if a := testing.AllocsPerRun(50, func() { p.For(64, fn) }); a != 0 {
		t.Fatalf("For allocates %v times per call", a)
	}
}

// TestPoolWakeups runs many calls through both hand-offs a helper can take:
// caught while polling (spin on) and parked on its channel (spin 0, with
// pauses so helpers really are asleep), checking each call's chunks ran
// exactly once and nothing leaks after Close.
func TestPoolWakeups(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, spin := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			defer kernels.SetPoolSpin(spin)()
			for _, threads := range []int{2, 3} {
				p := kernels.NewPool(threads)
				hits := make([]int32, 64)
				for call := range 300 {
					if call%50 == 0 {
						time.Sleep(2 * time.Millisecond) // let helpers park
					}
					n := 1 + call%len(hits)
					p.For(n, func(lo, hi int) {
						for i := lo; i < hi; i++ {
							hits[i]++
						}
					})
					for i := range n {
						if hits[i] != 1 {
							t.Fatalf("threads=%d call %d: index %d visited %d times", threads, call, i, hits[i])
						}
						hits[i] = 0
					}
				}
				p.Close()
			}
		})
	}
}
