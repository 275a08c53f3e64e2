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
// each prefetched 1 KiB ahead (FAR8 in the .s file: the hardware
// prefetchers alone left a Zen 5 core at 21–23 GB/s from DRAM), then the
// leftover rows two at a time. Batches run register tiles with 12
// of the 16 Y registers as accumulators, over blocks of rows that stay in
// L2 (rowBlock): F32 3 rows × 4 inputs (three weight vectors, one input
// vector at a time: 7 loads per 12 FMAs), F16 and BF16 2 rows × 6 inputs
// (each weight vector converted once for 6 inputs: 2 conversions per 12
// FMAs, where the conversion competes with the FMAs for the same ports).
// Measured on a Sapphire Rapids core held to AVX2 against the earlier 2×4
// tile, 120 inputs, 110M shapes: F32 +6–15%, F16 +7–15%.
//
// The F32 tiles' row loop is in the assembly (f32AVX2Rows: one call per
// row block and input tile runs every row triple; F16/BF16 batches of
// widenMinN or more reach it through matWidenedAVX2). A call per triple
// cost about 35 cycles (the Go loop step, an indirect call through the ABI
// wrapper, the mask and pointer setup), 13% of a 288-wide 3×4 tile, and 5/7
// of a 15M model's product FLOPs are 288 wide. Each triple still runs the
// tile's own instructions, so no output changed; the 12 lane sums and the
// accumulator zeroing per triple remain. Measured on a Sapphire Rapids
// core held to AVX2, 128 inputs, medians of 6 alternating runs: 288 wide
// F32 +2–3%, F16/BF16 (widened) +4–6%, 768 and 2048 wide F32 unchanged
// (±1.5%), F16/BF16 +2–7%; a software prefetch of the next triple's rows
// measured no gain (the row block sits in L2) and was left out.
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

// avx2Tile is an R×C tile (R = avx2Shapes[k].rows): dst[c·dstStride/4 + r]
// = row r · input c for r < nr (1 ≤ nr ≤ R; the rows past nr are passed as
// the last real one again, computed and stored to its output with the same
// value) and c < C, rows at w0, w1, w2 (w2 unused when R = 2), input c at
// x + c·cols floats, cols ≥ 8.
type avx2Tile func(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

// avx2Shape is a weight kind's batched tiles: tiles[c] takes c inputs.
type avx2Shape struct {
	rows, cols int
	tiles      [7]avx2Tile
	pair       avx2Tile // the 2×1 tile for decode's leftover rows
}

var avx2Shapes = [3]avx2Shape{
	kindF32: {3, 4, [7]avx2Tile{1: f32AVX2Tile3x1, 2: f32AVX2Tile3x2, 3: f32AVX2Tile3x3, 4: f32AVX2Tile3x4}, f32AVX2Tile2x1},
	kindF16: {2, 6, [7]avx2Tile{1: f16AVX2Tile2x1, 2: f16AVX2Tile2x2, 3: f16AVX2Tile2x3, 4: f16AVX2Tile2x4,
		5: f16AVX2Tile2x5, 6: f16AVX2Tile2x6}, f16AVX2Tile2x1},
	kindBF16: {2, 6, [7]avx2Tile{1: bf16AVX2Tile2x1, 2: bf16AVX2Tile2x2, 3: bf16AVX2Tile2x3, 4: bf16AVX2Tile2x4,
		5: bf16AVX2Tile2x5, 6: bf16AVX2Tile2x6}, bf16AVX2Tile2x1},
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
	sh := &avx2Shapes[k]
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
			sh.pair(&dst[r], stride, row(r), row(r1), row(r1), &x[0], cols, r1-r+1)
		}
		return
	}
	if k != kindF32 && n >= widenMinN {
		matWidenedAVX2(k, dst, w, x, n, rows, cols, lo, hi)
		return
	}
	R, C := sh.rows, sh.cols
	step := max(R, rowBlock(rb)/R*R)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; {
			c := tileInputs(n-i, C)
			if k == kindF32 {
				f32AVX2Rows[c](&dst[i*rows+r0], stride, row(r0), uintptr(rb), &x[i*cols], cols, r1-r0)
				i += c
				continue
			}
			tile := sh.tiles[c]
			for r := r0; r < r1; r += R {
				last := min(r+R, r1) - 1
				tile(&dst[i*rows+r], stride, row(r), row(min(r+1, last)), row(min(r+2, last)), &x[i*cols], cols, last-r+1)
			}
			i += c
		}
	}
}

// widenMinN is the batch from which F16 and BF16 weights are widened to
// float32 once per row block and run through the F32 tiles, rather than
// converted in registers for every 6 inputs (the 2×6 tiles).
const widenMinN = 12

// widenFree is a free list of widening buffers (a buffered channel, not a
// sync.Pool, whose items the GC may drop, making calls allocate).
var widenFree = make(chan *[]float32, 8)

