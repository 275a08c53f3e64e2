//go:build arm64 && !purego

package kernels

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/tensor"
)

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
// architectures) for the same row and input: batch invariance holds across
// the switch between the two paths.
//
// Instructions per super-block, per row and input (counted from the
// macros, 4 inputs × 8 rows a pass): Q4_K/Q5_K 1040 a half-panel pass
// (64 SDOT, 8 MLA, 8 zeroings and 17 loads a sub-block; 96 for M, 75 for
// the float steps and pointers), 32.5 a row and input, against 230 a row
// and 4 inputs, 57.5, in q4kTileDP; Q6_K 966, 30.2, against 304, 76,
// in q6kTileDP; laying the panels out adds about 2 Go operations a level
// byte once per call, over all the batch's inputs. No speed is measured
// here: the tests run under qemu, which times nothing. The SDOT-less
// "neon" set keeps the row tiles (matqk_arm64.go): the by-element form
// that keeps lanes as rows does not exist for bytes without SDOT.

// kqnTile is the inputs a panel tile takes.
const kqnTile = 4

// kqnMinInputs is the smallest batch that takes the panel tiles (a
// variable so tests can send small batches through them). It is the tile:
// the instruction counts above favour the panels at any whole tile, and
// with no arm64 hardware measured there is no better-founded threshold.
var kqnMinInputs = kqnTile

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
// super-blocks of t) as one panel in dst (nb·kqPanelBlk(t) bytes): the
// scales by the shared unpacking (as int32), a ±Inf d or dmin made the
// f16 NaN 0x7e00 (the assembly converts with FCVTL, which keeps Inf), and
// the levels transposed here, 4 at a time in 32-bit words.
func kqPanelizeNEON(t tensor.DType, dst, src []byte, nb, rb int) {
	pb := kqPanelBlk(t)
	bb := t.BlockBytes()
	_ = src[(PanelRows-1)*rb+nb*bb-1]
	le := binary.LittleEndian
	for b := range nb {
		d := dst[b*pb : (b+1)*pb]
		for k := range PanelRows {
			blk := src[k*rb+b*bb : k*rb+(b+1)*bb]
			switch t {
			case tensor.Q6_K:
				panelizeQ6K((*[kqp6]byte)(d), (*[tensor.Q6_KBlockLen]byte)(blk), k, false)
				levelsQ6Panel((*[4096]byte)(d[kqpLevels6:]), (*[tensor.Q6_KBlockLen]byte)(blk), k)
			case tensor.Q5_K:
				panelizeSMScales((*[kqpSM]byte)(d), (*[16]byte)(blk), k, false)
				levelsQ5Panel((*[4096]byte)(d[kqpLevelsSM:]), (*[tensor.Q5_KBlockLen]byte)(blk), k)
			default:
				panelizeSMScales((*[kqpSM]byte)(d), (*[16]byte)(blk), k, false)
				levelsQ4Panel((*[4096]byte)(d[kqpLevelsSM:]), (*[tensor.Q4_KBlockLen]byte)(blk), k)
			}
		}
		for o := 0; o < 64; o += 2 { // d and dmin (Q6_K: d and 32 unused bytes)
			if h := le.Uint16(d[o:]); h&0x7fff == 0x7c00 {
				le.PutUint16(d[o:], 0x7e00)
			}
		}
	}
}

// levelsQ4Panel writes row k's 256 Q4_K levels into a panel super-block's
// level groups lv (value v at 64·(v/4) + 4k + v%4): byte l of the
// 32-byte chunk c holds level 64c+l in its low nibble and 64c+32+l in its
// high one.
func levelsQ4Panel(lv *[4096]byte, blk *[tensor.Q4_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	qs := blk[16:]
	for c := range 4 {
		for m := range 8 {
			u := le.Uint32(qs[32*c+4*m:])
			le.PutUint32(lv[64*(16*c+m)+4*k:], u&0x0f0f0f0f)
			le.PutUint32(lv[64*(16*c+8+m)+4*k:], u>>4&0x0f0f0f0f)
		}
	}
}

// levelsQ5Panel is levelsQ4Panel for Q5_K: the nibbles after 32 bytes of
// high bits qh, bit 2c of qh[l] the fifth bit of level 64c+l and bit 2c+1
// that of 64c+32+l.
func levelsQ5Panel(lv *[4096]byte, blk *[tensor.Q5_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	qh, qs := blk[16:48], blk[48:]
	for m := range 8 {
		h := le.Uint32(qh[4*m:])
		for c := range 4 {
			u := le.Uint32(qs[32*c+4*m:])
			lo := u&0x0f0f0f0f | (h>>(2*c)&0x01010101)<<4
			hi := u>>4&0x0f0f0f0f | (h>>(2*c+1)&0x01010101)<<4
			le.PutUint32(lv[64*(16*c+m)+4*k:], lo)
			le.PutUint32(lv[64*(16*c+8+m)+4*k:], hi)
		}
	}
}

// levelsQ6Panel writes row k's 256 Q6_K levels minus 32, as signed bytes,
// into a panel super-block's level groups. In half n (128 values) with
// ql = the 64 low-nibble bytes and qh = the 32 high-bit bytes of the
// half, level 128n+32g+l is ql[l]&15 | (qh[l]&3)<<4 (g = 0), ql[l+32]&15 |
// (qh[l]>>2&3)<<4 (1), ql[l]>>4 | (qh[l]>>4&3)<<4 (2), ql[l+32]>>4 |
// (qh[l]>>6)<<4 (3).
func levelsQ6Panel(lv *[4096]byte, blk *[tensor.Q6_KBlockLen]byte, k int) {
	le := binary.LittleEndian
	// minus32 maps 4 bytes 0…63 to their value − 32 mod 256: with bit 5
	// set that clears it; clear, it is v + 224 = (v | 32) | 0xc0.
	minus32 := func(v uint32) uint32 {
		return v ^ 0x20202020 | (^v>>5&0x01010101)*0xc0
	}
	for n := range 2 {
		ql, qh := blk[64*n:], blk[128+32*n:]
		for m := range 8 {
			a, b, h := le.Uint32(ql[4*m:]), le.Uint32(ql[32+4*m:]), le.Uint32(qh[4*m:])
			g := 32*n + m
			le.PutUint32(lv[64*g+4*k:], minus32(a&0x0f0f0f0f|(h&0x03030303)<<4))
			le.PutUint32(lv[64*(g+8)+4*k:], minus32(b&0x0f0f0f0f|(h>>2&0x03030303)<<4))
			le.PutUint32(lv[64*(g+16)+4*k:], minus32(a>>4&0x0f0f0f0f|(h>>4&0x03030303)<<4))
			le.PutUint32(lv[64*(g+24)+4*k:], minus32(b>>4&0x0f0f0f0f|(h>>6&0x03030303)<<4))
		}
	}
}
