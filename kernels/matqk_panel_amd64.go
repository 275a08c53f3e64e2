//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// K-quant batches in panels (AVX-512 VNNI here, AVX2 in
// matqk_panel_avx2_amd64.s). The row-major tiles of
// matqk_amd64.s take one weight row against four inputs, and every
// super-block ends in horizontal sums of the integer vectors before its
// float step: on a 512-token prompt most of a Q4_K_M model's time went
// there. A batch of at least kqpMinInputs inputs instead lays each row
// block out in scratch as panels of 16 rows (kqPanelize) and runs a tile
// of 8 inputs over them: one 64-byte vector holds 4 levels of each of the
// 16 rows, one VPDPBUSD multiplies it by 4 activation bytes of one input
// (broadcast), and the lanes stay rows to the end, so nothing is summed
// across lanes. Per super-block, sub-block and input:
//
//	S = Σ_{i in sub-block} l_i·q_i            VPDPBUSD, 16 rows at once
//	I += sc·S                                 VPMULLD, VPADDD
//
// then Q4_K/Q5_K M = Σ_j m_j·(bsums[2j]+bsums[2j+1]) (VPDPWSSD over
// (m_j, m_j) word pairs and the bsums' pair j, broadcast), Q6_K
// I −= 32·Σ_s sc_s·bsums[s] (VPDPWSSD over (sc_2t, sc_2t+1) pairs). Both
// are exact int32 with the row kernels' bounds, and integer sums do not
// depend on their order, so I and M are the row kernels' I and M; the float
// step is theirs too, operation for operation and operand for operand
// (matqk_amd64.go: d·dx, dmin·dx, float32(I)·(d·dx) − float32(M)·(dmin·dx),
// s + that, no FMA), in the lanes of one vector. So a panel tile's output
// has the bits of q4kDotVNNI's (and of every set's) for the same row and
// input: batch invariance holds across the switch between the two paths.
//
// The panels are scratch, made per call (the store keeps the file's
// layout): levels unpacked to one byte each, so Q4_K and Q5_K share one
// kernel and none unpacks nibbles or high bits. A super-block of a panel:
//
//	Q4_K, Q5_K (kqpSM bytes)          Q6_K (kqp6 bytes)
//	[0,32)      16 f16 d              [0,32)      16 f16 d
//	[32,64)     16 f16 dmin           [32,64)     unused
//	[64,576)    sc_j, j=0..7          [64,1088)   sc_s, s=0..15
//	[576,1088)  (m_j, m_j) int16 pairs [1088,1600) (sc_2t, sc_2t+1) pairs
//	[1088,5184) levels                [1600,5696) levels
//
// vectors of 16 rows (row k at 4k; a scale as int32, or as the int16 pair
// (sc, sc) for the AVX2 tiles, kqPanels.words), levels in 64 groups of 4
// values (group g = values 4g…4g+3 at levels+64g). Making them costs one
// pass over the block per call (the levels transposed 8 rows at a time in
// assembly, the scales unpacked in Go): measured by thread CPU time on
// one core of an AMX-capable Xeon, a 768×2048 Q4_K product runs at 49
// GMAC/s through the panels against the row tiles' 54 at 8 inputs, 70 at
// 16, 98 at 32 and 145 at 512 (AVX2: 36 and 48 at 8 and 16 against 49,
// 64 at 32 and 84 at 512 against 42–48), so batches from kqpMinInputs = 32
// take the AVX2 panels and smaller ones keep the row tiles; the VNNI
// panels pay from 16 (BenchmarkKQuantAMX, one run at load 30: 64–71
// GMAC/s against the row tiles' 50–56 at 16 inputs, where the AVX2 panels
// ran 45–51 against 44–48), so they start at kqpMinInputsVNNI = 16.

const kqpTile = 8 // inputs per panel tile

// kqpMinInputs and kqpMinInputsVNNI are the smallest batches that take
// the AVX2 and the VNNI panels (variables so tests can send small batches
// through them).
var (
	kqpMinInputs     = 32
	kqpMinInputsVNNI = 16
)

// minInputs is the smallest batch that takes k's panel tiles.
func (k *kqPanels) minInputs() int {
	if k.words {
		return kqpMinInputs
	}
	return kqpMinInputsVNNI
}

