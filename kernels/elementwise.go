package kernels

import "fmt"

// swiGLUImpl is llama2.c's FFN gate: g := gate[i]; g *= 1 / (1 + exp(-g)); dst[i] = g * up[i].
var swiGLUImpl = swiGLUGeneric

// SwiGLU sets dst = silu(gate) * up elementwise over len(dst) values. dst may
// be gate or up. It panics if gate or up is shorter than dst.
func SwiGLU(dst, gate, up []float32) {
	if len(gate) < len(dst) || len(up) < len(dst) {
		panic(fmt.Sprintf("kernels: SwiGLU: len(dst)=%d, len(gate)=%d, len(up)=%d", len(dst), len(gate), len(up)))
	}
	swiGLUImpl(dst, gate, up)
}

// addImpl is: for i := range dst { dst[i] += a[i] }
var addImpl = addGeneric

// Add sets dst += a elementwise over len(dst) values (the residual). It panics
// if a is shorter than dst.
func Add(dst, a []float32) {
	if len(a) < len(dst) {
		panic(fmt.Sprintf("kernels: Add: len(dst)=%d, len(a)=%d", len(dst), len(a)))
	}
	addImpl(dst, a)
}
