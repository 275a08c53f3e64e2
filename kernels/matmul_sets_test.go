package kernels_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// isaSets are the caps TestKernelSets runs under, widest first (avx512,
// avx2, generic on amd64; neon-dotprod, neon, generic on arm64).
var isaSets = kernels.ISASets()

// useSet reselects the kernels under cap set for the rest of t (restored
// by Cleanup) and skips t when this build or CPU has no kernels of that
// level: the skip says so, and TestImpl's log line lists what ran.
func useSet(t *testing.T, set string) {
	t.Helper()
	restore, err := kernels.SetISA(set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(restore)
	got := strings.TrimSuffix(kernels.Impl(), "+archsimd")
	if !strings.HasPrefix(got, set) {
		t.Skipf("SKIP %s kernels: not in this build or CPU (SLUICE_ISA=%s selects %q)", set, set, kernels.Impl())
	}
}

// TestKernelSets runs every matrix kernel set this build and CPU have (on
// an AVX-512 machine the AVX2 and generic sets too, on a dot-product Arm
// core the plain NEON and generic ones) against ref: bit for
// bit on the generic set, within close_test.go's tolerance on the others,
// over awkward shapes (lengths off the vector width, one row, odd counts),
// special values (NaN, ±Inf, subnormal, huge; raw weight bits with NaN and
// Inf scales) and unaligned weight, input and output slices, with guards
// around the output. And batch invariance: each row of an n-row MatMul,
// at every thread count and row-block size, is bit-identical to a MatVec
// of that row alone.
func TestKernelSets(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	for _, set := range isaSets {
		t.Run(set, func(t *testing.T) {
			useSet(t, set)
			for _, dt := range dtypes {
				t.Run(dt.String(), func(t *testing.T) {
					r := newRand(t)
					cols := []int{1, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 200}
					if dt.BlockSize() > 1 {
						cols = []int{32, 64, 96, 160, 288}
					}
					for _, c := range cols {
						for _, rows := range []int{1, 3, 4, 5, 9, 17} {
							for _, tc := range []struct {
								mode weightMode
								k    kind
								off  int
							}{{encoded, normal, 0}, {encoded, special, 1}, {rawBits, normal, 3}} {
								what := fmt.Sprintf("%d×%d %s/%s off=%d", rows, c, tc.mode, tc.k, tc.off)
								checkSet(t, what, pools, makeWeight(r, dt, rows, c, tc.off, tc.mode), vec(r, 17*c+tc.off, tc.k)[tc.off:])
							}
						}
					}
				})
			}
		})
	}
}

// checkSet compares MatMul with w on the n = len(x)/w.Cols inputs x
// against ref, then every n, pool and row block against MatVec.
func checkSet(t *testing.T, what string, pools []*kernels.Pool, w kernels.Weight, x []float32) {
	t.Helper()
	rows, cols := w.Rows, w.Cols
	n := len(x) / cols
	want := make([]float32, n*rows)
	ref.MatMul(want, w, x, n)
	single := make([]float32, n*rows)
	for i := 0; i < n; i++ {
		buf, dst := guarded(rows, 1)
		kernels.MatVec(nil, dst, w, x[i*cols:(i+1)*cols])
		checkGuard(t, buf, 1, rows)
		copy(single[i*rows:], dst)
	}
	requireMatRef(t, what, w, x, n, want, single)
	for _, blk := range []int{0, 3 * cols} {
		restore := func() {}
		if blk > 0 {
			restore = setRowBlockBytes(blk)
		}
		for k, p := range pools {
			ms := []int{2, 5, n}
			if p == nil {
				ms = []int{1, 2, 3, 4, 5, 6, 7, 8, 13, n}
			}
			for _, m := range ms {
				buf, dst := guarded(m*rows, 3)
				kernels.MatMul(p, dst, w, x, m)
				checkGuard(t, buf, 3, m*rows)
				requireSame(t, fmt.Sprintf("%s n=%d pool=%d block=%d vs MatVec", what, m, k, blk), single[:m*rows], dst)
			}
		}
		restore()
	}
}
