package kernels

import "math"

func softmaxGeneric(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		if v > mx {
			mx = v
		}
	}
	var sum float32
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += e
	}
	for i := range x {
		x[i] /= sum
	}
}

func siluGeneric(x []float32) {
	for i, v := range x {
		x[i] = v * (1 / (1 + float32(math.Exp(float64(-v)))))
	}
}