// kqPanelTile writes dst[k·rows + 16p + j] = row 16p+j of the np scratch
// panels at w (nb super-blocks each) · input k, for the 8 inputs k whose
// Q8_K rows are at x + k·xs bytes.
type kqPanelTile func(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

//go:noescape
func kqSMPanel8VNNI(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

//go:noescape
func kq6Panel8VNNI(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

//go:noescape
func kqSMPanel8AVX2(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

//go:noescape
func kq6Panel8AVX2(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)

// kqPanels is one kernel set's panel tiles: sm for Q4_K and Q5_K, q6 for
// Q6_K, and whether they take the sub-block scales as int16 word pairs
// (sc, sc), which VPMADDWD multiplies in (AVX2), or as int32, which
// VPMULLD does (VNNI: VPDPBUSD sums the levels without a scale); amx
// sends batches of kqaMinInputs or more to the AMX tiles
// (matqk_amx_amd64.go) instead.
type kqPanels struct {
	sm, q6 kqPanelTile
	words  bool
	amx    bool
}

var (
	kqPanelsVNNI = &kqPanels{kqSMPanel8VNNI, kq6Panel8VNNI, false, false}
	kqPanelsAVX2 = &kqPanels{kqSMPanel8AVX2, kq6Panel8AVX2, true, false}
)

// tile is the tile for t.
func (k *kqPanels) tile(t tensor.DType) kqPanelTile {
	if t == tensor.Q6_K {
		return k.q6
	}
	return k.sm
}

// kqScratchPanels computes outputs [lo, full) for inputs [0, n) (n a
// multiple of kqpTile), full the end of the whole 16-row panels from lo,
// through pk's tile, a row block at a time laid out by kqPanelize in
// scratch; it returns full. The caller has checked the bounds of w, xq and
// dst.
func kqScratchPanels(t tensor.DType, pk *kqPanels, dst []float32, w, xq []byte, n, rows, lo, hi, nb, rb int) int {
	tile := pk.tile(t)
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
			kqPanelizeFast(t, tmp[p*pb:(p+1)*pb], w[r*rb:(r+PanelRows)*rb], nb, rb, pk.words)
		}
		for i := 0; i < n; i += kqpTile {
			tile(&dst[i*rows+r0], rows, &tmp[0], np, nb, &xq[i*xb], xb)
		}
	}
	putPanelScratch(tmp)
	return full
}

// kqPanelize lays out the 16 rows at src (rb bytes each, nb super-blocks
// of t) as one panel in dst (nb·kqPanelBlk(t) bytes; see above), the
// sub-block scales as (sc, sc) int16 pairs if words, else as int32.
// The levels are transposed 8 rows at a time in assembly
// (matqk_panelize_amd64.s), the scales row by row here.
func kqPanelize(t tensor.DType, dst, src []byte, nb, rb int, words bool) {
	pb := kqPanelBlk(t)
	bb := t.BlockBytes()
	_ = src[(PanelRows-1)*rb+nb*bb-1] // every row's blocks, for the assembly
	for b := range nb {
		d := dst[b*pb : (b+1)*pb]
		for k := range PanelRows {
			blk := src[k*rb+b*bb : k*rb+(b+1)*bb]
			if t == tensor.Q6_K {
				panelizeQ6K((*[kqp6]byte)(d), (*[tensor.Q6_KBlockLen]byte)(blk), k, words)
			} else {
				panelizeSMScales((*[kqpSM]byte)(d), (*[16]byte)(blk), k, words)
			}
		}
		lv := d[kqpLevelsSM : kqpLevelsSM+4096]
		_ = d[kqPanelBlk(t)-1]
		switch t {
		case tensor.Q4_K:
			kqLevelsQ4AVX2(&lv[0], &src[b*bb+16], rb)
		case tensor.Q5_K:
			kqLevelsQ5AVX2(&lv[0], &src[b*bb+48], rb, -32)
		case tensor.Q6_K:
			kqLevelsQ6AVX2(&d[kqpLevels6], &src[b*bb], rb)
		}
	}
}

// kqLevelsQ4AVX2 and kqLevelsQ5AVX2 write the 4096 level bytes of a
// Q4_K/Q5_K panel super-block at dst from the 16 rows' qs at src + k·rb
// (and Q5_K's qh at qh bytes from each).
//
//go:noescape
func kqLevelsQ4AVX2(dst, src *byte, rb int)

//go:noescape
func kqLevelsQ5AVX2(dst, src *byte, rb int, qh int)

// kqLevelsQ6AVX2 is the same for a Q6_K panel super-block, from the rows'
// blocks at src + k·rb.
//
//go:noescape
func kqLevelsQ6AVX2(dst, src *byte, rb int)
