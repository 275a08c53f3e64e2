//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/sluicehq/sluice/tensor"
)

// K-quant batches on the AMX-INT8 tile unit ("avx512-amx"), in
// matqk_amx_amd64.s. The row kernels' integer sums per super-block b,
// weight row r and input k (matqk_amd64.go),
//
//	Q4_K, Q5_K:  I = Σ_j sc_j · Σ_{i in j} l_i·q_i    M = Σ_j m_j · Σ_{i in j} q_i
//	Q6_K:        I = Σ_s sc_s · Σ_{i in s} (l_i − 32)·q_i
//
// I is rewritten as a dot product over the block's 256 values with a
// per-value weight w_i = sc_j(i)·l_i (Q6_K: sc_s(i)·(l_i − 32)). A weight
// fits int16 (Q4_K ≤ 63·15, Q5_K ≤ 63·31, Q6_K within ±128·32), so it is
// split into a low byte and a high byte, w_i = lo_i + 256·hi_i with lo_i
// unsigned and hi_i signed (Q4_K, Q5_K: 0…7; Q6_K: −16…16), and
//
//	I = Σ lo_i·q_i + 256·Σ hi_i·q_i
//
// is two sets of four tile products (TDPBSUD, or TDPBSSD for Q6_K's
// signed high bytes) of K = 64: an A tile of 16 inputs × 64 activation
// bytes, loaded in place from the Q8_K rows (rows xs bytes apart), by a B
// tile of 16 groups × 16 weight rows × 4 bytes (the VNNI layout: group g
// holds the 16 rows' values 4g…4g+3). The sums are exact: |Σ hi·q| ≤
// 256·16·128 and 256 times that below 2^31, and int32 addition wraps the
// same in any order, so I is the row kernels' I. Q4_K/Q5_K's M is the same
// integer as the VNNI panel tile's (VPDPWSSD of the rows' (m_j, m_j) pairs
// by the input's (bsums[2j], bsums[2j+1])), formed in half the
// instructions: VPDPWSSD of the rows' (m_2u, m_2u+1) pairs by the input's
// sub-block sums (s_2u, s_2u+1), s_j = bsums[2j] + bsums[2j+1] (|s_j| ≤
// 32·127 fits int16; the epilogue's eight VPDPWSSD per input and block
// were a third of its vector work). (A third plane holding m_j at every value, M
// as four more tile products, ran 0.77–0.93× of this for Q4_K at 512
// inputs in three alternating runs, Q5_K 0.78–1.33×: the planes stream
// from L2, and it made them 12 KiB a super-block instead of 8.5.) The
// float step then is the VNNI panel tile's, operation for operation and
// operand for operand (d·dx, dmin·dx, float32(I)·(d·dx) −
// float32(M)·(dmin·dx), s + that, no FMA), so an output has the bits of
// q4kDotVNNI's (and every set's) for its row and input: batch invariant
// across the switch between the paths.
//
// The planes are scratch made per call from the VNNI panel (kqPanelize,
// then kqAMXFromSM / kqAMXFrom6 in assembly), a row block at a time, and
// used by every tile of 16 inputs. A super-block of an AMX panel:
//
//	Q4_K, Q5_K (kqaSM bytes)          Q6_K (kqa6 bytes)
//	[0,32)      16 f16 d              [0,32)      16 f16 d
//	[32,64)     16 f16 dmin           [32,64)     unused
//	[64,4160)   lo, 64 groups         [64,4160)   lo
//	[4160,8256) hi                    [4160,8256) hi
//	[8256,8512) (m_2u, m_2u+1) int16 pairs, 16 rows, u = 0…3
//
// A call's inputs go in tiles of 16; a last partial tile is copied into a
// zero-padded scratch of 16 rows and only its real outputs are stored, so
// every input of a batch takes the tile unit. A tile walks every panel of
// the row block, its 16 inputs' float sums in registers over each panel's
// super-blocks and its activations (16 rows × nb·292 bytes) staying in L1,
// while the planes stream from L2. (The other order, super-blocks outside
// and tiles inside so that a super-block's planes stay in L1,
// the sums in scratch and the activations from L2, measured 0.65–0.9× of
// this one: BenchmarkKQuantAMX, 512 inputs, three alternating runs.)

const (
	kqaSM = 64 + 2*4096 + 256 // bytes of one super-block of a Q4_K/Q5_K AMX panel
	kqa6  = 64 + 2*4096       // of a Q6_K AMX panel
)

// kqaMinInputs is the smallest batch that takes the AMX tiles (a variable
// so tests can send small batches through them): the planes cost a pass
// over the row block per call, repaid over the inputs. Against the VNNI
// panels (BenchmarkKQuantAMX, 768×2048, one thread, CPU time, runs at
// load 8–27): 16 inputs 0.72–1.0×, 64 inputs 0.97–1.46×, 512 inputs 1.45×
// (Q4_K), 1.58× (Q5_K), 1.97× (Q6_K).
var kqaMinInputs = 64

