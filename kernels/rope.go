package kernels

import "fmt"

// ropeImpl rotates, for each even i < ropeDim and each head, the pair
// (a, b) = (i, i+1) for RopeAdjacent or (i/2, i/2+ropeDim/2) for RopeHalf by
// the angle pos*freq(i), with the float recipe of ropeAngle:
//
//	v0, v1 := x[a], x[b]
//	x[a] = float32(v0*cos) - float32(v1*sin)
//	x[b] = float32(v0*sin) + float32(v1*cos)
var ropeImpl = ropeGeneric

// RoPE rotates one row of heads*headDim values in place by position pos. In each
// head only the first ropeDim dimensions (ropeDim even, ≤ headDim) are rotated,
// paired as style says; the rest are untouched. Frequencies follow llama2.c
// (freq = 1/base^(i/ropeDim) for even i), computed as
//
//	freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
//	val := float32(pos) * freq
//	cos, sin := float32(math.Cos(float64(val))), float32(math.Sin(float64(val)))
//
// identically in kernels/ref. It panics on an odd ropeDim, ropeDim > headDim,
// an unknown style or len(x) < heads*headDim.
func RoPE(x []float32, pos int32, heads, headDim, ropeDim int, base float32, style RopeStyle) {
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || heads < 0 || len(x) < heads*headDim ||
		(style != RopeAdjacent && style != RopeHalf) {
		panic(fmt.Sprintf("kernels: RoPE: len(x)=%d heads=%d headDim=%d ropeDim=%d style=%d",
			len(x), heads, headDim, ropeDim, style))
	}
	ropeImpl(x, pos, heads, headDim, ropeDim, base, style)
}
