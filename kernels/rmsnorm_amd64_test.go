//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNormRowsFast: rows normalized 16 at a time have the bits of the
// generic kernel's one row at a time (a decode step's), over widths with
// and without a partial last vector, row counts around 16, dst = x, and
// rows holding zeros, subnormals, huge values (ss overflowing to +Inf),
// ±Inf and NaN.
func TestRMSNormRowsFast(t *testing.T) {
	if !cpuAVX512 {
		t.Skip("SKIP avx512 rmsnorm: CPU lacks AVX-512 F/BW/VL/DQ")
	}
	defer func(v bool) { rmsNormRows16 = v }(rmsNormRows16)
	rmsNormRows16 = true
	r := rand.New(rand.NewPCG(7, 8))
	for _, d := range []int{1, 15, 16, 17, 64, 768, 1000} {
		for _, n := range []int{1, 15, 16, 17, 33, 48} {
			for _, alias := range []bool{false, true} {
				x := make([]float32, n*d)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(7)-3)))
					if r.IntN(50) == 0 {
						x[i] = []float32{0, 1e-42, 3e38, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[r.IntN(6)]
					}
				}
				if n > 2 {
					clear(x[d : 2*d]) // an all-zero row: ss = eps
				}
				w := make([]float32, d)
				for i := range w {
					w[i] = float32(r.NormFloat64())
				}
				const eps = 1e-5
				want := make([]float32, n*d)
				for k := range n {
					rmsNormGeneric(want[k*d:(k+1)*d], x[k*d:(k+1)*d], w, eps)
				}
				got := make([]float32, n*d+1)
				got[n*d] = 7
				src := x
				if alias {
					copy(got, x)
					src = got[:n*d]
				}
				lo := min(1, n-1) // a range not starting at row 0
				copy(got[:lo*d], want[:lo*d])
				if !rmsNormRowsFast(got, src, w, d, lo, n, eps) {
					t.Fatal("rmsNormRowsFast declined with the kernel installed")
				}
				what := fmt.Sprintf("d=%d n=%d alias=%v", d, n, alias)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("%s: out[%d] (row %d) = %v, generic %v", what, i, i/d, got[i], want[i])
					}
				}
				if got[n*d] != 7 {
					t.Fatalf("%s: wrote past the rows", what)
				}
			}
		}
	}
}
