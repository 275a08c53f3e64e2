//go:build amd64 && !purego

package kernels

// matF16Asm is matF16AVX512 in assembly (mathalf_amd64.s), bit for bit: every
// output is the same 16-lane chain
//
//	acc = fma(float32(W[r, j:j+16]), x[i, j:j+16], acc)   j = 0, 16, 32, …
//
// (a short last chunk zero-padded), then hsum16's lane-sum tree. The
// difference is the conversion: VCVTPH2PS turns 16 halves into float32 in one
// instruction, exactly (subnormals, ±Inf and NaN included), where archsimd,
// which lacks it, spends about eight integer and float operations per vector
// (halfToF32x16). With the conversion cheap the product is FMA- or
// memory-bound, so the tiles are built for that: 4 weight rows × C inputs,
// each weight vector converted once for C inputs and each x vector loaded
// once for 4 rows (C = 6 fills 24 of the 32 Z registers with accumulators).
//
// Only the loop order differs between n, tiles and threads, never one
// output's arithmetic, so a row's result does not depend on its batch.
func matF16Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	wh, ok := u16View(w)
	if !ok || cols == 0 { // unaligned or empty: never the case for mmap'd GGUF data
		matF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	if n == 1 {
		lo = farRows16(false, dst, wh, x, cols, lo, hi)
	}
	matTilesAsm(wh, 2, &f16Tiles, nil, dst, x, n, rows, cols, lo, hi)
}

// f16Tiles[C] is the 4×C tile (asmTile's contract).
var f16Tiles = [7]asmTile[uint16]{
	1: f16Tile4x1, 2: f16Tile4x2, 3: f16Tile4x3, 4: f16Tile4x4, 5: f16Tile4x5, 6: f16Tile4x6,
}

// The 4×C tiles (mathalf_amd64.s): for weight rows w0..w3 (cols halves
// each) and the C inputs x, x+cols, …, x+(C−1)·cols, they store
// dst[c·dstStride/4 + r] = row r · input c for r < nr (1 ≤ nr ≤ 4; rows past
// nr may repeat a real row and are computed but not stored). They require
// AVX-512 (F, BW, VL) and read exactly cols halves per row and cols floats
// per input.

//go:noescape
func f16Tile4x1(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func f16Tile4x2(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func f16Tile4x3(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func f16Tile4x4(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func f16Tile4x5(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func f16Tile4x6(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

// f16Far8 stores at dst[0:8] the dot products of the 8 weight rows w,
// w+stride, …, w+7·stride (stride in halves, cols halves each) with x: the
// decode kernel (FAR8 in tiles_amd64.h; farRows16 drives it).
//
//go:noescape
func f16Far8(dst *float32, w *uint16, x *float32, cols, stride int)
