//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRoPEAdjacentAVX2 holds the assembly rotation to ropeGeneric's recipe
// over the same table angles, bit for bit (NaNs as NaNs), for head counts,
// strides and rotary widths around the vector width, positions across the
// table, and values with ±0, ±Inf, NaN, subnormals and huge magnitudes,
// checking that nothing past the rotated dims of each head changes.
// (TestRoPEVsRef goes through RoPE, whose four table slots its many shapes
// fill, so most of its calls take the generic path.)
func TestRoPEAdjacentAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(9, 10))
	specials := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-40, 3e38}
	for _, sh := range []struct{ heads, headDim, ropeDim int }{
		{1, 8, 8}, {3, 8, 8}, {2, 16, 8}, {4, 24, 16}, {12, 64, 64}, {2, 64, 32}, {5, 128, 128}, {3, 100, 96},
	} {
		for _, base := range []float32{10000, 500000} {
			tab := newRopeTable(sh.ropeDim, base, 600, nil)
			for _, pos := range []int32{0, 1, 7, 255, 599} {
				cs := tab.cs[int(pos)*sh.ropeDim : int(pos+1)*sh.ropeDim]
				x := make([]float32, sh.heads*sh.headDim+1)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 4)
					if r.IntN(10) == 0 {
						x[i] = specials[r.IntN(len(specials))]
					}
				}
				want := append([]float32(nil), x...)
				for i := 0; i < sh.ropeDim; i += 2 {
					c, s := cs[i], cs[i+1]
					for h := range sh.heads {
						v := want[h*sh.headDim:]
						v0, v1 := v[i], v[i+1]
						v[i] = float32(v0*c) - float32(v1*s)
						v[i+1] = float32(v0*s) + float32(v1*c)
					}
				}
				got := append([]float32(nil), x...)
				ropeAdjacentAVX2(&got[0], &cs[0], sh.heads, sh.headDim, sh.ropeDim)
				what := fmt.Sprintf("%+v base %v pos %d", sh, base, pos)
				for i := range want {
					g, w := got[i], want[i]
					if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
						t.Fatalf("%s: x[%d] = %v (%#08x), generic recipe %v (%#08x), from %v",
							what, i, g, math.Float32bits(g), w, math.Float32bits(w), x[i])
					}
				}
			}
		}
	}
}
