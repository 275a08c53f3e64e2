//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFloatAVX2MatchesArchsimd checks the AVX2 assembly F32/F16/BF16
// kernels bit for bit against the archsimd AVX2 kernels where their chains
// coincide (cols a multiple of 8: the same 8-lane FMA chain and hsum8; for
// other cols the assembly's masked last step and archsimd's zero-padded one
// put the tail in different lanes, and TestKernelSets checks both against
// ref), over decode and every tile remainder, sub-ranges, small row blocks
// and special values.
func TestFloatAVX2MatchesArchsimd(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 float assembly: CPU lacks AVX2+FMA+F16C")
	}
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	pairs := []struct {
		name      string
		asm, simd matKernel
		weight    func(r *rand.Rand, rows, cols, off int, special bool) []byte
		size      int
	}{
		{"f32", matF32AVX2Asm, matF32AVX2, f32Weight, 4},
		{"f16", matF16AVX2Asm, matF16AVX2, halfWeight, 2},
		{"bf16", matBF16AVX2Asm, matBF16AVX2, bf16Weight, 2},
	}
	for _, p := range pairs {
		for _, cols := range []int{8, 16, 24, 64, 288, 768} {
			t.Run(fmt.Sprintf("%s/cols=%d", p.name, cols), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(cols), uint64(p.size)))
				for _, rows := range []int{1, 2, 3, 7, 8, 9, 17, 33} {
					for _, n := range []int{1, 2, 3, 4, 5, 9} {
						special := (rows+n)%2 == 1
						w := p.weight(r, rows, cols, 0, special) // aligned: archsimd falls back to generic otherwise
						x := asmVec(r, n*cols, special)
						for _, blk := range []int{256 << 10, 3 * p.size * cols} {
							rowBlockBytes = blk
							for _, span := range [][2]int{{0, rows}, {rows / 3, rows}} {
								lo, hi := span[0], span[1]
								if lo >= hi {
									continue
								}
								want := runHalf(t, p.simd, w, x, n, rows, cols, lo, hi)
								got := runHalf(t, p.asm, w, x, n, rows, cols, lo, hi)
								for i := range want {
									if !sameBits(want[i], got[i]) {
										t.Fatalf("rows=%d n=%d [%d,%d) block=%d: dst[%d] = %v (%#08x), archsimd %v (%#08x)",
											rows, n, lo, hi, blk, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
									}
								}
							}
						}
					}
				}
			})
		}
	}
}
