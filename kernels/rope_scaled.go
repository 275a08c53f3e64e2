package kernels

import (
	"fmt"
	"math"
)

// RoPEScaledRows is RoPERows with each pair's frequency divided by a factor:
// pair i (even i < ropeDim) turns by pos·freq(i)/factors[i/2], where freq is
// RoPE's. This is ggml's rope with freq_factors, which Llama 3.1 and later
// store as the rope_freqs tensor (1 for the high frequencies, up to the
// scaling factor for the low ones). The angle is computed as
//
//	freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
//	freq /= factors[i/2]
//	val := float32(pos) * freq
//	cos, sin := float32(math.Cos(float64(val))), float32(math.Sin(float64(val)))
//
// identically in kernels/ref (ref.RoPEScaled), and the pairs rotate as in
// RoPE. It runs on the caller's goroutine (p is accepted for symmetry with
// the other row kernels) and panics on the shapes RoPERows panics on or
// when len(factors) < ropeDim/2.
func RoPEScaledRows(p *Pool, x []float32, pos []int32, heads, headDim, ropeDim int, base float32, factors []float32, style RopeStyle) {
	n, d := len(pos), heads*headDim
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || heads < 0 || len(x) < n*d ||
		(style != RopeAdjacent && style != RopeHalf) || len(factors) < ropeDim/2 {
		panic(fmt.Sprintf("kernels: RoPEScaledRows: %d rows, len(x)=%d heads=%d headDim=%d ropeDim=%d style=%d len(factors)=%d",
			n, len(x), heads, headDim, ropeDim, style, len(factors)))
	}
	_ = p
	for r, ps := range pos {
		row := x[r*d : (r+1)*d]
		for i := 0; i < ropeDim; i += 2 {
			freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
			freq /= factors[i/2]
			val := float32(ps) * freq
			fcr, fci := float32(math.Cos(float64(val))), float32(math.Sin(float64(val)))
			a, b := i, i+1
			if style == RopeHalf {
				a, b = i/2, i/2+ropeDim/2
			}
			for h := range heads {
				v := row[h*headDim : (h+1)*headDim]
				v0, v1 := v[a], v[b]
				v[a] = float32(v0*fcr) - float32(v1*fci)
				v[b] = float32(v0*fci) + float32(v1*fcr)
			}
		}
	}
}
