//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// The AVX2 Q8_0 kernels (AVX2 + FMA + F16C, no VNNI: what an AVX2-only
// x86 CPU has), for both weight layouts, in matq8_avx2_amd64.s. They give
// every output the VNNI set's order (matq8_vnni_amd64.go), so the AVX2, the
// AVX-512 (no VNNI) and the VNNI sets agree bit for bit on Q8_0, and a
// PanelQ8_0 weight gives the row-major weight's bits:
//
//	acc = 0
//	for b := 0; b < nb; b++ {   // blocks in column order
//		s := Σ_{j in b} qW(r,j)·qX(i,j)                 // exact int32
//		acc = fma(float32(s), dW(r,b)·dX(i,b), acc)      // dW·dX one float32 product
//	}
//
// The integer dot is llama.cpp's AVX2 one (VPMADDUBSW of |w| by x carrying
// w's sign, then VPMADDWD by ones): exact, so its grouping is free.
//
// Panels: a 32-byte half of a panel group is 8 rows' 4 values, so one
// VPSIGNB, VPMADDUBSW and VPMADDWD per input give 8 rows' partial dots, one
// per int32 lane (32 multiply-adds), with the weight's sign and magnitude
// made once for a tile of four inputs; the block ends with one convert,
// scale product and FMA for 8 rows. Batches go by tiles of 4 inputs over
// a block of panels that stays in L2 (rowBlock); decode walks the panels
// front to back (q8AVX2Panel1), one sequential stream.
//
// Row-major: decode takes rows r and r+h together (two far-apart streams),
// each block's lane dots summed to one value per row, one FMA per block
// for both. Batches (n ≥ 4, the mmap tier's prefill) copy each row block
// into panels in scratch and run the panel kernels over it: the same bits,
// and the panel kernels' speed at the cost of one pass over the block.

// matQ8_0AVX2 computes output rows [lo,hi) of a row-major Q8_0 weight.
func matQ8_0AVX2(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if n <= 0 || lo >= hi {
		return
	}
	rb := nb * q8Blk
	xb := xq.blocks()
	// Everything the assembly touches, checked once.
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	last := xq.majorAt(n-1, nb-1, nb) // the largest index of the call
	_ = xb[(last+1)*tile-1]
	_ = xq.db[last]
	if n >= 4 && hi-lo >= PanelRows { // whole panels from scratch, the rest by rows below
		lo = scratchPanels(tensor.Q8_0, dst, w, xq, n, rows, lo, hi, nb, rb, q8AVX2Panels)
	}
	xs, ss := xq.gw*tile, 4*xq.gw
	sc := &quantScaleTable()[0]
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo // no reuse to keep in L2: one pair of streams
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i++ {
			k := xq.majorAt(i, 0, nb)
			h := farRows(r1-r0, 2, rb)
			if h > 0 {
				q8AVX2Rows(&dst[i*rows+r0], &w[r0*rb], rb, h, &xb[k*tile], &xq.db[k], xs, ss, nb, h*rb, 4*h, sc)
			}
			for r := r0 + 2*h; r < r1; r++ {
				q8AVX2Rows(&dst[i*rows+r], &w[r*rb], rb, 1, &xb[k*tile], &xq.db[k], xs, ss, nb, 0, 0, sc)
			}
		}
	}
}

// matQ8_0AVX2Panel computes output rows [lo,hi) of a PanelQ8_0 weight (lo
// and hi on panel edges, or hi = rows).
func matQ8_0AVX2Panel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q8Blk, matQ8_0AVX2, q8AVX2Panels)
}

// q8AVX2Panels computes output rows [r0, r0+16·np) from the np panels at
// wp for every input: tiles of four inputs (never across an actQ8 group:
// gw is 8 or n), then one at a time.
func q8AVX2Panels(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int) {
	xb, gw := xq.blocks(), xq.gw
	i := 0
	for ; i+4 <= n && i%gw+4 <= gw; i += 4 {
		k := xq.majorAt(i, 0, nb)
		q8AVX2Panel4(&dst[i*rows+r0], rows, &wp[0], np, nb, &xb[k*tile], &xq.db[k], gw)
	}
	for ; i < n; i++ {
		k := xq.majorAt(i, 0, nb)
		q8AVX2Panel1(&dst[i*rows+r0], rows, &wp[0], np, nb, &xb[k*tile], &xq.db[k], gw)
	}
}

// q8AVX2Panel4 writes dst[k·rows+16p+j] = row 16p+j of the np panels at w ·
// input k for k = 0…3, input k's block b at xb+b·32n+32k (n is actQ8.gw)
// and its scale at db+b·n+k.
//
//go:noescape
func q8AVX2Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, n int)

// q8AVX2Panel1 is q8AVX2Panel4 for one input.
//
//go:noescape
func q8AVX2Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, n int)

// q8AVX2Rows writes dst[r] = row r of w · input and, dfar bytes on, the
// same for the row far bytes after row r, for r in [0,nrows) (rows rb
// bytes apart, nb blocks each); the input's block b at x+b·xs, its scale
// at +b·ss bytes; sc is quantScaleTable. far = dfar = 0 computes a lone
// row (twice).
//
//go:noescape
func q8AVX2Rows(dst *float32, w *byte, rb, nrows int, x *int8, db *float32, xs, ss, nb, far, dfar int, sc *float32)
