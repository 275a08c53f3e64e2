//go:build amd64 && !purego

package kernels

// quantizeBlocksAVX2 is quantizeBlockQ8 over the len(d) blocks of x into q
// and d, in AVX2 assembly with the same bits: the same float32 amax (the
// largest |x| bit pattern, which orders finite non-negative floats as their
// values and puts NaN and ±Inf above them), the same float32 scale amax/127,
// the same float64 reciprocal, products and round-to-even, NaN scale and
// zero values for a non-finite block, zero for an all-zero one. The scalar
// loop was 15% of a 15m Q8_0 prefill on the avx2 set.
func quantizeBlocksAVX2(q []int8, d, x []float32) {
	nb := len(d)
	if nb == 0 {
		return
	}
	_ = q[nb*tile-1]
	_ = x[nb*tile-1]
	q8QuantBlocks(&q[0], &d[0], &x[0], nb)
}

//go:noescape
func q8QuantBlocks(q *int8, d *float32, x *float32, nb int)
