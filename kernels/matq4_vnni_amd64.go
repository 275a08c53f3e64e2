//go:build amd64 && !purego

package kernels

// matQ4_0VNNIPairs is matQ4_0Fast with the integer dot product on AVX-512 VNNI
// (VPDPBUSD, in matq4_vnni_amd64.s): archsimd on Go 1.26 does not expose
// VPDPBUSD, so the inner loops are assembly. It needs AVX512F/BW/VL/VNNI
// (and F16C, implied on every AVX-512 CPU).
//
// Every output is bit-identical to matQ4_0Fast's (NaN payloads aside: Go
// fixes no NaN payload, and matQ4_0Fast's own differ between its 1- and
// 4-input paths, whose compiled operand orders differ). Per output (weight
// row r, input i) the operation order is the same chain over pairs of blocks
// in actQ8.p's lane layout:
//
//	L = Σ nibble·x − c                 (exact int32: VPSUBD, VPDPBUSD ×2)
//	a = fma(float32(L), dw·d4, a)       (dw·d4 one float32 product)
//	result = hsum8(a)
//
// with the weight scales exactly matQ4_0Fast's: quantScaleTable's values
// (f16 → float32, ±Inf → NaN), looked up in the table by the tile kernel and
// computed by VCVTPH2PS (exact) plus VFIXUPIMMPS (±Inf → NaN) in the row
// kernel, whichever measured faster there. An odd last block is paired with
// an empty one (bytes and scale 0), as q4Weights does. VPDPBUSD's int32 lanes
// never overflow: a lane sums 8 products of at most 15·128.
//
// Shape: for n ≥ 4 the inputs go by in tiles of four, each tile walking a
// block of weight rows (rowBlock, as matQ4_0Fast, rounded down to whole
// tiles) three rows at a time: each pair of weight blocks is unpacked once
// for 12 outputs, and the tile's activations stay in L1. Leftover inputs
// (n mod 4, and every input when n < 4) and the last rows of a block take the
// row kernel, one row at a time. Decode (n = 1) takes rows r and r+h
// together (q4VNNIRowsFar): two chains, two far-apart weight streams.
//
// The assembly trusts its pointers: this function checks every slice once,
// against the full extent the kernels touch.
func matQ4_0VNNIPairs(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
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
	npf, odd := nb/2, nb%2
	// Index expressions first: a slice expression may reach past len into
	// cap without panicking.
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1] // the last output written (the first is dst[lo])
	_, _, _ = xq.p[n*np*2*tile-1], xq.c[n*np*8-1], xq.d4[n*np*8-1]
	w = w[lo*rb : hi*rb] // every weight row read
	ps := xq.p[:n*np*2*tile]
	cs := xq.c[:n*np*8]
	ds := xq.d4[:n*np*8]
	xs := np * 8 // c and d4 elements per input; p has 8·xs bytes per input

	if n == 1 {
		// Rows r and r+h together: two chains, two far-apart streams.
		h := farRows(hi-lo, 2, rb)
		if h > 0 {
			q4VNNIRowsFar(&w[0], h*rb, h, &ps[0], &cs[0], &ds[0], npf, odd, &dst[lo], 4*h)
		}
		if 2*h < hi-lo {
			q4VNNIRows(&w[2*h*rb], rb, hi-lo-2*h, &ps[0], &cs[0], &ds[0], npf, odd, &dst[lo+2*h])
		}
		return
	}
	const tileRows, tileInputs = 3, 4
	sc := &quantScaleTable()[0]
	step := rowBlock(rb)
	if step > tileRows {
		step -= step % tileRows
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+tileInputs <= n; i += tileInputs {
			r := r0
			for ; r+tileRows <= r1; r += tileRows {
				q4VNNITile(&w[(r-lo)*rb], rb, &ps[i*8*xs], &cs[i*xs], &ds[i*xs], 4*xs, npf, odd, &dst[i*rows+r], 4*rows, sc)
			}
			if r < r1 {
				for k := i; k < i+tileInputs; k++ {
					q4VNNIRows(&w[(r-lo)*rb], rb, r1-r, &ps[k*8*xs], &cs[k*xs], &ds[k*xs], npf, odd, &dst[k*rows+r])
				}
			}
		}
		for ; i < n; i++ {
			q4VNNIRows(&w[(r0-lo)*rb], rb, r1-r0, &ps[i*8*xs], &cs[i*xs], &ds[i*xs], npf, odd, &dst[i*rows+r0])
		}
	}
}

