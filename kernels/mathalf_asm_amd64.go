//go:build goexperiment.simd && amd64 && !purego

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
	if n <= 0 || lo >= hi {
		return
	}
	// The assembly trusts its pointers: check everything it will touch once,
	// here, panicking as the Go kernels' own indexing would. Index, not
	// slice, expressions: a slice expression may reach past len into cap.
	_ = wh[hi*cols-1]
	_ = x[n*cols-1]
	_ = dst[(n-1)*rows+hi-1]
	wh = wh[lo*cols : hi*cols]
	stride := uintptr(rows) * 4

	// rowPtr is weight row r (lo ≤ r < hi) or, for a tile's missing rows,
	// the last real one again: the same chain computed twice, not stored.
	rowPtr := func(r, last int) *uint16 {
		return &wh[(min(r, last)-lo)*cols]
	}
	if n == 1 {
		// Decode: 8 rows at a time (8 chains, 8 weight streams), then
		// 4-row tiles for the rest.
		r := lo
		for ; r+8 <= hi; r += 8 {
			f16Dec8(&dst[r], rowPtr(r, r), &x[0], cols)
		}
		for ; r < hi; r += 4 {
			last := min(r+4, hi) - 1
			f16Tile4x1(&dst[r], stride, rowPtr(r, last), rowPtr(r+1, last), rowPtr(r+2, last), rowPtr(r+3, last),
				&x[0], cols, last-r+1)
		}
		return
	}
	// Blocks of rows stay in L2 while every input tile passes (rowBlock).
	step := max(4, rowBlock(2*cols)&^3)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i += 6 {
			tile := f16Tiles[min(6, n-i)]
			for r := r0; r < r1; r += 4 {
				last := min(r+4, r1) - 1
				tile(&dst[i*rows+r], stride, rowPtr(r, last), rowPtr(r+1, last), rowPtr(r+2, last), rowPtr(r+3, last),
					&x[i*cols], cols, last-r+1)
			}
		}
	}
}

// f16Tiles[C] is the 4×C tile.
var f16Tiles = [...]func(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int){
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

// f16Dec8 stores at dst[0:8] the 8 consecutive weight rows from w (row
// stride cols) times the one input x, in 8 chains at once: the decode
// kernel. Eight sequential weight streams measured fastest from DRAM (4 and
// 16 were 20–30% slower), with the next 8 rows prefetched in memory order
// (see d8loop).
//
//go:noescape
func f16Dec8(dst *float32, w *uint16, x *float32, cols int)
