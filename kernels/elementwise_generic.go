package kernels

import "math"

func swiGLUGeneric(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	for i := range dst {
		g := gate[i]
		g *= 1 / (1 + float32(math.Exp(float64(-g))))
		dst[i] = g * up[i]
	}
}

func addGeneric(dst, a []float32) {
	a = a[:len(dst)]
	for i := range dst {
		dst[i] += a[i]
	}
}
