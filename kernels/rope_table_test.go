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
	if ropeAngles(3, 6, 7) != nil && ropeAngles(3, 8, 10000) == nil {
		t.Error("a cached shape lost its table")
	}
}