// kqaRowBlockBytes is how many bytes of AMX panels one row block makes
// before every tile of inputs passes over them (the planes are 2.6–4.3×
// the file's bytes, so this is larger than rowBlockBytes; a variable for
// the tests).
var kqaRowBlockBytes = 1 << 20

// kqPanelsAMX is the avx512-amx set's K-quant panels: the AMX tiles for
// batches of kqaMinInputs or more, the VNNI panel tiles below that.
var kqPanelsAMX = &kqPanels{kqSMPanel8VNNI, kq6Panel8VNNI, false, true}

// kqaConfig is the tile configuration (palette 1): all eight tiles 16
// rows × 64 bytes (tmm4 and tmm7 unused). tmm0/tmm1 hold A tiles, tmm2
// and tmm3 the B tiles of the planes, tmm5 and tmm6 the C tiles of I's
// low and high sums.
var kqaConfig = func() (c [64]byte) {
	c[0] = 1
	for t := range 8 {
		c[16+2*t], c[48+t] = 64, 16
	}
	return c
}()

// kqAMXTile writes dst[k·rows + 16p + j] = row 16p+j of the np AMX panels
// at w (nb super-blocks each) · input k, for the m (1…16) first of the 16
// inputs whose Q8_K rows are at x + k·xs; dx holds their activation
// scales, input k's block b at dx + 64b + 4k; cbuf is 6 KiB of scratch,
// cfg kqaConfig.
//
//go:noescape
func kqSMAMXTile(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int, dx *byte, m int, cbuf *byte, cfg *byte)

//go:noescape
func kq6AMXTile(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int, dx *byte, m int, cbuf *byte, cfg *byte)

// kqAMXFromSM writes the nb super-blocks of a Q4_K/Q5_K AMX panel at dst
// from the VNNI panel at src (kqPanelize, scales as int32).
//
//go:noescape
func kqAMXFromSM(dst, src *byte, nb int)

// kqAMXFrom6 is kqAMXFromSM for Q6_K.
//
//go:noescape
func kqAMXFrom6(dst, src *byte, nb int)

// kqaScales is the bytes per group and super-block of the inputs'
// scales a t tile reads: 16 float32 dx, and for Q4_K/Q5_K the 16 inputs'
// sub-block sum pairs (s_2u, s_2u+1), u = 0…3, as int16 (16 bytes each)
// after them.
func kqaScales(t tensor.DType) int {
	if t == tensor.Q6_K {
		return 64
	}
	return 64 + 16*16
}

// kqAMXBlk is the byte length of one super-block of a t AMX panel.
func kqAMXBlk(t tensor.DType) int {
	if t == tensor.Q6_K {
		return kqa6
	}
	return kqaSM
}

