package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	kref "github.com/sluicehq/sluice/kernels/ref"
)

// RoPEScaledRows is bit-identical to ref.RoPEScaled row by row, and with
// every factor 1 it is RoPE (the same angle recipe).
func TestRoPEScaledMatchesRef(t *testing.T) {
	const heads, headDim, ropeDim = 3, 16, 16
	rng := rand.New(rand.NewPCG(1, 2))
	factors := make([]float32, ropeDim/2)
	ones := make([]float32, ropeDim/2)
	for i := range factors {
		factors[i] = 1 + 7*rng.Float32()
		ones[i] = 1
	}
	pos := []int32{0, 1, 7, 300, 4095}
	for _, style := range []kernels.RopeStyle{kernels.RopeAdjacent, kernels.RopeHalf} {
		x := make([]float32, len(pos)*heads*headDim)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		got := append([]float32(nil), x...)
		kernels.RoPEScaledRows(nil, got, pos, heads, headDim, ropeDim, 500000, factors, style)
		plain := append([]float32(nil), x...)
		kernels.RoPEScaledRows(nil, plain, pos, heads, headDim, ropeDim, 500000, ones, style)
		for r, p := range pos {
			want := append([]float32(nil), x[r*heads*headDim:(r+1)*heads*headDim]...)
			kref.RoPEScaled(want, p, heads, headDim, ropeDim, 500000, factors, style)
			unscaled := append([]float32(nil), x[r*heads*headDim:(r+1)*heads*headDim]...)
			kernels.RoPE(unscaled, p, heads, headDim, ropeDim, 500000, style)
			for i := range want {
				if math.Float32bits(got[r*heads*headDim+i]) != math.Float32bits(want[i]) {
					t.Fatalf("style %d pos %d [%d]: %v, ref %v", style, p, i, got[r*heads*headDim+i], want[i])
				}
				if math.Float32bits(plain[r*heads*headDim+i]) != math.Float32bits(unscaled[i]) {
					t.Fatalf("style %d pos %d [%d]: factors of 1 give %v, RoPE %v", style, p, i, plain[r*heads*headDim+i], unscaled[i])
				}
			}
		}
	}
}
