//go:build amd64 && !purego

package kernels

// matQ8_0VNNI is matQ8_0Fast in assembly with AVX-512 VNNI (VPDPBUSD), which
// archsimd on Go 1.26 does not expose. It gives the same bits as matQ8_0Fast:
// the same integer block sums, the same float32 product of the two scales,
// the same fma chains (even blocks in the low half of a 512-bit accumulator,
// odd blocks in the high half) and the same final lane sum (hsum8 of
// even+odd).
//
// VPDPBUSD multiplies unsigned bytes by signed ones. The weights are made
// unsigned by flipping their top bit (w+128) and the activations stay signed,
// so a lane holds Σ(w+128)·x = Σw·x + 128·Σx; the 128·Σx term depends only on
// the input and is subtracted by starting the lane from actQ8.nc = −128·Σx,
// computed once per call. Per block and input that is one VPDPBUSD, a convert,
// a multiply (actQ8.dx is each lane's activation scale, laid out like nc) and
// an FMA, against five vector operations plus a scalar product and broadcast
// in matQ8_0Fast.
//
// Decode (n=1) walks rows r and r+h together (h half the range): two FMA
// chains and two sequential weight streams far enough apart to sit in
// different pages, which the hardware prefetchers follow (adjacent rows
// interleave within a page and they do not; see matq_simd_amd64.go). Batches go by
// tiles of 2 rows × 4 inputs: each weight pair is loaded and converted once
// for four inputs, each input's 64 bytes once for two rows; 26 of the 32 Z
// registers hold the tile. The rowBlock loop keeps a block of weight rows in
// L2 while every tile of inputs passes over it.
func matQ8_0VNNI(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	rb := nb * q8Blk
	// Everything the assembly touches, checked once.
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	_ = xq.q[n*cols-1]
	_ = xq.nc[n*cols/4-1]
	_ = xq.dx[n*cols/4-1]
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo // no reuse to keep in L2: one pair of streams
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			m := (r1 - r0) &^ 1
			if m > 0 {
				q8VNNI2x4(&dst[i*rows+r0], rows, &w[r0*rb], rb, m, &xq.q[i*cols], &xq.nc[i*cols/4], &xq.dx[i*cols/4], cols, nb)
			}
			if r := r0 + m; r < r1 {
				for k := i; k < i+4; k++ {
					q8VNNIRowsFar(&dst[k*rows+r], &w[r*rb], rb, 1, &xq.q[k*cols], &xq.nc[k*cols/4], &xq.dx[k*cols/4], nb, 0, 0)
				}
			}
		}
		for ; i < n; i++ {
			// Rows r and r+h together (two chains, two far-apart weight
			// streams), then a lone last row.
			h := farRows(r1-r0, 2, rb)
			if h > 0 {
				q8VNNIRowsFar(&dst[i*rows+r0], &w[r0*rb], rb, h, &xq.q[i*cols], &xq.nc[i*cols/4], &xq.dx[i*cols/4], nb, h*rb, 4*h)
			}
			for r := r0 + 2*h; r < r1; r++ {
				q8VNNIRowsFar(&dst[i*rows+r], &w[r*rb], rb, 1, &xq.q[i*cols], &xq.nc[i*cols/4], &xq.dx[i*cols/4], nb, 0, 0)
			}
		}
	}
}

// q8VNNIRowsFar writes dst[r] = row r of w · input and, dfar bytes on, the
// same for the row far bytes after row r, for r in [0,nrows) (rows rb bytes
// apart, nb blocks each). far = dfar = 0 computes a lone row (twice).
//
//go:noescape
func q8VNNIRowsFar(dst *float32, w *byte, rb, nrows int, x *int8, nc *int32, dx *float32, nb, far, dfar int)

// q8VNNI2x4 writes dst[i·rows+r] = row r of w · input i for r in [0,nrows)
// (nrows even) and i in 0..3, input i's x, nc and dx starting cols bytes
// after input i−1's.
//
//go:noescape
func q8VNNI2x4(dst *float32, rows int, w *byte, rb, nrows int, x *int8, nc *int32, dx *float32, cols, nb int)
