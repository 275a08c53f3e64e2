//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// requireSameKernel runs want and got over rows [lo,hi) into NaN-poisoned
// outputs and fails on the first output whose bits differ (NaN payloads
// aside) or on any write outside [lo,hi).
func requireSameKernel(t *testing.T, what string, want, got actKernel, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	t.Helper()
	a := make([]float32, n*rows)
	b := make([]float32, n*rows)
	poison := math.Float32frombits(0x7fbadbad)
	for i := range a {
		a[i], b[i] = poison, poison
	}
	want(a, w, xq, n, rows, cols, lo, hi)
	got(b, w, xq, n, rows, cols, lo, hi)
	for i := range a {
		if !sameBits(a[i], b[i]) || (i%rows < lo || i%rows >= hi) && math.Float32bits(b[i]) != 0x7fbadbad {
			t.Fatalf("%s: n=%d rows=%d cols=%d [%d,%d): out[input %d, row %d] = %v (%#08x), archsimd %v (%#08x)",
				what, n, rows, cols, lo, hi, i/rows, i%rows, b[i], math.Float32bits(b[i]), a[i], math.Float32bits(a[i]))
		}
	}
}

// TestQuantAVX2MatchesFast checks the AVX2 assembly Q8_0 and Q4_0 kernels
// bit for bit against the archsimd kernels matQ8_0Fast and matQ4_0Fast over
// even and odd block counts, every tile remainder of rows and inputs,
// sub-ranges, small row blocks, and special scales and activations (zero,
// subnormal, ±Inf and NaN scales; NaN/Inf activations; dW·dX overflow).
func TestQuantAVX2MatchesFast(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 Q8_0/Q4_0 assembly: CPU lacks AVX2+FMA+F16C")
	}
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	for _, dt := range []tensor.DType{tensor.Q4_0} {
		want, got := actKernel(matQ8_0Fast), actKernel(matQ8_0AVX2)
		if dt == tensor.Q4_0 {
			want, got = matQ4_0Fast, matQ4_0AVX2
		}
		for _, cols := range []int{32, 64, 96, 160, 288, 768, 2048} {
			t.Run(fmt.Sprintf("%v/cols=%d", dt, cols), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(cols), 77))
				for _, rows := range []int{1, 2, 3, 5, 8, 9, 33} {
					for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 17} {
						if cols >= 768 && n > 5 && rows > 3 {
							continue
						}
						special := (rows+n)%2 == 0
						var w []byte
						if dt == tensor.Q8_0 {
							w = randomQ8_0(r, rows, cols)
						} else {
							w = q4VNNIWeight(r, rows, cols, special, rows%3 == 2)
						}
						xq := q4VNNIActs(r, n, cols, special)
						if dt == tensor.Q8_0 { // the same values, Q8_0's layout
							xq.prepare(n, cols, dt)
							if q8Major {
								xq.major(cols/tile, 0, n)
							}
						}
						for _, blk := range []int{256 << 10, 3 * cols / tile * dt.BlockBytes()} {
							rowBlockBytes = blk
							what := fmt.Sprintf("special=%v block=%d", special, blk)
							requireSameKernel(t, what, want, got, w, xq, n, rows, cols, 0, rows)
							if rows > 2 {
								lo := 1 + r.IntN(rows-2)
								requireSameKernel(t, what, want, got, w, xq, n, rows, cols, lo, lo+1+r.IntN(rows-lo))
							}
						}
					}
				}
			})
		}
	}
}
