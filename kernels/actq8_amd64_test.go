//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeBlocksAVX2 checks the assembly activation quantizer gives
// quantizeBlockQ8's bits (values and scales) on random blocks mixed with
// zeros, -0, subnormals, the largest finite values, ±Inf, NaN, all-zero
// blocks, and halfway cases of the rounding, at unaligned offsets.
func TestQuantizeBlocksAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 activation quantizer: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(11, 12))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-40, 1e-38, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 127, -127, 0.5, -63.5}
	for _, nb := range []int{1, 2, 3, 7, 64} {
		for off := range 4 {
			x := make([]float32, off+nb*tile)[off:]
			for b := 0; b < nb; b++ {
				blk := x[b*tile : (b+1)*tile]
				scale := float32(math.Pow(10, float64(r.IntN(80)-40)))
				for j := range blk {
					blk[j] = float32(r.NormFloat64()) * scale
					if r.IntN(6) == 0 {
						blk[j] = specials[r.IntN(len(specials))]
					}
				}
				switch r.IntN(5) {
				case 0:
					clear(blk)
				case 1: // halfway points: amax 127, values k+0.5
					for j := range blk {
						blk[j] = float32(r.IntN(254)-127) + 0.5
					}
					blk[0] = 127
				}
			}
			wq, gq := make([]int8, nb*tile), make([]int8, off+nb*tile)[off:]
			wd, gd := make([]float32, nb), make([]float32, nb)
			quantizeBlocks(wq, wd, x)
			quantizeBlocksAVX2(gq, gd, x)
			for b := range wd {
				if math.Float32bits(wd[b]) != math.Float32bits(gd[b]) {
					t.Fatalf("nb=%d off=%d block %d: scale %v (%#x), want %v (%#x)", nb, off, b, gd[b], math.Float32bits(gd[b]), wd[b], math.Float32bits(wd[b]))
				}
			}
			for j := range wq {
				if wq[j] != gq[j] {
					t.Fatalf("nb=%d off=%d value %d (x=%v): %d, want %d", nb, off, j, x[j], gq[j], wq[j])
				}
			}
		}
	}
}
