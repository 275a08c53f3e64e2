//go:build arm64 && !purego

package kernels

import (
	"math"
	"unsafe"
)

// matF32NEON, matF16NEON and matBF16NEON are the float-weight products in
// NEON assembly (matfloat_arm64.s). Weights are converted to float32
// exactly in registers (F16 by FCVTL, BF16 by placing its bits above 16
// zero bits). Per output (weight row, input) the operations and their order
// depend on cols alone:
//
//	c8 = cols rounded down to a multiple of 8
//	A, B: 4-lane FMA chains over elements 8i..8i+3 and 8i+4..8i+7, i < c8/8
//	s = ((A+B)[0] + (A+B)[1]) + ((A+B)[2] + (A+B)[3])
//	s += float32(w_j·x_j) for j = c8..cols−1, in Go
//
// so an output does not depend on n, on which tile computed it, or on the
// thread split. Rows shorter than 8 take the generic kernel.
//
// Decode (n = 1) runs 4 rows at a time (8 chains, one load of x for four
// rows), then the leftover rows one by one. Batches run tiles of 2 rows × 4
// inputs (16 chains in V16–V31: each weight vector loaded and converted once
// for four inputs, each input vector once for two rows) over blocks of rows
// that stay in L2 (rowBlock); leftover inputs take the decode kernels.
func matF32NEON(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matF32Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatNEON(kindF32, dst, w, x, n, rows, cols, lo, hi)
}

func matF16NEON(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatNEON(kindF16, dst, w, x, n, rows, cols, lo, hi)
}

func matBF16NEON(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matBF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatNEON(kindBF16, dst, w, x, n, rows, cols, lo, hi)
}

// floatKind is the weight element type of matFloatNEON.
type floatKind uint8

const (
	kindF32 floatKind = iota
	kindF16
	kindBF16
)

// neonFloat are one weight type's kernels (matfloat_arm64.s).
type neonFloat struct {
	k4x1 func(dst *float32, w unsafe.Pointer, rb uintptr, x *float32, c8 int)
	k1x1 func(dst *float32, w unsafe.Pointer, x *float32, c8 int)
	k2x4 func(dst *float32, dstStride uintptr, w unsafe.Pointer, rb uintptr, x *float32, xStride uintptr, c8 int)
}

var neonFloats = [3]neonFloat{
	kindF32:  {f32NEON4x1, f32NEON1x1, f32NEON2x4},
	kindF16:  {f16NEON4x1, f16NEON1x1, f16NEON2x4},
	kindBF16: {bf16NEON4x1, bf16NEON1x1, bf16NEON2x4},
}

func matFloatNEON(k floatKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if n <= 0 || lo >= hi {
		return
	}
	size := 4
	if k != kindF32 {
		size = 2
	}
	rb := size * cols
	c8 := cols &^ 7
	// The assembly trusts its pointers: everything it touches, checked
	// once (index expressions: a slice expression may reach into cap).
	_ = w[hi*rb-1]
	_ = x[n*cols-1]
	_ = dst[(n-1)*rows+hi-1]
	kn := &neonFloats[k]
	row := func(r int) unsafe.Pointer { return unsafe.Pointer(&w[r*rb]) }
	// vec runs input i against rows [r0,r1) with the decode kernels.
	vec := func(i, r0, r1 int) {
		r := r0
		for ; r+4 <= r1; r += 4 {
			kn.k4x1(&dst[i*rows+r], row(r), uintptr(rb), &x[i*cols], c8)
		}
		for ; r < r1; r++ {
			kn.k1x1(&dst[i*rows+r], row(r), &x[i*cols], c8)
		}
	}
	if n == 1 {
		vec(0, lo, hi)
	} else {
		stride := uintptr(rows) * 4
		step := max(2, rowBlock(rb)&^1)
		for r0 := lo; r0 < hi; r0 += step {
			r1 := min(r0+step, hi)
			i := 0
			for ; i+4 <= n; i += 4 {
				r := r0
				for ; r+2 <= r1; r += 2 {
					kn.k2x4(&dst[i*rows+r], stride, row(r), uintptr(rb), &x[i*cols], uintptr(4*cols), c8)
				}
				if r < r1 {
					for k := i; k < i+4; k++ {
						kn.k1x1(&dst[k*rows+r], row(r), &x[k*cols], c8)
					}
				}
			}
			for ; i < n; i++ {
				vec(i, r0, r1)
			}
		}
	}
	if c8 < cols {
		floatTails(k, dst, w, x, n, rows, cols, lo, hi, c8)
	}
}

// floatTails adds columns [c8, cols) to every output, in column order, as
// float32(w·x) terms (the conversion forbids the compiler an FMA).
func floatTails(k floatKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi, c8 int) {
	size := 4
	if k != kindF32 {
		size = 2
	}
	rb := size * cols
	var buf [8]float32
	tail := buf[:cols-c8]
	for r := lo; r < hi; r++ {
		wr := w[r*rb : (r+1)*rb]
		switch k {
		case kindF32:
			for j := range tail {
				tail[j] = math.Float32frombits(uint32(wr[4*(c8+j)]) | uint32(wr[4*(c8+j)+1])<<8 |
					uint32(wr[4*(c8+j)+2])<<16 | uint32(wr[4*(c8+j)+3])<<24)
			}
		case kindF16:
			decodeF16(tail, wr, c8)
		default:
			decodeBF16(tail, wr, c8)
		}
		for i := 0; i < n; i++ {
			s := dst[i*rows+r]
			for j, v := range tail {
				s += float32(v * x[i*cols+c8+j])
			}
			dst[i*rows+r] = s
		}
	}
}

//go:noescape
func f32NEON4x1(dst *float32, w unsafe.Pointer, rb uintptr, x *float32, c8 int)

//go:noescape
func f32NEON1x1(dst *float32, w unsafe.Pointer, x *float32, c8 int)

//go:noescape
func f32NEON2x4(dst *float32, dstStride uintptr, w unsafe.Pointer, rb uintptr, x *float32, xStride uintptr, c8 int)

//go:noescape
func f16NEON4x1(dst *float32, w unsafe.Pointer, rb uintptr, x *float32, c8 int)

//go:noescape
func f16NEON1x1(dst *float32, w unsafe.Pointer, x *float32, c8 int)

//go:noescape
func f16NEON2x4(dst *float32, dstStride uintptr, w unsafe.Pointer, rb uintptr, x *float32, xStride uintptr, c8 int)

//go:noescape
func bf16NEON4x1(dst *float32, w unsafe.Pointer, rb uintptr, x *float32, c8 int)

//go:noescape
func bf16NEON1x1(dst *float32, w unsafe.Pointer, x *float32, c8 int)

//go:noescape
func bf16NEON2x4(dst *float32, dstStride uintptr, w unsafe.Pointer, rb uintptr, x *float32, xStride uintptr, c8 int)
