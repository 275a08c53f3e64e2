//go:build arm64 && !purego

package kernels

// quantizeBlocksNEON is quantizeBlockQ8 over the len(d) blocks of x into q
// and d, in NEON assembly (actq8_arm64.s) with the same bits: the same
// float32 amax (the largest |x| bit pattern, FABS then UMAX, which orders
// finite non-negative floats as their values and puts NaN and ±Inf above
// them), the same float32 scale amax/127, the same float64 reciprocal
// 127/amax and products (FCVTL to 2×float64, FMUL), round to nearest even
// (FCVTNS), NaN scale and zero values for a non-finite block, zero for an
// all-zero one. |x·id| ≤ 127 rounds to at most 127, so generic's clamp
// never acts and the narrowing (XTN) is exact.
func quantizeBlocksNEON(q []int8, d, x []float32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	_ = q[nb*tile-1]
	_ = x[nb*tile-1]
	q8QuantNEON(&q[0], &d[0], &x[0], nb)
}

//go:noescape
func q8QuantNEON(q *int8, d *float32, x *float32, nb int)
