//go:build arm64 && !purego

package kernels

// The Q8_0/Q4_0 products over int8 activations (actQ8's q and d: llama.cpp's
// q8_0 for activations) in NEON assembly (matq_arm64.s). Per output (weight
// row r, input i) and 32-block b:
//
//	L_b = Σ_j qW(r,j)·qX(i,j)                          exact, int32
//	acc = fma(float32(L_b), dW_b·dX_b, acc)           b ascending, acc from 0
//
// dW_b is the block's f16 scale through quantScaleTable (±Inf made NaN, as
// on amd64). L_b is exact on both integer paths, SDOT ("neon-dotprod") and
// SMULL/SADALP ("neon"), and the float steps are the same, so the two sets
// give the same bits; and an output does not depend on n, on its tile or on
// the thread split. Q4_0's nibbles are unpacked to signed bytes (−8..7) in
// registers and dotted with the input's values j and j+16 in their natural
// order, so these kernels read only actQ8's q and d.
//
// Decode (n = 1) takes 4 rows at a time (each input block loaded once for
// four rows), then leftover rows one by one; batches take tiles of 2 rows ×
// 4 inputs over blocks of rows that stay in L2 (rowBlock), leftover inputs
// the decode kernels.
type neonQuant struct {
	k4x1 func(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)
	k1x1 func(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)
	k2x4 func(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)
}

var (
	q8DotProd = neonQuant{q8DotProd4x1, q8DotProd1x1, q8DotProd2x4}
	q4DotProd = neonQuant{q4DotProd4x1, q4DotProd1x1, q4DotProd2x4}
	q8NEON    = neonQuant{q8NEON4x1, q8NEON1x1, q8NEON2x4}
	q4NEON    = neonQuant{q4NEON4x1, q4NEON1x1, q4NEON2x4}
)

func matQ8_0DotProd(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQuantNEON(&q8DotProd, q8Blk, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ4_0DotProd(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQuantNEON(&q4DotProd, q4Blk, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ8_0NEON(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQuantNEON(&q8NEON, q8Blk, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ4_0NEON(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQuantNEON(&q4NEON, q4Blk, dst, w, xq, n, rows, cols, lo, hi)
}

// matQuantNEON computes outputs [lo,hi) of all n inputs with kq; blk is the
// weight block's byte length.
func matQuantNEON(kq *neonQuant, blk int, dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if n <= 0 || lo >= hi {
		return
	}
	rb := nb * blk
	// Everything the assembly touches, checked once (index expressions: a
	// slice expression may reach past len into cap).
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	_ = xq.q[n*cols-1]
	_ = xq.d[n*nb-1]
	tab := &quantScaleTable()[0]
	vec := func(i, r0, r1 int) {
		x, d := &xq.q[i*cols], &xq.d[i*nb]
		r := r0
		for ; r+4 <= r1; r += 4 {
			kq.k4x1(&dst[i*rows+r], &w[r*rb], uintptr(rb), x, d, nb, tab)
		}
		for ; r < r1; r++ {
			kq.k1x1(&dst[i*rows+r], &w[r*rb], x, d, nb, tab)
		}
	}
	if n == 1 {
		vec(0, lo, hi)
		return
	}
	stride := uintptr(rows) * 4
	step := max(2, rowBlock(rb)&^1)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			r := r0
			for ; r+2 <= r1; r += 2 {
				kq.k2x4(&dst[i*rows+r], stride, &w[r*rb], uintptr(rb), &xq.q[i*cols], uintptr(cols),
					&xq.d[i*nb], uintptr(4*nb), nb, tab)
			}
			if r < r1 {
				for k := i; k < i+4; k++ {
					kq.k1x1(&dst[k*rows+r], &w[r*rb], &xq.q[k*cols], &xq.d[k*nb], nb, tab)
				}
			}
		}
		for ; i < n; i++ {
			vec(i, r0, r1)
		}
	}
}

//go:noescape
func q8DotProd4x1(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q8DotProd1x1(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q8DotProd2x4(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)

//go:noescape
func q4DotProd4x1(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q4DotProd1x1(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q4DotProd2x4(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)

//go:noescape
func q8NEON4x1(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q8NEON1x1(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q8NEON2x4(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)

//go:noescape
func q4NEON4x1(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q4NEON1x1(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)

//go:noescape
func q4NEON2x4(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)
