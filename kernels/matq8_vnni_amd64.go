//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// The AVX-512 VNNI Q8_0 kernels, for both weight layouts (row-major as in
// the file, and PanelQ8_0 made by Repack), in assembly (archsimd on Go 1.26
// does not expose VPDPBUSD). Both give every output the same bits, the one
// order of this kernel set:
//
//	acc = 0
//	for b := 0; b < nb; b++ {   // blocks in column order
//		s := Σ_{j in b} qW(r,j)·qX(i,j)                 // exact int32
//		acc = fma(float32(s), dW(r,b)·dX(i,b), acc)      // dW·dX one float32 product
//	}
//
// with dW from the f16 scale (±Inf made NaN, quantScaleTable's rule) and
// dX, qX from actQ8. The integer sum is exact whatever its grouping, so the
// kernels may split it across lanes and chains freely; only the float chain
// is fixed, and it depends on cols alone (batch invariance), never on n, on
// the layout or on the thread split. The tiers test (ram: panels; mmap:
// row-major) relies on that.
//
// Panels: one VPDPBUSD multiplies a group (4 values) of 16 rows by the same
// 4 values of one input, broadcast from memory, so a block is 8 VPDPBUSD
// per input for 16 rows, plus a convert, a multiply by the 16 scales (one
// VCVTPH2PS per block for all inputs) and an FMA. Batches go by tiles of 8
// inputs (then 4, then 1), each tile over a block of panels that stays in
// L2 (rowBlock) while its activations stay in L1; decode (one input) walks
// the panels front to back, one sequential stream.
//
// Row-major: rows r and r+h together (two far-apart sequential streams,
// which the hardware prefetchers follow, as before panels), a 256-bit
// VPDPBUSD per row and block, the two rows' lanes summed into one vector,
// and one FMA per block for both rows. Used by the mmap tier, by streamed
// ssd layers, and for the Rows%16 rows after the last panel. Batches (n ≥
// 4, the mmap tier's prefill) copy each row block into panels in scratch
// and run the panel tiles over it, as the AVX2 set does: row by row, each
// input read the block again from L2 with one VPDPBUSD per 32 bytes, and a
// 7B Q8_0 mmap prefill ran at 4 tokens/s against the AVX2 set's 8.6 (one
// thread, both sets capped on the same Sapphire Rapids Xeon, one run).

// matQ8_0VNNI computes output rows [lo,hi) of a row-major Q8_0 weight.
func matQ8_0VNNI(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if lo >= hi {
		return
	}
	rb := nb * q8Blk
	xb := xq.blocks()
	// Everything the assembly touches, checked once.
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	last := xq.majorAt(n-1, nb-1, nb) // the largest index of the call
	_ = xb[(last+1)*tile-1]
	_ = xq.sb[last]
	_ = xq.db[last]
	if n >= 4 && hi-lo >= PanelRows { // whole panels from scratch, the rest by rows below
		lo = scratchPanels(tensor.Q8_0, dst, w, xq, n, rows, lo, hi, nb, rb, q8VNNIPanels)
	}
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo // no reuse to keep in L2: one pair of streams
	}
	xs, ss := xq.gw*tile, 4*xq.gw
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		for i := 0; i < n; i++ {
			k := xq.majorAt(i, 0, nb)
			h := farRows(r1-r0, 2, rb)
			if h > 0 {
				q8RowsFar(&dst[i*rows+r0], &w[r0*rb], rb, h, &xb[k*tile], &xq.sb[k], &xq.db[k], xs, ss, nb, h*rb, 4*h)
			}
			for r := r0 + 2*h; r < r1; r++ {
				q8RowsFar(&dst[i*rows+r], &w[r*rb], rb, 1, &xb[k*tile], &xq.sb[k], &xq.db[k], xs, ss, nb, 0, 0)
			}
		}
	}
}

// matQ8_0VNNIPanel computes output rows [lo,hi) of a PanelQ8_0 weight (lo
// and hi on panel edges, or hi = rows).
func matQ8_0VNNIPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q8Blk, matQ8_0VNNI, q8VNNIPanels)
}

// q8VNNIPanels computes output rows [r0, r0+16·np) from the np panels at
// wp for every input: tiles of eight inputs, then four, then one at a time.
func q8VNNIPanels(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) {
	q8VNNIPanelsFrom(dst, rows, w, np, nb, xq, n, r0, 0)
}

// q8VNNIPanelsFrom is q8VNNIPanels for the inputs from i on (a group's
// first input: the AMX set hands over the inputs after its tiles).
func q8VNNIPanelsFrom(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0, i int) {
	xb, gw, wp := xq.blocks(), xq.gw, &w[0]
	for ; i+8 <= n; i += 8 {
		k := xq.majorAt(i, 0, nb)
		q8Panel8(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
	if i+4 <= n {
		k := xq.majorAt(i, 0, nb)
		q8Panel4(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
		i += 4
	}
	for ; i < n; i++ {
		k := xq.majorAt(i, 0, nb)
		q8Panel1(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
}

// q8RowsFar writes dst[r] = row r of w · input and, dfar bytes on, the same
// for the row far bytes after row r, for r in [0,nrows) (rows rb bytes
// apart, nb blocks each); the input's block b at x+b·xs, its sb and db at
// +b·ss bytes. far = dfar = 0 computes a lone row (twice).
//
//go:noescape
func q8RowsFar(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int)

// q8Panel8, q8Panel4 and q8Panel1 write dst[k·rows+16p+j] = row 16p+j of
// the np panels at w · input k, for the tile's 8, 4 or 1 inputs k, whose
// block b is at xb+b·32n (inputs side by side; n is actQ8.gw, the inputs
// of a group), sb and db at +b·4n.
//
//go:noescape
func q8Panel8(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

//go:noescape
func q8Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

//go:noescape
func q8Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)
