//go:build amd64 && !purego

package kernels

// matF32Asm and matBF16Asm are matF32AVX512 and matBF16AVX512 in assembly
// (matf32bf16_amd64.s), bit for bit, built like matF16Asm: every output is
// the same 16-lane chain
//
//	acc = fma(float32(W[r, j:j+16]), x[i, j:j+16], acc)   j = 0, 16, 32, …
//
// (a short last chunk zero-padded in weight and x), then hsum16's lane-sum
// tree. What changes is the loop order only. Decode (n = 1) runs 8 weight
// rows at once, 8 chains and 8 sequential weight streams, which is what keeps
// the memory system busy; archsimd's 4-row pass leaves bandwidth unused.
// Batches run 4 rows × C inputs (C ≤ 6: 24 of the 32 Z registers hold
// accumulators), each weight vector loaded (and, for BF16, converted) once
// for C inputs and each x vector once for 4 rows, over blocks of rows that
// stay in L2 (rowBlock). A row's result never depends on n, its tile or the
// thread split.
func matF32Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	wf, ok := f32View(w)
	if !ok || cols == 0 { // unaligned or empty: never the case for mmap'd GGUF data
		matF32Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	// F32 keeps adjacent rows with the sequential prefetch (f32Dec8): with
	// rows twice as long, far-apart rows measured 5% slower (110m decode).
	matTilesAsm(wf, 4, &f32Tiles, f32Dec8, dst, x, n, rows, cols, lo, hi)
}

// matBF16Asm: see matF32Asm. BF16 → float32 is exact (the bits shifted up
// 16), so converting in registers changes nothing.
func matBF16Asm(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	wh, ok := u16View(w)
	if !ok || cols == 0 { // unaligned or empty: never the case for mmap'd GGUF data
		matBF16Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	if n == 1 {
		lo = farRows16(true, dst, wh, x, cols, lo, hi)
	}
	matTilesAsm(wh, 2, &bf16Tiles, nil, dst, x, n, rows, cols, lo, hi)
}

// asmTile is a 4×C tile: for weight rows w0..w3 (cols elements each) and the
// C inputs x, x+cols, …, x+(C−1)·cols, it stores dst[c·dstStride/4 + r] =
// row r · input c for r < nr (1 ≤ nr ≤ 4; rows past nr may repeat a real row
// and are computed but not stored). Tiles require AVX-512 (F, BW, VL) and
// read exactly cols elements per row and cols floats per input.
type asmTile[E float32 | uint16] func(dst *float32, dstStride uintptr, w0, w1, w2, w3 *E, x *float32, cols, nr int)

// farRows16 runs f16Far8 (bf16Far8 when bf) over rows k, k+h, …, k+7h of
// [lo,hi) (h = (hi−lo)/8: eight weight streams far apart) and returns the
// first row it left, lo+8h. The calls are direct on purpose: through a func
// value the sums array would escape to the heap, an allocation per call
// (caught by decode's no-allocation test).
func farRows16(bf bool, dst []float32, wh []uint16, x []float32, cols, lo, hi int) int {
	h := farRows(hi-lo, 8, 2*cols)
	if h == 0 {
		return lo
	}
	_ = wh[hi*cols-1]
	_ = x[cols-1]
	_ = dst[hi-1]
	var sums [8]float32
	for k := lo; k < lo+h; k++ {
		if bf {
			bf16Far8(&sums[0], &wh[k*cols], &x[0], cols, h*cols)
		} else {
			f16Far8(&sums[0], &wh[k*cols], &x[0], cols, h*cols)
		}
		for j, v := range sums {
			dst[k+j*h] = v
		}
	}
	return lo + 8*h
}

// asmDec8 stores at dst[0:8] the 8 consecutive weight rows from w (row
// stride cols) times the one input x.
type asmDec8[E float32 | uint16] func(dst *float32, w *E, x *float32, cols int)

// matTilesAsm is the matKernel loop shared by F32, F16 and BF16 over the
// weight elements we (size bytes each).
func matTilesAsm[E float32 | uint16](we []E, size int, tiles *[7]asmTile[E], dec8 asmDec8[E],
	dst []float32, x []float32, n, rows, cols, lo, hi int) {
	if n <= 0 || lo >= hi {
		return
	}
	// The assembly trusts its pointers: check everything it will touch once,
	// here, panicking as the Go kernels' own indexing would. Index, not
	// slice, expressions: a slice expression may reach past len into cap.
	_ = we[hi*cols-1]
	_ = x[n*cols-1]
	_ = dst[(n-1)*rows+hi-1]
	we = we[lo*cols : hi*cols]
	stride := uintptr(rows) * 4

	// rowPtr is weight row r (lo ≤ r < hi) or, for a tile's missing rows,
	// the last real one again: the same chain computed twice, not stored.
	rowPtr := func(r, last int) *E {
		return &we[(min(r, last)-lo)*cols]
	}
	if n == 1 {
		r := lo
		for ; dec8 != nil && r+8 <= hi; r += 8 {
			dec8(&dst[r], rowPtr(r, r), &x[0], cols)
		}
		for ; r < hi; r += 4 {
			last := min(r+4, hi) - 1
			tiles[1](&dst[r], stride, rowPtr(r, last), rowPtr(r+1, last), rowPtr(r+2, last), rowPtr(r+3, last),
				&x[0], cols, last-r+1)
		}
		return
	}
	step := max(4, rowBlock(size*cols)&^3)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i += 6 {
			tile := tiles[min(6, n-i)]
			for r := r0; r < r1; r += 4 {
				last := min(r+4, r1) - 1
				tile(&dst[i*rows+r], stride, rowPtr(r, last), rowPtr(r+1, last), rowPtr(r+2, last), rowPtr(r+3, last),
					&x[i*cols], cols, last-r+1)
			}
		}
	}
}

var (
	f32Tiles = [7]asmTile[float32]{
		1: f32Tile4x1, 2: f32Tile4x2, 3: f32Tile4x3, 4: f32Tile4x4, 5: f32Tile4x5, 6: f32Tile4x6,
	}
	bf16Tiles = [7]asmTile[uint16]{
		1: bf16Tile4x1, 2: bf16Tile4x2, 3: bf16Tile4x3, 4: bf16Tile4x4, 5: bf16Tile4x5, 6: bf16Tile4x6,
	}
)

// The F32 tiles (asmTile's contract).

//go:noescape
func f32Tile4x1(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

//go:noescape
func f32Tile4x2(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

//go:noescape
func f32Tile4x3(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

//go:noescape
func f32Tile4x4(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

//go:noescape
func f32Tile4x5(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

//go:noescape
func f32Tile4x6(dst *float32, dstStride uintptr, w0, w1, w2, w3 *float32, x *float32, cols, nr int)

// The BF16 tiles (asmTile's contract).

//go:noescape
func bf16Tile4x1(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func bf16Tile4x2(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func bf16Tile4x3(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func bf16Tile4x4(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func bf16Tile4x5(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

//go:noescape
func bf16Tile4x6(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)

// f32Dec8 is the F32 decode kernel (asmDec8's contract).
//
//go:noescape
func f32Dec8(dst *float32, w *float32, x *float32, cols int)

// bf16Far8 is f16Far8 for BF16 weights.
//
//go:noescape
func bf16Far8(dst *float32, w *uint16, x *float32, cols, stride int)