// kqAMXPanels computes outputs [lo, full) for all n inputs, full the end
// of the whole 16-row panels from lo, on the tile unit, a row block at a
// time laid out as AMX panels in scratch; it returns full. The caller has
// checked the bounds of w, xq and dst.
func kqAMXPanels(t tensor.DType, dst []float32, w, xq []byte, n, rows, lo, hi, nb, rb int) int {
	full := lo + (hi-lo)/PanelRows*PanelRows
	if full == lo {
		return lo
	}
	pb := nb * kqAMXBlk(t) // bytes of one AMX panel
	vb := nb * kqPanelBlk(t)
	step := max(1, kqaRowBlockBytes/pb) * PanelRows
	xb := nb * q8kBlk
	groups := (n + 15) / 16
	tail := n - (groups-1)*16 // inputs in the last tile, 1…16

	// One scratch for everything: the AMX panels of a row block, a VNNI
	// panel, the inputs' scales per group and block (16 float32, and for
	// Q4_K/Q5_K the 16 inputs' sub-block sum pairs after them), the
	// padded last tile when it is partial, and the C tile buffers.
	ds := kqaScales(t)
	np0 := min(step, full-lo) / PanelRows
	pad := 0
	if tail < 16 {
		pad = 16 * xb
	}
	offV := np0 * pb
	offD := offV + vb
	offP := offD + groups*nb*ds
	offC := offP + pad
	buf := getPanelScratch(offC + 6<<10 + 64)
	al := (64 - int(uintptr(unsafe.Pointer(&buf[0]))%64)) % 64 // the C buffers 64-byte aligned
	cbuf := buf[offC+al : offC+al+6<<10]
	dxs := buf[offD:offP]
	clear(dxs)
	for g := range groups {
		for b := range nb {
			o := (g*nb + b) * ds
			for k := range min(16, n-16*g) {
				blk := xq[(16*g+k)*xb+b*q8kBlk:]
				copy(dxs[o+4*k:o+4*k+4], blk[:4])
				if ds > 64 {
					// s_j = bsums[2j] + bsums[2j+1] (exact in int16), two
					// at a time: four int16 in a word, each pair's sum
					// mod 2^16 in the low half of a 32-bit slot.
					sp := dxs[o+64+16*k : o+80+16*k]
					for u := range 4 {
						x := binary.LittleEndian.Uint64(blk[260+8*u:])
						const lo = 0x0000ffff0000ffff
						v := (x&lo + x>>16&lo) & lo
						binary.LittleEndian.PutUint32(sp[4*u:], uint32(v)|uint32(v>>32)<<16)
					}
				}
			}
		}
	}
	xlast := xq[(groups-1)*16*xb:]
	if pad > 0 {
		p := buf[offP : offP+pad]
		copy(p, xq[(groups-1)*16*xb:n*xb])
		clear(p[tail*xb:])
		xlast = p
	}
	tile := kqSMAMXTile
	from := kqAMXFromSM
	if t == tensor.Q6_K {
		tile, from = kq6AMXTile, kqAMXFrom6
	}
	vp := buf[offV : offV+vb]
	for r0 := lo; r0 < full; r0 += step {
		r1 := min(r0+step, full)
		np := (r1 - r0) / PanelRows
		for p := range np {
			r := r0 + p*PanelRows
			kqPanelizeFast(t, vp, w[r*rb:(r+PanelRows)*rb], nb, rb, false)
			from(&buf[p*pb], &vp[0], nb)
		}
		for g := range groups {
			x, m := xq[g*16*xb:], 16
			if g == groups-1 {
				x, m = xlast, tail
			}
			tile(&dst[g*16*rows+r0], rows, &buf[0], np, nb, &x[0], xb, &dxs[g*nb*ds], m, &cbuf[0], &kqaConfig[0])
		}
	}
	putPanelScratch(buf)
	return full
}

// kqScalesSM16 writes bytes [0, kqpLevelsSM) of a Q4_K/Q5_K panel
// super-block at dst (16 rows' d, dmin, scales as int32 and (m, m) min
// pairs: kqPanelize's layout with words false) from the 16 rows' block
// heads at src + k·rb, with panelizeSMScales's bytes (matqk_scales_amd64.s:
// the 6-bit unpacking of four rows per vector, then a byte transpose;
// needs AVX-512 VBMI). In Go the scales took 3–4% of a 110m Q4_K_M
// prefill, more than the levels' transposition.
//
//go:noescape
func kqScalesSM16(dst, src *byte, rb int)

// kqScalesFast is set where kqScalesSM16 may run: the AVX-512 sets on a
// CPU with VBMI (every AMX CPU; Ice Lake on, not Cascade Lake). The AMX
// tiles and the VNNI panel tiles both take it (their panels keep the
// scales as int32); at 16 inputs, where a VNNI tile pass is short, the
// Go unpacking was a large share of a call.
var kqScalesFast bool

func init() {
	addSelector(func(c isaLevel) { kqScalesFast = c >= isaAVX512 && cpuVNNI && cpuHasVBMI() })
}

// kqPanelizeSM16 is kqPanelize(t, dst, src, nb, rb, false) for Q4_K and
// Q5_K with the scales unpacked by kqScalesSM16: the same bytes.
func kqPanelizeSM16(t tensor.DType, dst, src []byte, nb, rb int) {
	bb := t.BlockBytes()
	_ = src[(PanelRows-1)*rb+nb*bb-1] // every row's blocks, for the assembly
	_ = dst[nb*kqpSM-1]
	for b := range nb {
		d := dst[b*kqpSM:]
		kqScalesSM16(&d[0], &src[b*bb], rb)
		if t == tensor.Q4_K {
			kqLevelsQ4AVX2(&d[kqpLevelsSM], &src[b*bb+16], rb)
		} else {
			kqLevelsQ5AVX2(&d[kqpLevelsSM], &src[b*bb+48], rb, -32)
		}
	}
}

// kqPanelizeFast is kqPanelize (the tests' model) with the scales
// unpacked by kqScalesSM16 where that may run and the layout has them as
// int32 (words false, Q4_K and Q5_K): the same bytes either way.
func kqPanelizeFast(t tensor.DType, dst, src []byte, nb, rb int, words bool) {
	if t != tensor.Q6_K && !words && kqScalesFast {
		kqPanelizeSM16(t, dst, src, nb, rb)
		return
	}
	kqPanelize(t, dst, src, nb, rb, words)
}

// cpuHasVBMI reports AVX-512 VBMI (kqScalesSM16's VPERMI2B).
func cpuHasVBMI() bool { return cpu.X86.HasAVX512VBMI }
