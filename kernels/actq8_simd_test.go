//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"simd/archsimd"
)

// TestQuantizeBlockQ8AVX512 checks the vector quantizer gives exactly the
// scalar one's q and d on random, scaled, tiny, huge and non-finite blocks.
func TestQuantizeBlockQ8AVX512(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("CPU lacks AVX-512: the vector quantizer is not used")
	}
	r := rand.New(rand.NewPCG(1, 2))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, 1e-40, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 0.5, -0.5, 1.5, 2.5}
	for k := range 2000 {
		x := make([]float32, tile)
		scale := float32(math.Pow(10, float64(r.IntN(80)-40)))
		for j := range x {
			x[j] = float32(r.NormFloat64()) * scale
			if k%3 == 0 && r.IntN(6) == 0 {
				x[j] = specials[r.IntN(len(specials))]
			}
			if k%5 == 0 { // exact halves: the round-to-even cases
				x[j] = float32(r.IntN(255)-127) / 2
			}
		}
		want, got := make([]int8, tile), make([]int8, tile)
		dw := quantizeBlockQ8(want, x)
		dg := quantizeBlockQ8AVX512(got, x)
		if math.Float32bits(dw) != math.Float32bits(dg) && !(dw != dw && dg != dg) {
			t.Fatalf("block %d %v: d = %v, want %v", k, x, dg, dw)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("block %d %v: q mismatch (-scalar +vector):\n%s", k, x, diff)
		}
	}
}
