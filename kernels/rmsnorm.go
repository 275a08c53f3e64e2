package kernels

import "fmt"

// rmsNormImpl is llama2.c's rmsnorm:
//
//	var ss float32
//	for _, v := range x { ss += float32(v * v) }
//	ss /= float32(len(x)); ss += eps; ss = 1 / float32(math.Sqrt(float64(ss)))
//	for j, v := range x { dst[j] = weight[j] * (ss * v) }
var rmsNormImpl = rmsNormGeneric

// RMSNorm normalizes one row: dst = x / sqrt(mean(x²)+eps) * weight, in
// llama2.c's operation order. dst may be x. It panics if dst or weight is
// shorter than x.
func RMSNorm(dst, x, weight []float32, eps float32) {
	if len(dst) < len(x) || len(weight) < len(x) {
		panic(fmt.Sprintf("kernels: RMSNorm: len(x)=%d, len(dst)=%d, len(weight)=%d", len(x), len(dst), len(weight)))
	}
	rmsNormImpl(dst, x, weight, eps)
}
