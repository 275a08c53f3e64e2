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

// newRopeTable returns the table of positions [0, positions), taking the
// positions old (nil, or a table of the same shape) already holds from it:
// the values are a function of (pos, i, dim, base) alone, so copying them is
// computing them. Each pair's frequency is computed once for all positions
// (ropeFreq, the same float32 as ropeAngle's).
func newRopeTable(dim int, base float32, positions int, old *ropeTable) *ropeTable {
	t := &ropeTable{dim: dim, base: math.Float32bits(base), cs: make([]float32, positions*dim)}
	from := 0
	if old != nil {
		from = min(positions, len(old.cs)/dim)
		copy(t.cs, old.cs[:from*dim])
	}
	for i := 0; i < dim; i += 2 {
		freq := ropeFreq(i, dim, base)
		for p := from; p < positions; p++ {
			t.cs[p*dim+i], t.cs[p*dim+i+1] = ropeCosSin(int32(p), freq)
		}
	}
	return t
}

// ropeTableFor returns the table of (ropeDim, base) covering positions
// [0, n) (n ≤ ropeMaxCached), building or growing it as needed, or nil when
// every slot holds another shape.
func ropeTableFor(ropeDim int, base float32, n int) *ropeTable {
	b := math.Float32bits(base)
	for k := range ropeTables {
		for {
			t := ropeTables[k].Load()
			if t == nil {
				ropeTables[k].CompareAndSwap(nil, newRopeTable(ropeDim, base, max(n, 512), nil))
				continue // reload: ours or a racing caller's
			}
			if t.dim != ropeDim || t.base != b {
				break // another shape's slot
			}
			if len(t.cs)/ropeDim >= n {
				return t
			}
			grown := newRopeTable(ropeDim, base, min(ropeMaxCached, max(n, 2*len(t.cs)/ropeDim)), t)
			ropeTables[k].CompareAndSwap(t, grown)
		}
	}
	return nil
}

// ropeAngles returns the cos/sin pairs of position pos (ropeDim floats), or
// nil when no table serves it.
func ropeAngles(pos int32, ropeDim int, base float32) []float32 {
	if pos < 0 || pos >= ropeMaxCached || ropeDim == 0 {
		return nil
	}
	t := ropeTableFor(ropeDim, base, int(pos)+1)
	if t == nil {
		return nil
	}
	return t.cs[int(pos)*ropeDim : (int(pos)+1)*ropeDim]
}

// ropePrepareMax bounds the positions PrepareRoPE computes ahead: 1 MiB of
// table per 64 rotary dims (a model with a longer context grows its table
// by doubling as its sequences get there).
const ropePrepareMax = 4096

// PrepareRoPE computes the cos/sin table RoPE and RoPERows use for rotary
// dimension ropeDim and base over positions [0, min(positions, 4096)) now,
// so that a model's first batch does not build it: a model loader calls it
// with its context. It changes no result (the table holds the values RoPE
// computes otherwise) and does nothing for a shape already covered, or
// when the four table slots hold other shapes.
func PrepareRoPE(ropeDim int, base float32, positions int) {
	if ropeDim <= 0 || ropeDim%2 != 0 || positions <= 0 {
		return
	}
	ropeTableFor(ropeDim, base, min(positions, ropePrepareMax, ropeMaxCached))
}