// matWidenedAVX2 is matFloatAVX2 for F16/BF16 weights (k) and n ≥
// widenMinN: each block of rows that stays in L2 (rowBlock of the float32
// rows) is converted to float32, exactly, by the tiles' own instruction,
// then the F32 3×4 tiles run over it. An output's chain is the F32 one over
// the same float32 weights, the same as the 2×C tiles' and the decode
// kernel's, so the result is bit for bit the same whichever path ran; it
// measured 5–8% faster than the 2×6 tiles at n = 128 (110M shapes,
// Sapphire Rapids held to AVX2). Below widenMinN the conversion, once per
// weight, is no longer small against the n/6 in-register ones it saves
// (a round threshold, not a measured crossover).
func matWidenedAVX2(k floatKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	sh := &avx2Shapes[kindF32]
	R, C := sh.rows, sh.cols
	step := max(R, rowBlock(4*cols)/R*R)
	var buf *[]float32
	select {
	case buf = <-widenFree:
	default:
		buf = new([]float32)
	}
	if len(*buf) < step*cols {
		*buf = make([]float32, step*cols)
	}
	f := *buf
	stride := uintptr(rows) * 4
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		src := unsafe.Pointer(&w[r0*2*cols])
		if k == kindF16 {
			widenF16AVX2(&f[0], src, (r1-r0)*cols)
		} else {
			widenBF16AVX2(&f[0], src, (r1-r0)*cols)
		}
		for i := 0; i < n; {
			c := tileInputs(n-i, C)
			f32AVX2Rows[c](&dst[i*rows+r0], stride, unsafe.Pointer(&f[0]), uintptr(4*cols), &x[i*cols], cols, r1-r0)
			i += c
		}
	}
	select {
	case widenFree <- buf:
	default:
	}
}

// tileInputs is how many of the left inputs the next tile of at most C
// takes: C, except that a short remainder (≤ C/2) is shared with the last
// full tile, as two tiles of about (C+left%C)/2. A 2×2 tile has 4 chains
// and leaves FMA slots empty, where two 2×4 tiles have 8 each (n = 128 at
// C = 6: 20 tiles of 6 and 2 of 4 instead of 21 of 6 and one of 2). Only
// the loop changes: every output's chain is the same in every tile.
func tileInputs(left, C int) int {
	if left <= C {
		return left
	}
	if rem := left % C; left < 2*C && rem <= C/2 {
		return (C + rem + 1) / 2
	}
	return C
}

// avx2Rows runs a 3×C tile (TILE3) over every row triple of the nrows ≥ 1
// rows at w, w+rowBytes, …, for inputs x, x+cols, … x+(C−1)·cols: dst[c·
// dstStride/4 + r] = row r · input c for r < nrows and c < C. The last
// triple is clamped as matFloatAVX2's loop over the tiles would clamp it
// (nr = the rows left, missing rows passed as the last real one), and each
// triple runs the tile's instructions, so every output has the tile's bits.
type avx2Rows func(dst *float32, dstStride uintptr, w unsafe.Pointer, rowBytes uintptr, x *float32, cols, nrows int)

// f32AVX2Rows[c] takes c inputs (the F32 3×c tiles, avx2Shapes[kindF32]).
var f32AVX2Rows = [5]avx2Rows{1: f32AVX2Rows3x1, 2: f32AVX2Rows3x2, 3: f32AVX2Rows3x3, 4: f32AVX2Rows3x4}

//go:noescape
func f32AVX2Rows3x1(dst *float32, dstStride uintptr, w unsafe.Pointer, rowBytes uintptr, x *float32, cols, nrows int)

//go:noescape
func f32AVX2Rows3x2(dst *float32, dstStride uintptr, w unsafe.Pointer, rowBytes uintptr, x *float32, cols, nrows int)

//go:noescape
func f32AVX2Rows3x3(dst *float32, dstStride uintptr, w unsafe.Pointer, rowBytes uintptr, x *float32, cols, nrows int)

//go:noescape
func f32AVX2Rows3x4(dst *float32, dstStride uintptr, w unsafe.Pointer, rowBytes uintptr, x *float32, cols, nrows int)

// The tiles (avx2Tile's contract).

//go:noescape
func f32AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile3x1(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile3x2(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile3x3(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f32AVX2Tile3x4(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x2(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x3(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x4(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x5(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func f16AVX2Tile2x6(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x1(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x2(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x3(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x4(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x5(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

//go:noescape
func bf16AVX2Tile2x6(dst *float32, dstStride uintptr, w0, w1, w2 unsafe.Pointer, x *float32, cols, nr int)

// The decode kernels: dst[0:8] = the rows at w, w+stride, …, w+7·stride
// (stride in elements, cols ≥ 8 elements each) times x.

//go:noescape
func f32AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)

//go:noescape
func f16AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)

//go:noescape
func bf16AVX2Far8(dst *float32, w unsafe.Pointer, x *float32, cols, stride int)

// fmaPeakAVX2 runs iters×12 independent register FMAs (benchmarks only:
// the peak the tiles are measured against).
//
//go:noescape
func fmaPeakAVX2(iters int)

// widenF16AVX2 and widenBF16AVX2 set dst[0:n] to the n weights at src as
// float32 (n ≥ 8).
//
//go:noescape
func widenF16AVX2(dst *float32, src unsafe.Pointer, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src unsafe.Pointer, n int)
