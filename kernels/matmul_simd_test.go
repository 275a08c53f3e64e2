//go:build goexperiment.simd && amd64 && !purego

package kernels_test

import (
	"fmt"
	"testing"

	"simd/archsimd"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// TestSIMDKernelSets runs every archsimd kernel set this CPU supports (the
// AVX2 set too on an AVX-512 machine) against ref within tolerance, and checks
// batch invariance: each row of an n-row MatMul, at every thread count, is
// bit-identical to a MatVec of that row alone.
func TestSIMDKernelSets(t *testing.T) {
	if !archsimd.X86.AVX2() || !archsimd.X86.FMA() {
		t.Skip("CPU lacks AVX2+FMA: no archsimd kernel set to test")
	}
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	sets := []string{kernels.Impl(), "avx2"}
	for _, set := range sets {
		t.Run(set, func(t *testing.T) {
			if set == "avx2" {
				defer kernels.UseAVX2()()
			}
			if kernels.Impl() != set {
				t.Fatalf("Impl() = %q, want %q", kernels.Impl(), set)
			}
			for _, dt := range dtypes {
				t.Run(dt.String(), func(t *testing.T) {
					r := newRand(t)
					for _, cols := range []int{32, 64, 96, 33, 17, 200, 512} {
						if cols%dt.BlockSize() != 0 {
							continue
						}
						for _, rows := range []int{1, 3, 4, 5, 9, 31} {
							w := makeWeight(r, dt, rows, cols, 0, encoded)
							const n = 17
							x := vec(r, n*cols, normal)
							want := make([]float32, n*rows)
							ref.MatMul(want, w, x, n)
							single := make([]float32, n*rows)
							for i := 0; i < n; i++ {
								kernels.MatVec(nil, single[i*rows:(i+1)*rows], w, x[i*cols:(i+1)*cols])
							}
							what := fmt.Sprintf("%d×%d", rows, cols)
							requireMatClose(t, what, w, x, n, want, single)
							// Row blocks of the default size and of a few rows
							// (crossing block edges), every input tile size and
							// remainder single-threaded, a few across pools.
							for _, blk := range []int{0, 3 * cols} {
								restore := func() {}
								if blk > 0 {
									restore = kernels.SetRowBlockBytes(blk)
								}
								for k, p := range pools {
									ms := []int{1, 2, 5, n}
									if p == nil {
										ms = []int{1, 2, 3, 4, 5, 6, 7, 8, n}
									}
									for _, m := range ms {
										buf, dst := guarded(m*rows, 2)
										kernels.MatMul(p, dst, w, x, m)
										checkGuard(t, buf, 2, m*rows)
										requireSame(t, fmt.Sprintf("%s n=%d pool=%d block=%d", what, m, k, blk), single[:m*rows], dst)
									}
								}
								restore()
							}
						}
					}
				})
			}
		})
	}
}