// q4VNNITile computes the 12 outputs of weight rows w, w+rb, w+2rb (each npf
// full pairs of blocks, then one odd block when odd = 1) against four inputs
// whose actQ8 pair data start at p, c, d and lie xs bytes of c (2·xs of p)
// apart, storing row m of input k at dst + k·ds + 4m bytes. sc is
// quantScaleTable.
//
//go:noescape
func q4VNNITile(w *byte, rb int, p *int8, c *int32, d *float32, xs, npf, odd int, dst *float32, ds int, sc *float32)

// q4VNNIRowsFar computes rows r and r+far/rb (far bytes apart) for r in
// [0,nr), storing row r at dst[r] and the other at dst[r]+dfar bytes.
//
//go:noescape
func q4VNNIRowsFar(w *byte, far, nr int, p *int8, c *int32, d *float32, npf, odd int, dst *float32, dfar int)

// q4VNNIRows computes nr consecutive weight rows (npf full pairs of blocks,
// then one odd block when odd = 1; rb bytes each) against one input, storing
// row m at dst[m].
//
//go:noescape
func q4VNNIRows(w *byte, rb, nr int, p *int8, c *int32, d *float32, npf, odd int, dst *float32)

// matQ4_0VNNIPanel computes output rows [lo,hi) of a PanelQ4_0 weight (lo
// and hi on panel edges, or hi = rows) with VPDPBUSD on 512-bit vectors,
// in the AVX2 set's one Q4_0 order (matq4_avx2_amd64.go, canonQ4_0): per
// (row, block) the exact Σ(nibble−8)·x, then acc = fma(float32(dot),
// dW·dX, acc) in block order. A panel group (16 rows × 4 bytes) masked
// and shifted gives two vectors of 16 rows' unsigned nibbles, each
// multiplied by an input's 4 values broadcast: 8 VPDPBUSD per block and
// input for 16 rows, the nibbles unpacked once per block for a tile of
// inputs, the block's −8·Σx (actQ8.sb/16) starting the integer sum. Tiles
// of 8, 4 and 1 inputs as the Q8_0 panels (q8VNNIPanels); the rows after
// the last panel go to the row-major kernel, which gives the same bits.
func matQ4_0VNNIPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q4Blk, matQ4_0VNNI, q4VNNIPanels)
}

// matQ4_0VNNI computes output rows [lo,hi) of a row-major Q4_0 weight in
// the same order: batches through panels made in scratch (matQ4_0Rows),
// decode and the rows after the last panel through the AVX2 row kernel.
func matQ4_0VNNI(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matQ4_0Rows(dst, w, xq, n, rows, cols, lo, hi, q4VNNIPanels)
}

// q4VNNIPanels computes output rows [r0, r0+16·np) from the np panels at
// wp for every input: tiles of eight inputs, then four, then one at a time.
func q4VNNIPanels(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) {
	xb, gw, wp := xq.blocks(), xq.gw, &w[0]
	i := 0
	for ; i+8 <= n; i += 8 {
		k := xq.majorAt(i, 0, nb)
		q4Panel8(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
	if i+4 <= n {
		k := xq.majorAt(i, 0, nb)
		q4Panel4(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
		i += 4
	}
	for ; i < n; i++ {
		k := xq.majorAt(i, 0, nb)
		q4Panel1(&dst[i*rows+r0], rows, wp, np, nb, &xb[k*tile], &xq.sb[k], &xq.db[k], gw)
	}
}

// q4Panel8, q4Panel4 and q4Panel1 write dst[k·rows+16p+j] = row 16p+j of
// the np panels at w · input k, for the tile's 8, 4 or 1 inputs k, whose
// block b is at xb+b·32n (inputs side by side; n is actQ8.gw, the inputs
// of a group), sb and db at +b·4n.
//
//go:noescape
func q4Panel8(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

//go:noescape
func q4Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)

//go:noescape
func q4Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)
