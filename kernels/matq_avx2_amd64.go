//go:build amd64 && !purego

package kernels

// matQ8_0AVX2 and matQ4_0AVX2 are the Q8_0/Q4_0 products over int8
// activations (actQ8) in AVX2 + FMA + F16C assembly (matq_avx2_amd64.s),
// llama.cpp's AVX2 recipe: per 32-block an exact integer dot from
// VPMADDUBSW (an unsigned by a signed byte: |w| and x with w's sign via
// VPSIGNB for Q8_0; the nibbles taken unsigned, 0..15, for Q4_0, the 8·Σx
// offset subtracted per lane from actQ8.c) and VPMADDWD, converted to
// float32 and scaled by the block's f16 weight scale (VCVTPH2PS, exact;
// ±Inf made NaN as quantScaleTable does) times the activation scale.
//
// Per output element (weight row r, input i) the operations and their
// order are fixed by cols alone, and are those of the archsimd kernels
// matQ8_0Fast and matQ4_0Fast (which the GOEXPERIMENT=simd tests compare
// bit for bit):
//
//	Q8_0: chains a0 (even blocks) and a1 (odd): a = fma(float32(L_b), dW·dX, a);
//	      result hsum8(a0 + a1)
//	Q4_0: one chain over pairs of blocks in actQ8.p's lane layout (an odd
//	      last block paired with an empty one): result hsum8(a)
//
// Every kernel below computes each output that way, so an output does not
// depend on n, on which kernel or tile computed it, or on the thread split.
//
// Shapes: decode (and any input left over from the tiles) takes rows r and
// r+h together (h about half the row range, farRows): two sequential weight
// streams in different pages, which the hardware prefetchers follow, and
// two or four independent FMA chains. Batches go by 1 row × 4 inputs: each
// weight block's |w| (Q8_0) or nibbles (Q4_0) and scale prepared once for
// four inputs, over blocks of rows that stay in L2 (rowBlock) while every
// input tile passes.
func matQ4_0AVX2(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if n <= 0 || lo >= hi {
		return
	}
	rb := nb * q4Blk
	np := (nb + 1) / 2
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	_, _, _ = xq.p[n*np*2*tile-1], xq.c[n*np*8-1], xq.d4[n*np*8-1]
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			q4AVX2Tile4(&dst[i*rows+r0], rows, &w[r0*rb], rb, r1-r0, &xq.p[i*np*2*tile], &xq.c[i*np*8], &xq.d4[i*np*8], np, nb)
		}
		for ; i < n; i++ {
			p, c, d := &xq.p[i*np*2*tile], &xq.c[i*np*8], &xq.d4[i*np*8]
			h := farRows(r1-r0, 2, rb)
			if h > 0 {
				q4AVX2RowsFar(&dst[i*rows+r0], &w[r0*rb], rb, h, p, c, d, nb, h*rb, 4*h)
			}
			for r := r0 + 2*h; r < r1; r++ {
				q4AVX2RowsFar(&dst[i*rows+r], &w[r*rb], rb, 1, p, c, d, nb, 0, 0)
			}
		}
	}
}

// q4AVX2RowsFar is q8AVX2RowsFar for Q4_0 over the input's pair data (p,
// c, d4: see actQ8).
//
//go:noescape
func q4AVX2RowsFar(dst *float32, w *byte, rb, nrows int, p *int8, c *int32, d4 *float32, nb, far, dfar int)

// q4AVX2Tile4 is q8AVX2Tile4 for Q4_0: input k's pair data at p + k·64·np
// bytes and c, d4 + k·8·np elements.
//
//go:noescape
func q4AVX2Tile4(dst *float32, rows int, w *byte, rb, nrows int, p *int8, c *int32, d4 *float32, np, nb int)
