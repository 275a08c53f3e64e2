package kernels

import "math"

func rmsNormGeneric(dst, x, weight []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += float32(v * v)
	}
	ss /= float32(len(x))
	ss += eps
	ss = 1 / float32(math.Sqrt(float64(ss)))
	dst = dst[:len(x)]
	weight = weight[:len(x)]
	for j, v := range x {
		dst[j] = weight[j] * (ss * v)
	}
}
