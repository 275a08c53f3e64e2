//go:build arm64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// K-quant batches in panels on arm64 (SDOT, matqk_panel_arm64.s). The row
// tiles of matqk_arm64.s take one weight row against four inputs: each
// super-block unpacks the row's nibbles and high bits again, and ends in
// pairwise and across-lane sums of the integer vectors before its float
// step. A batch of at least kqnMinInputs inputs instead lays each row block
// out in scratch as panels of 16 rows, in the amd64 panels' byte layout
// (matqk_panel_amd64.go: levels one byte each in 64-byte groups of 16 rows
// × 4 values, scales as int32 vectors of 16 rows, the mins as (m, m) int16
// pairs), and runs a tile of 4 inputs over each half panel (8 rows): one
// q-register holds 4 levels of each of 4 rows, one SDOT by element
// multiplies it by 4 activation bytes of one input, and the int32 lanes
// stay rows to the end. Per super-block, sub-block and input:
//
//	S = Σ_{i in sub-block} l_i·q_i            SDOT, 4 rows a register
//	I += sc·S                                 MLA
//
// then Q4_K/Q5_K M = Σ_j m_j·(bsums[2j]+bsums[2j+1]) (SMLAL by element of
// the 8 rows' m_j, taken from the pairs by UZP1, and the input's pair sum
// j). Q6_K's panel levels are l − 32 as signed bytes (SDOT is signed ×
// signed), so S is Σ (l_i − 32)·q_i = Σ l_i·q_i − 32·bsums[s] and I is the
// row kernels' Σ_s sc_s·Σ l_i·q_i − 32·Σ_s sc_s·bsums[s] without a bsums
// pass: bsums[s] is the sum of the block's q over sub-block s, as
// quantizeRowQ8K writes it. All of it is exact int32 with the row kernels'
// bounds and integer sums do not depend on their order, so I and M are the
// row kernels' I and M. The float step is the row kernels'
// (matqk_arm64.go), operation for operation and operand for operand (d·dx
// with d first, dmin·dx, then ·float32(I), ·float32(M), the difference,
// s + that; no FMA) in the lanes of one vector, d and dmin converted from
// f16 by FCVTL from panels whose ±Inf scales kqPanelizeNEON made the f16
// NaN 0x7e00 (quantScaleTable's NaN once converted). So a panel tile's
// output has the bits of q4kDotDP's (and of every set's, on both
// architectures) for the same row and input, a NaN's payload aside as
// between the row kernels' own dot and tile: batch invariance holds across
// the switch between the two paths.
//
// No speed can be measured here: the arm64 tests run under qemu, which
// times nothing. Instead, instructions per super-block counted from the
// macros (a pass is 8 rows × 4 inputs, a row tile 1 row × 4 inputs):
//
//	                    panel pass   per row·input   row tile   per row·input
//	Q4_K, Q5_K           969          30.3            231, 264   57.8, 66.0
//	Q6_K                 976          30.5            305        76.3
//
// (a Q4_K/Q5_K sub-block is 64 SDOT, 8 MLA, 8 zeroings and 17 loads; M
// 96, the float steps 78). Laying a panel out costs, per row and
// super-block, once per call whatever the batch (matqk_panelize_arm64.s):
// 71 (Q4_K), 125 (Q5_K) and 154 (Q6_K) instructions for the levels, 16
// (Q6_K 14) for the scales (the Go unpacking shared with amd64 took about
// 215 and 280 compiled for arm64, the Go level loops about 1200). So the
// panels should pay from one tile of 4 inputs (Q4_K: 87/(57.8 − 30.3) =
// 3.2; Q5_K 3.9, Q6_K 3.7) and run a large batch in about half the row
// tiles' instructions; kqnMinInputs is 8, a margin for what a count does
// not see (the panels' scratch traffic, SDOT latency). The SDOT-less
// "neon" set keeps the row tiles: without a by-element byte product, a
// lane-per-row tile needs a DUP of each input's 4 bytes per group beside
// the SMULL/SMLAL pairs and a pairwise flush per sub-block, about 76
// instructions a row and input against the SMULL row tile's 74.

// kqnTile is the inputs a panel tile takes.
const kqnTile = 4

// kqnMinInputs is the smallest batch that takes the panel tiles (a
// variable so tests can send small batches through them): the counted
// crossover above with a margin, to be replaced by a measured one on Arm
// hardware (bench/README.md).
var kqnMinInputs = 8

