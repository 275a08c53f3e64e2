//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// matPanel is what the panel kernels' entry points share: output rows
// [lo,hi) of a panel weight of blk-byte blocks (lo and hi on panel edges,
// or hi = rows). The rows after the last whole panel are row-major and go
// to rowMajor; the panels go to tiles a row block at a time, a block of
// whole panels that stays in L2 (rowBlockBytes) while every input passes
// over it, or all of them at once for a single input, which reads each
// weight once anyway.
func matPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi, blk int,
	rowMajor func(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int),
	tiles func(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int)) {
	checkPanelSplit(rows, lo, hi)
	nb := cols / tile
	rb := nb * blk
	full := rows / PanelRows * PanelRows
	if r := max(lo, full); r < hi {
		rowMajor(dst, w, xq, n, rows, cols, r, hi)
	}
	hi = min(hi, full)
	if lo >= hi || n <= 0 {
		return
	}
	// The assembly trusts its pointers: everything the tiles touch,
	// checked once.
	xb := xq.blocks()
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	last := xq.majorAt(n-1, nb-1, nb)
	_ = xb[(last+1)*tile-1]
	_ = xq.sb[last]
	_ = xq.db[last]
	step := max(1, rowBlockBytes/(PanelRows*rb)) * PanelRows
	if n == 1 {
		step = hi - lo
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		tiles(dst, rows, w[r0*rb:r1*rb], (r1-r0)/PanelRows, nb, xq, n, r0)
	}
}

// scratchPanels runs tiles over the whole panels of rows [lo,hi) of a
// row-major weight of type t (Q8_0 or Q4_0, rb bytes a row), each row
// block of them laid out by panelize in a scratch first, and returns where
// the whole panels end: the row-major kernels' way to the panel kernels'
// speed for batches, at the cost of one pass over each block. The caller
// has checked the bounds of w, dst and xq.
func scratchPanels(t tensor.DType, dst []float32, w []byte, xq *actQ8, n, rows, lo, hi, nb, rb int,
	tiles func(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int)) int {
	step := max(1, rowBlockBytes/(PanelRows*rb)) * PanelRows
	full := lo + (hi-lo)/PanelRows*PanelRows
	tmp := getPanelScratch(min(step, full-lo) * rb)
	for r0 := lo; r0 < full; r0 += step {
		r1 := min(r0+step, full)
		for p := r0; p < r1; p += PanelRows {
			panelize(t, tmp[(p-r0)*rb:(p-r0+PanelRows)*rb], w[p*rb:(p+PanelRows)*rb], nb)
		}
		tiles(dst, rows, tmp[:(r1-r0)*rb], (r1-r0)/PanelRows, nb, xq, n, r0)
	}
	putPanelScratch(tmp)
	return full
}

// panelizeAVX2 is panelize in assembly (matqk_panelize_amd64.s): per
// block, the 16 rows' scales copied and their quants transposed 8 (Q8_0)
// or 4 (Q4_0) rows at a time.
func panelizeAVX2(t tensor.DType, dst, src []byte, nb int) {
	if nb <= 0 {
		return
	}
	rb := nb * t.BlockBytes()
	// The assembly trusts its pointers: every row's blocks and the panel.
	_ = src[PanelRows*rb-1]
	_ = dst[PanelRows*rb-1]
	if t == tensor.Q4_0 {
		panelQ4AVX2(&dst[0], &src[0], rb, nb)
	} else {
		panelQ8AVX2(&dst[0], &src[0], rb, nb)
	}
}

// panelQ8AVX2 and panelQ4AVX2 write the nb blocks of one Q8_0 or Q4_0
// panel at dst from the 16 rows at src (rb bytes apart).
//
//go:noescape
func panelQ8AVX2(dst, src *byte, rb, nb int)

//go:noescape
func panelQ4AVX2(dst, src *byte, rb, nb int)
