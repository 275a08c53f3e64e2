package kernels

import (
	"math"
	"sync"
	"testing"
)

// TestRopeTables checks the cached angles equal ropeAngle's bit for bit
// across table growth, for more shapes than there are slots (the rest
// computed directly), and from concurrent callers (run under -race in CI).
func TestRopeTables(t *testing.T) {
	// Start from empty slots (other tests of the package fill them) and put
	// them back afterwards.
	var saved [len(ropeTables)]*ropeTable
	for k := range ropeTables {
		saved[k] = ropeTables[k].Swap(nil)
	}
	defer func() {
		for k := range ropeTables {
			ropeTables[k].Store(saved[k])
		}
	}()
	type shape struct {
		dim  int
		base float32
	}
	shapes := []shape{{8, 10000}, {64, 10000}, {64, 500000}, {128, 10000}, {32, 1e6}, {16, 10000}}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for _, sh := range shapes {
				for _, pos := range []int32{0, 1, 511, 512, 1023, 1500 + int32(g), 4095, ropeMaxCached, ropeMaxCached + 5} {
					cs := ropeAngles(pos, sh.dim, sh.base)
					for i := 0; i < sh.dim; i += 2 {
						c, s := ropeAngle(pos, i, sh.dim, sh.base)
						if cs == nil {
							continue // not cached: RoPE computes directly
						}
						if math.Float32bits(cs[i]) != math.Float32bits(c) || math.Float32bits(cs[i+1]) != math.Float32bits(s) {
							t.Errorf("dim %d base %v pos %d pair %d: table (%v, %v), want (%v, %v)", sh.dim, sh.base, pos, i, cs[i], cs[i+1], c, s)
							return
						}
					}
					if pos >= ropeMaxCached && cs != nil {
						t.Errorf("pos %d past the cache bound was served from a table", pos)
					}
				}
			}
		})
	}
	wg.Wait()
	// The first four shapes hold the four slots (the goroutines race for
	// them, so any four of the six may); the other two are computed
	// directly every time.
	cached := 0
	for _, sh := range shapes {
		if ropeAngles(3, sh.dim, sh.base) != nil {
			cached++
		}
	}
	if cached != len(ropeTables) {
		t.Errorf("%d shapes served from tables, want %d (one per slot)", cached, len(ropeTables))
	}
	for k := range ropeTables {
		if tb := ropeTables[k].Load(); tb == nil || len(tb.cs)/tb.dim < 4096 {
			t.Errorf("slot %d: table %v did not grow to cover position 4095", k, tb)
		}
	}
}

// TestPrepareRoPE checks PrepareRoPE builds the table ahead, bounded by
// ropePrepareMax, with ropeAngle's values, and ignores shapes RoPE has
// none for.
func TestPrepareRoPE(t *testing.T) {
	var saved [len(ropeTables)]*ropeTable
	for k := range ropeTables {
		saved[k] = ropeTables[k].Swap(nil)
	}
	defer func() {
		for k := range ropeTables {
			ropeTables[k].Store(saved[k])
		}
	}()
	PrepareRoPE(0, 10000, 100)
	PrepareRoPE(7, 10000, 100)
	PrepareRoPE(64, 10000, 0)
	if tb := ropeTables[0].Load(); tb != nil {
		t.Fatalf("a shape without rotary pairs or positions built table %d×%d", len(tb.cs)/tb.dim, tb.dim)
	}
	for _, c := range []struct{ dim, positions, want int }{{48, 1000, 1000}, {48, 3000, 3000}, {64, 1 << 20, ropePrepareMax}} {
		PrepareRoPE(c.dim, 10000, c.positions)
		var tb *ropeTable
		for k := range ropeTables {
			if x := ropeTables[k].Load(); x != nil && x.dim == c.dim {
				tb = x
			}
		}
		if tb == nil || len(tb.cs)/c.dim != c.want {
			t.Fatalf("PrepareRoPE(%d, 10000, %d): table %v, want %d positions", c.dim, c.positions, tb, c.want)
		}
		for pos := range c.want {
			for i := 0; i < c.dim; i += 2 {
				cs, sn := ropeAngle(int32(pos), i, c.dim, 10000)
				if math.Float32bits(tb.cs[pos*c.dim+i]) != math.Float32bits(cs) || math.Float32bits(tb.cs[pos*c.dim+i+1]) != math.Float32bits(sn) {
					t.Fatalf("dim %d pos %d pair %d: table (%v, %v), want (%v, %v)", c.dim, pos, i, tb.cs[pos*c.dim+i], tb.cs[pos*c.dim+i+1], cs, sn)
				}
			}
		}
	}
}