// kqSMPanel4DP and kq6Panel4DP write dst[k·rows + 16p + j] = row 16p+j of
// the np scratch panels at w (nb super-blocks each) · input k, for the 4
// inputs k whose Q8_K rows are at x + k·xs bytes: Q4_K/Q5_K panels and
// Q6_K panels.
//
//go:noescape
func kqSMPanel4DP(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

//go:noescape
func kq6Panel4DP(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

// kqScratchPanelsNEON computes outputs [lo, full) for inputs [0, n) (n a
// multiple of kqnTile), full the end of the whole 16-row panels from lo,
// a row block at a time laid out by kqPanelizeNEON in scratch; it returns
// full. The caller has checked the bounds of w, xq and dst.
func kqScratchPanelsNEON(t tensor.DType, dst []float32, w, xq []byte, n, rows, lo, hi, nb, rb int) int {
	tile := kqSMPanel4DP
	if t == tensor.Q6_K {
		tile = kq6Panel4DP
	}
	pb := nb * kqPanelBlk(t) // bytes of one panel
	step := max(1, rowBlockBytes/pb) * PanelRows
	full := lo + (hi-lo)/PanelRows*PanelRows
	tmp := getPanelScratch(min(step, full-lo) / PanelRows * pb)
	xb := nb * q8kBlk
	for r0 := lo; r0 < full; r0 += step {
		r1 := min(r0+step, full)
		np := (r1 - r0) / PanelRows
		for p := range np {
			r := r0 + p*PanelRows
			kqPanelizeNEON(t, tmp[p*pb:(p+1)*pb], w[r*rb:(r+PanelRows)*rb], nb, rb)
		}
		for i := 0; i < n; i += kqnTile {
			tile(&dst[i*rows+r0], rows, &tmp[0], np, nb, &xq[i*xb], xb)
		}
	}
	putPanelScratch(tmp)
	return full
}

// kqPanelizeNEON lays out the 16 rows at src (rb bytes each, nb
// super-blocks of t) as one panel in dst (nb·kqPanelBlk(t) bytes), all in
// assembly (matqk_panelize_arm64.s): the scales 16 rows at once, the
// bytes of the shared Go unpacking (panelizeSMScales, panelizeQ6K: the
// tests' model) with the scales as int32 and a ±Inf d or dmin made the
// f16 NaN 0x7e00 (the tiles convert with FCVTL, which keeps Inf), and the
// levels 4 rows at a time.
func kqPanelizeNEON(t tensor.DType, dst, src []byte, nb, rb int) {
	pb := kqPanelBlk(t)
	bb := t.BlockBytes()
	_ = src[(PanelRows-1)*rb+nb*bb-1] // every row's blocks, for the assembly
	_ = dst[nb*pb-1]
	for b := range nb {
		d := dst[b*pb : (b+1)*pb]
		switch t {
		case tensor.Q4_K:
			kqScalesSMNEON(&d[0], &src[b*bb], rb)
			kqLevelsQ4NEON(&d[kqpLevelsSM], &src[b*bb], rb)
		case tensor.Q5_K:
			kqScalesSMNEON(&d[0], &src[b*bb], rb)
			kqLevelsQ5NEON(&d[kqpLevelsSM], &src[b*bb], rb)
		case tensor.Q6_K:
			kqScales6NEON(&d[0], &src[b*bb], rb)
			kqLevelsQ6NEON(&d[kqpLevels6], &src[b*bb], rb)
		}
	}
}

// kqScalesSMNEON writes the d, dmin, int32 scales and (m, m) min pairs of
// a Q4_K/Q5_K panel super-block at dst, and kqScales6NEON the d and int32
// scales of a Q6_K one (not its (sc, sc) pairs, which no arm64 tile
// reads), from the 16 rows' blocks at src + k·rb, ±Inf d and dmin made
// the f16 NaN 0x7e00.
//
//go:noescape
func kqScalesSMNEON(dst, src *byte, rb int)

//go:noescape
func kqScales6NEON(dst, src *byte, rb int)

// kqLevelsQ4NEON, kqLevelsQ5NEON and kqLevelsQ6NEON write the 4096 level
// bytes of a panel super-block at dst (value v of row k at 64·(v/4) + 4k
// + v%4; Q6_K's minus 32, as signed bytes) from the 16 rows' blocks at src
// + k·rb.
//
//go:noescape
func kqLevelsQ4NEON(dst, src *byte, rb int)

//go:noescape
func kqLevelsQ5NEON(dst, src *byte, rb int)

//go:noescape
func kqLevelsQ6NEON(dst, src *byte, rb int)
