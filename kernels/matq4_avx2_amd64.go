//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// The AVX2 Q4_0 kernels (AVX2 + FMA + F16C, no VNNI), for both weight
// layouts, in matq4_avx2_amd64.s. Per output (weight row r, input i) one
// order, whatever the layout, kernel, tile or thread split:
//
//	acc = 0
//	for b := 0; b < nb; b++ {   // blocks in column order
//		s := Σ_{j in b} (nW(r,j) − 8)·qX(i,j)            // exact int32
//		acc = fma(float32(s), dW(r,b)·dX(i,b), acc)      // dW·dX one float32 product
//	}
//
// the Q8_0 kernels' order (matq8_avx2_amd64.go) with Q4_0's nibbles. The
// integer dot takes the nibbles unsigned into VPMADDUBSW against the
// signed activations and adds the block's −8·Σx once (from actQ8.sb, the
// inputs in q4Major's block-major layout): exact, so its grouping is free.
// The VNNI set's Q4_0 kernels (matq4_vnni_amd64.go) keep this order, so
// the two sets give the same bits.
//
// Panels (PanelQ4_0): a 32-byte half of a panel group is 8 rows' 4 bytes;
// its low and high nibbles against the input's 4 values at 4g and 16+4g
// give 8 rows' partial dots in int16 lanes, the four groups summed there
// (no overflow: see the .s file) and widened once per block. Batches go by
// tiles of 4 inputs over a block of panels kept in L2 (rowBlock), the
// nibbles unpacked once for the tile; decode walks the panels front to
// back, one sequential stream.
//
// Row-major: decode takes rows r and r+h together (two far-apart streams),
// each block's dot summed to one value per row, one FMA per block for
// both. Batches (n ≥ 4: the mmap tier's prefill) copy each row block into
// panels in scratch and run the panel kernels over it: the same bits.

// matQ4_0AVX2 computes output rows [lo,hi) of a row-major Q4_0 weight.
func matQ4_0AVX2(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQ4_0Rows(dst, w, xq, n, rows, cols, lo, hi, q4AVX2Panels, 2, q4AVX2Rows)
}

// q4RowsKernel is q4AVX2Rows' signature: k rows far bytes apart at a time
// (k the kernel's stream count), for nrows starting rows.
type q4RowsKernel func(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int, sc *float32)

// matQ4_0Rows is the row-major Q4_0 kernel of a set whose panel tiles
// (the same bits as q4AVX2Panels) are panels and whose row kernel far
// takes k rows far apart at once (the same bits as q4AVX2Rows): batches
// go through panels made in scratch, the rest through far, and the rows
// it leaves through q4AVX2Rows one at a time.
func matQ4_0Rows(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int,
	panels func(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int), k int, far q4RowsKernel) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if n <= 0 || lo >= hi {
		return
	}
	rb := nb * q4Blk
	xb := xq.blocks()
	// Everything the assembly touches, checked once.
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	last := xq.majorAt(n-1, nb-1, nb) // the largest index of the call
	_ = xb[(last+1)*tile-1]
	_ = xq.sb[last]
	_ = xq.db[last]
	if n >= 4 && hi-lo >= PanelRows {
		lo = scratchPanels(tensor.Q4_0, dst, w, xq, n, rows, lo, hi, nb, rb, panels)
	}
	xs, ss := xq.gw*tile, 4*xq.gw
	sc := &quantScaleTable()[0]
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i++ {
			m := xq.majorAt(i, 0, nb)
			h := farRows(r1-r0, k, rb)
			if h > 0 {
				far(&dst[i*rows+r0], &w[r0*rb], rb, h, &xb[m*tile], &xq.sb[m], &xq.db[m], xs, ss, nb, h*rb, 4*h, sc)
			}
			for r := r0 + k*h; r < r1; r++ {
				q4AVX2Rows(&dst[i*rows+r], &w[r*rb], rb, 1, &xb[m*tile], &xq.sb[m], &xq.db[m], xs, ss, nb, 0, 0, sc)
			}
		}
	}
}

// matQ4_0AVX2Panel computes output rows [lo,hi) of a PanelQ4_0 weight (lo
// and hi on panel edges, or hi = rows).
func matQ4_0AVX2Panel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q4Blk, matQ4_0AVX2, q4AVX2Panels)
}

// q4AVX2Panels computes output rows [r0, r0+16·np) from the np panels at
// wp for every input: tiles of four inputs within an actQ8 group, then
// one at a time.
func q4AVX2Panels(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int) {
	xb, gw := xq.blocks(), xq.gw
	i := 0
	for ; i+4 <= n && i%gw+4 <= gw; i += 4 {
		k := xq.majorAt(i, 0, nb)
		q4AVX2Panel4(&dst[i*rows+r0], rows, &wp[0], np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
	for ; i < n; i++ {
		k := xq.majorAt(i, 0, nb)
		q4AVX2Panel1(&dst[i*rows+r0], rows, &wp[0], np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
}

// q4AVX2Panel4 writes dst[k·rows+16p+j] = row 16p+j of the np panels at w ·
// input k for k = 0…3, input k's block b at xb+b·32n+32k (n is actQ8.gw),
// its sb and db at +b·n+k.
//
//go:noescape
func q4AVX2Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

// q4AVX2Panel1 is q4AVX2Panel4 for one input.
//
//go:noescape
func q4AVX2Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

// q4AVX2Rows writes dst[r] = row r of w · input and, dfar bytes on, the
// same for the row far bytes after row r, for r in [0,nrows) (rows rb
// bytes apart, nb blocks each); the input's block b at x+b·xs, its sb and
// db at +b·ss bytes; sc is quantScaleTable. far = dfar = 0 computes a lone
// row (twice).
//
//go:noescape
func q4AVX2Rows(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int, sc *float32)
