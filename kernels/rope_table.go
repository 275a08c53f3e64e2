package kernels

import (
	"math"
	"sync/atomic"
)

// RoPE's angles depend only on (pos, i, ropeDim, base), yet each call
// computed them anew: a pow, a cos and a sin per pair, for q and k of every
// layer, 12% of a 15m prefill. ropeTables keeps, per (ropeDim, base), the
// cos/sin of every position seen so far, computed with ropeAngle's recipe
// (so the values, and RoPE's results, are bit-identical). A table is
// immutable once published; growing one publishes a new one (doubling), so
// readers take no lock and a warm decode loop never allocates. Four shapes
// cover any process that runs a few models; a fifth computes directly.
var ropeTables [4]atomic.Pointer[ropeTable]

// ropeMaxCached bounds a table (positions): 1 MiB per 128 rotary dims at 2048.
const ropeMaxCached = 1 << 17

type ropeTable struct {
	dim  int
	base uint32    // math.Float32bits(base)
	cs   []float32 // position p, pair i (even): cos at p*dim+i, sin at p*dim+i+1
}

func newRopeTable(dim int, base float32, positions int) *ropeTable {
	t := &ropeTable{dim: dim, base: math.Float32bits(base), cs: make([]float32, positions*dim)}
	for p := range positions {
		for i := 0; i < dim; i += 2 {
			t.cs[p*dim+i], t.cs[p*dim+i+1] = ropeAngle(int32(p), i, dim, base)
		}
	}
	return t
}

// ropeAngles returns the cos/sin pairs of position pos (ropeDim floats), or
// nil when no table serves it.
func ropeAngles(pos int32, ropeDim int, base float32) []float32 {
	if pos < 0 || pos >= ropeMaxCached || ropeDim == 0 {
		return nil
	}
	b := math.Float32bits(base)
	for k := range ropeTables {
		for {
			t := ropeTables[k].Load()
			if t == nil {
				ropeTables[k].CompareAndSwap(nil, newRopeTable(ropeDim, base, max(int(pos)+1, 512)))
				continue // reload: ours or a racing caller's
			}
			if t.dim != ropeDim || t.base != b {
				break // another shape's slot
			}
			if n := len(t.cs) / ropeDim; int(pos) < n {
				return t.cs[int(pos)*ropeDim : (int(pos)+1)*ropeDim]
			}
			grown := newRopeTable(ropeDim, base, min(ropeMaxCached, max(int(pos)+1, 2*len(t.cs)/ropeDim)))
			ropeTables[k].CompareAndSwap(t, grown)
		}
	}
	return nil
}
