//go:build amd64 && !purego

package kernels

import "unsafe"

// matF32AVX2Asm, matF16AVX2Asm and matBF16AVX2Asm are the float-weight
// products in AVX2 + FMA + F16C assembly (matfloat_avx2_amd64.s). Every
// output is one 8-lane FMA chain over the row, a masked last step when cols
// is not a multiple of 8, then hsum8's lane sum; weights are converted to
// float32 exactly in registers (F16 by VCVTPH2PS, which archsimd lacks and
// which is what makes F16 cheap here). The chain depends on cols only, so an
// output does not depend on n, on its tile or on the thread split.
//
// Decode (n = 1) runs 8 rows far apart (rows r, r+h, …, r+7h, h about an
// eighth of the range: farRows), 8 chains and 8 sequential weight streams,
// then the leftover rows two at a time. Batches run tiles of 2 rows × C
// inputs (C ≤ 4: 8 of the 16 Y registers are accumulators), each weight
// vector loaded and converted once for C inputs and each input vector once
// for both rows, over blocks of rows that stay in L2 (rowBlock).
//
// Rows shorter than one vector (cols < 8) take the generic kernel: the
// masked last step reads the 8 elements ending at the row's end.
func matF32AVX2Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matF32Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatAVX2(kindF32, dst, w, x, n, rows, cols, lo, hi)
}

func matF16AVX2Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatAVX2(kindF16, dst, w, x, n, rows, cols, lo, hi)
}

func matBF16AVX2Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if cols < 8 {
		matBF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	matFloatAVX2(kindBF16, dst, w, x, n, rows, cols, lo, hi)
}

// floatKind is the weight element type of matFloatAVX2.
type floatKind uint8

const (
	kindF32 floatKind = iota
	kindF16
	kindBF16
)

// avx2Tile is a 2×C tile: dst[c·dstStride/4 + r] = row r · input c for
// r < nr (1 or 2; for nr = 1 w1 is w0 again) and c < C, input c at x +
// c·cols floats, cols ≥ 8.
type avx2Tile func(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

var avx2Tiles = [3][5]avx2Tile{
	kindF32:  {1: f32AVX2Tile2x1, 2: f32AVX2Tile2x2, 3: f32AVX2Tile2x3, 4: f32AVX2Tile2x4},
	kindF16:  {1: f16AVX2Tile2x1, 2: f16AVX2Tile2x2, 3: f16AVX2Tile2x3, 4: f16AVX2Tile2x4},
	kindBF16: {1: bf16AVX2Tile2x1, 2: bf16AVX2Tile2x2, 3: bf16AVX2Tile2x3, 4: bf16AVX2Tile2x4},
}

func matFloatAVX2(k floatKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	if n <= 0 || lo >= hi {
		return
	}
	size := 4
	if k != kindF32 {
		size = 2
	}
	rb := size * cols
	// The assembly trusts its pointers: everything it touches, checked
	// once (index expressions: a slice expression may reach into cap).
	_ = w[hi*rb-1]
	_ = x[n*cols-1]
	_ = dst[(n-1)*rows+hi-1]
	row := func(r int) unsafe.Pointer { return unsafe.Pointer(&w[r*rb]) }
	stride := uintptr(rows) * 4
	if n == 1 {
		if h := farRows(hi-lo, 8, rb); h > 0 {
			var sums [8]float32
			for r := lo; r < lo+h; r++ {
				// Direct calls: through a func value sums would escape
				// to the heap (decode must not allocate).
				switch k {
				case kindF32:
					f32AVX2Far8(&sums[0], row(r), &x[0], cols, h*cols)
				case kindF16:
					f16AVX2Far8(&sums[0], row(r), &x[0], cols, h*cols)
				default:
					bf16AVX2Far8(&sums[0], row(r), &x[0], cols, h*cols)
				}
				for j, v := range sums {
					dst[r+j*h] = v
				}
			}
			lo += 8 * h
		}
		for r := lo; r < hi; r += 2 {
			r1 := min(r+1, hi-1)
			avx2Tiles[k][1](&dst[r], stride, row(r), row(r1), &x[0], cols, r1-r+1)
		}
		return
	}
	step := max(2, rowBlock(rb)&^1)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i += 4 {
			tile := avx2Tiles[k][min(4, n-i)]
			for r := r0; r < r1; r += 2 {
				rr := min(r+1, r1-1)
				tile(&dst[i*rows+r], stride, row(r), row(rr), &x[i*cols], cols, rr-r+1)
			}
		}
	}
}

// The 2×C tiles (avx2Tile's contract).

//go:noescape
func f32AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile2x2(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile2x3(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile2x4(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x2(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x3(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x4(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x2(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x3(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x4(dst *float32, dstStride uintptr, w0, w1 unsafe.Pointer, x *float32, cols, nr int)

// The decode kernels: dst[0:8] = the rows at w, w+stride, …, w+7·stride
// (stride in elements, cols ≥ 8 elements each) times x.

//go:noescape
func f32AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)

//go:noescape
func f16AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)

//go:noescape
func bf16AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)
