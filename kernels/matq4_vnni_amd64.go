//go:build amd64 && !purego

package kernels

// The AVX-512 VNNI Q4_0 kernels (VPDPBUSD, which archsimd on Go 1.26 does
// not expose, so the panel tiles are assembly: matq4_vnni_amd64.s), for
// both weight layouts, in the one Q4_0 order of the AVX2 set
// (matq4_avx2_amd64.go):
//
//	acc = 0
//	for b := 0; b < nb; b++ {   // blocks in column order
//		s := Σ_{j in b} (nW(r,j) − 8)·qX(i,j)            // exact int32
//		acc = fma(float32(s), dW(r,b)·dX(i,b), acc)      // dW·dX one float32 product
//	}
//
// so the AVX2, AVX-512 and VNNI sets give a Q4_0 weight the same bits, as
// they give Q8_0 (the tests hold all of them to canonQ4_0).
//
// Panels (PanelQ4_0): a panel group (16 rows × 4 bytes, one 64-byte load)
// masked, and shifted then masked, gives two vectors of the 16 rows'
// unsigned nibbles (values 4g…4g+3 and 16+4g…16+4g+3), each multiplied by
// the input's 4 values there, broadcast: 8 VPDPBUSD per block and input
// for 16 rows, the nibbles unpacked once per block for a whole tile of
// inputs, the block's −8·Σx (actQ8.s4) starting the integer sum, then
// one convert, one multiply by the 16 scales and one FMA. Batches go by
// tiles of 8, 4 and 1 inputs over a block of panels that stays in L2
// (matPanel, as the Q8_0 panels); decode walks the panels front to back.
//
// Row-major: batches (n ≥ 4, the mmap tier's prefill) copy each row block
// into panels in scratch and run the same tiles (matQ4_0Rows); decode
// (and fewer than 4 inputs, and the Rows%16 rows after the last panel)
// takes rows r, r+h, r+2h and r+3h together (four far-apart streams), the
// four rows' 16-byte blocks as the lanes of one vector: two VPDPBUSD, the
// lane sums gathered, one FMA for the four rows per block. The rows left
// over take the AVX2 row kernel (q4AVX2Rows), whose bits are the same.

// matQ4_0VNNIPanel computes output rows [lo,hi) of a PanelQ4_0 weight (lo
// and hi on panel edges, or hi = rows).
func matQ4_0VNNIPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q4Blk, matQ4_0VNNI, q4VNNIPanels)
}

// matQ4_0VNNI computes output rows [lo,hi) of a row-major Q4_0 weight.
func matQ4_0VNNI(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQ4_0Rows(dst, w, xq, n, rows, cols, lo, hi, q4VNNIPanels, 4, q4VNNIRows4)
}

// q4VNNIPanels computes output rows [r0, r0+16·np) from the np panels at
// wp for every input: tiles of eight inputs, then four, then one at a time.
func q4VNNIPanels(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) {
	q4VNNIPanelsFrom(dst, rows, w, np, nb, xq, n, r0, 0)
}

// q4VNNIPanelsFrom is q4VNNIPanels for the inputs from i on (a group's
// first input: the AMX set hands over the inputs after its tiles).
func q4VNNIPanelsFrom(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0, i int) {
	xb, gw, wp := xq.blocks(), xq.gw, &w[0]
	s4 := xq.s4[:len(xq.sb)] // sb's extent, which matPanel checked
	for ; i+8 <= n; i += 8 {
		k := xq.majorAt(i, 0, nb)
		q4Panel8(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &s4[k], &xq.db[k], gw)
	}
	if i+4 <= n {
		k := xq.majorAt(i, 0, nb)
		q4Panel4(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &s4[k], &xq.db[k], gw)
		i += 4
	}
	for ; i < n; i++ {
		k := xq.majorAt(i, 0, nb)
		q4Panel1(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &s4[k], &xq.db[k], gw)
	}
}

// q4Panel8, q4Panel4 and q4Panel1 write dst[k·rows+16p+j] = row 16p+j of
// the np panels at w · input k, for the tile's 8, 4 or 1 inputs k, whose
// block b is at xb+b·32n (inputs side by side; n is actQ8.gw, the inputs
// of a group), s4 (actQ8.s4: −8·Σ of the block) and db at +b·4n.
//
//go:noescape
func q4Panel8(dst *float32, rows int, w *byte, np, nb int, xb *int8, s4 *int32, db *float32, n int)

//go:noescape
func q4Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, s4 *int32, db *float32, n int)

//go:noescape
func q4Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, s4 *int32, db *float32, n int)

// q4VNNIRows4 writes dst[r] = row r of w · input and, dfar, 2·dfar and
// 3·dfar bytes on, the same for the rows far, 2·far and 3·far bytes after
// row r, for r in [0,nrows) (rows rb bytes apart, nb blocks each); the
// input's block b at x+b·xs, its sb and db at +b·ss bytes; sc is
// quantScaleTable.
//
//go:noescape
func q4VNNIRows4(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int, sc *float32)
