package tensor

import (
	"encoding/binary"
	"math"
)

// The rest of ggml's weight types: the legacy 32-element blocks with a
// minimum or a fifth bit, and the K-quants, whose 256-element super-blocks
// carry quantized sub-block scales. Ids are ggml_type's.
const (
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	Q8_K DType = 15
)

// Block geometry, as ggml-common.h lays the blocks out (f16 values are
// little-endian IEEE half floats; "w" is the decoded weight):
//
//	Q4_1: { f16 d, m; u8 qs[16] }                       20 B / 32:  w = d*q + m, q in 0..15
//	Q5_0: { f16 d; u8 qh[4]; u8 qs[16] }                22 B / 32:  w = d*(q-16), q in 0..31
//	Q5_1: { f16 d, m; u8 qh[4]; u8 qs[16] }             24 B / 32:  w = d*q + m
//	      qs byte j: weight j in its low nibble, j+16 in its high one; bit j
//	      of the little-endian u32 qh is weight j's fifth bit.
//	Q2_K: { u8 scales[16]; u8 qs[64]; f16 d, dmin }     84 B / 256: 16 sub-blocks of 16,
//	      w = d*(scales[s]&15)*q - dmin*(scales[s]>>4), q 2 bits
//	Q3_K: { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }   110 B / 256: 16 × 16,
//	      w = d*(sc[s]-32)*(q-4·!hbit), q 2 low bits + 1 high bit, sc 6 bits
//	Q4_K: { f16 d, dmin; u8 scales[12]; u8 qs[128] }    144 B / 256: 8 sub-blocks of 32,
//	      w = d*sc[s]*q - dmin*m[s], q 4 bits, sc and m 6 bits packed in scales
//	Q5_K: { f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }  176 B / 256: 8 × 32, q 5 bits
//	Q6_K: { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }     210 B / 256: 16 × 16,
//	      w = d*scales[s]*(q-32), q 4 low bits + 2 high bits
//	Q8_K: { f32 d; i8 qs[256]; i16 bsums[16] }          292 B / 256: w = d*q; bsums are the
//	      sums of each 16 quants (activations for K-quant dot products)
//
// The bit positions within the K-quant blocks are those of ggml's
// dequantize_row_* and are spelled out on each decoder below.
const (
	QK4_1        = 32
	Q4_1BlockLen = 4 + QK4_1/2
	QK5_0        = 32
	Q5_0BlockLen = 2 + 4 + QK5_0/2
	QK5_1        = 32
	Q5_1BlockLen = 4 + 4 + QK5_1/2
	// QK_K is the K-quants' super-block size.
	QK_K         = 256
	Q2_KBlockLen = QK_K/16 + QK_K/4 + 4
	Q3_KBlockLen = QK_K/8 + QK_K/4 + 12 + 2
	Q4_KBlockLen = 4 + 12 + QK_K/2
	Q5_KBlockLen = 4 + 12 + QK_K/8 + QK_K/2
	Q6_KBlockLen = QK_K/2 + QK_K/4 + QK_K/16 + 2
	Q8_KBlockLen = 4 + QK_K + QK_K/16*2
)

// blockTypes are the types of this file: name, elements and bytes per block.
var blockTypes = map[DType]struct {
	name        string
	size, bytes int
}{
	Q4_1: {"q4_1", QK4_1, Q4_1BlockLen},
	Q5_0: {"q5_0", QK5_0, Q5_0BlockLen},
	Q5_1: {"q5_1", QK5_1, Q5_1BlockLen},
	Q2_K: {"q2_K", QK_K, Q2_KBlockLen},
	Q3_K: {"q3_K", QK_K, Q3_KBlockLen},
	Q4_K: {"q4_K", QK_K, Q4_KBlockLen},
	Q5_K: {"q5_K", QK_K, Q5_KBlockLen},
	Q6_K: {"q6_K", QK_K, Q6_KBlockLen},
	Q8_K: {"q8_K", QK_K, Q8_KBlockLen},
}

// IsKQuant reports whether t is one of ggml's 256-element super-block types.
func (t DType) IsKQuant() bool {
	switch t {
	case Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K:
		return true
	}
	return false
}

func f16At(b []byte, off int) float32 { return F16ToF32(binary.LittleEndian.Uint16(b[off:])) }

// DequantizeBlock decodes one block of t (t.BlockSize() weights from
// t.BlockBytes() bytes of src) into dst, exactly as DequantizeRow does. It
// is what kernels decode tiles with; it panics for the other types (plain,
// Q8_0 and Q4_0, extensions), which have decoders of their own.
func DequantizeBlock(dst []float32, src []byte, t DType) {
	switch t {
	case Q4_1:
		dequantQ4_1(dst, src)
	case Q5_0:
		dequantQ5_0(dst, src)
	case Q5_1:
		dequantQ5_1(dst, src)
	case Q2_K:
		dequantQ2_K(dst, src)
	case Q3_K:
		dequantQ3_K(dst, src)
	case Q4_K:
		dequantQ4_K(dst, src)
	case Q5_K:
		dequantQ5_K(dst, src)
	case Q6_K:
		dequantQ6_K(dst, src)
	case Q8_K:
		dequantQ8_K(dst, src)
	default:
		panic("tensor: DequantizeBlock of non-block dtype " + t.String())
	}
}

// dequantBlocks is DequantizeRow for the types of this file; false for others.
func dequantBlocks(dst []float32, src []byte, t DType, n int) bool {
	bt, ok := blockTypes[t]
	if !ok {
		return false
	}
	for b := 0; b < n/bt.size; b++ {
		DequantizeBlock(dst[b*bt.size:(b+1)*bt.size], src[b*bt.bytes:(b+1)*bt.bytes], t)
	}
	return true
}

// Every product below is written float32(a*b) so that it is rounded before
// the following add, as ggml's C computes it (no fused multiply-add).

// dequantQ4_1: byte j of qs holds q_j (low nibble) and q_{j+16} (high);
// w = d*q + m.
func dequantQ4_1(dst []float32, blk []byte) {
	d, m := f16At(blk, 0), f16At(blk, 2)
	qs := blk[4 : 4+QK4_1/2]
	dst = dst[:QK4_1]
	for j, q := range qs {
		dst[j] = float32(float32(q&0x0f)*d) + m
		dst[j+QK4_1/2] = float32(float32(q>>4)*d) + m
	}
}

// fifthBits returns the fifth bits of weights j and j+16 from qh, at bit 4.
func fifthBits(qh uint32, j int) (byte, byte) {
	return byte(qh>>j<<4) & 0x10, byte(qh>>(j+12)) & 0x10
}

// dequantQ5_0: as Q4_0 with a fifth bit from qh; w = d*(q-16).
func dequantQ5_0(dst []float32, blk []byte) {
	d := f16At(blk, 0)
	qh := binary.LittleEndian.Uint32(blk[2:])
	qs := blk[6 : 6+QK5_0/2]
	dst = dst[:QK5_0]
	for j, q := range qs {
		h0, h1 := fifthBits(qh, j)
		dst[j] = float32(int32(q&0x0f|h0)-16) * d
		dst[j+QK5_0/2] = float32(int32(q>>4|h1)-16) * d
	}
}

// dequantQ5_1: as Q4_1 with a fifth bit; w = d*q + m.
func dequantQ5_1(dst []float32, blk []byte) {
	d, m := f16At(blk, 0), f16At(blk, 2)
	qh := binary.LittleEndian.Uint32(blk[4:])
	qs := blk[8 : 8+QK5_1/2]
	dst = dst[:QK5_1]
	for j, q := range qs {
		h0, h1 := fifthBits(qh, j)
		dst[j] = float32(float32(q&0x0f|h0)*d) + m
		dst[j+QK5_1/2] = float32(float32(q>>4|h1)*d) + m
	}
}

// dequantQ2_K: the 256 weights are two halves of 128; in half h, weight
// 32k+l (k = 0..3, l = 0..31) is bits 2k..2k+1 of qs[32h+l]. Its sub-block
// of 16 is s = 8h + 2k + l/16, with scale d*(scales[s]&15) and min
// dmin*(scales[s]>>4): w = scale*q - min.
func dequantQ2_K(dst []float32, blk []byte) {
	scales, qs := blk[0:16], blk[16:80]
	d, dmin := f16At(blk, 80), f16At(blk, 82)
	dst = dst[:QK_K]
	for h := range 2 {
		q := qs[32*h : 32*h+32]
		for k := range 4 {
			shift := 2 * k
			for half := range 2 {
				sc := scales[8*h+2*k+half]
				dl, ml := float32(d*float32(sc&0x0f)), float32(dmin*float32(sc>>4))
				out := dst[128*h+32*k+16*half : 128*h+32*k+16*half+16]
				for l := range out {
					out[l] = float32(dl*float32((q[16*half+l]>>shift)&3)) - ml
				}
			}
		}
	}
}

// q3Scale is the 6-bit scale of Q3_K sub-block s (0..15): its low 4 bits
// are the low nibble of scales[s] for s < 8, else the high nibble of
// scales[s-8]; its high 2 bits are bits 2(s/4).. of scales[8 + s%4].
func q3Scale(scales []byte, s int) int32 {
	var lo byte
	if s < 8 {
		lo = scales[s] & 0x0f
	} else {
		lo = scales[s-8] >> 4
	}
	hi := (scales[8+s%4] >> (2 * (s / 4))) & 3
	return int32(lo | hi<<4)
}

// dequantQ3_K: weight 128h + 32k + l (h = 0..1, k = 0..3, l = 0..31) has
// its low 2 bits at bits 2k of qs[32h+l] and its high bit at bit 4h+k of
// hmask[l]; a clear high bit subtracts 4. Sub-block s = 8h + 2k + l/16 has
// scale d*(sc[s]-32): w = scale*(q - (hbit ? 0 : 4)).
func dequantQ3_K(dst []float32, blk []byte) {
	hmask, qs, scales := blk[0:32], blk[32:96], blk[96:108]
	d := f16At(blk, 108)
	dst = dst[:QK_K]
	for h := range 2 {
		q := qs[32*h : 32*h+32]
		for k := range 4 {
			shift, m := 2*k, byte(1)<<(4*h+k)
			for half := range 2 {
				dl := float32(d * float32(q3Scale(scales, 8*h+2*k+half)-32))
				out := dst[128*h+32*k+16*half : 128*h+32*k+16*half+16]
				for l := range out {
					i := 16*half + l
					v := int32((q[i] >> shift) & 3)
					if hmask[i]&m == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
		}
	}
}

// ScaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 packed bytes of a Q4_K/Q5_K block (ggml get_scale_min_k4): for j < 4
// they are the low 6 bits of bytes j and j+4; for j >= 4 the low 4 bits are
// the nibbles of byte j+4 (scale low, min high) and the high 2 bits are the
// top bits of bytes j-4 (scale) and j (min).
func ScaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ4_K: weights 64p .. 64p+63 (p = 0..3) come from qs[32p:32p+32],
// low nibbles first (sub-block 2p), then high nibbles (sub-block 2p+1):
// w = d*sc*q - dmin*m.
func dequantQ4_K(dst []float32, blk []byte) {
	d, dmin := f16At(blk, 0), f16At(blk, 2)
	scales, qs := blk[4:16], blk[16:144]
	dst = dst[:QK_K]
	for p := range 4 {
		sc1, m1 := ScaleMinK4(2*p, scales)
		sc2, m2 := ScaleMinK4(2*p+1, scales)
		d1, mn1 := float32(d*float32(sc1)), float32(dmin*float32(m1))
		d2, mn2 := float32(d*float32(sc2)), float32(dmin*float32(m2))
		q := qs[32*p : 32*p+32]
		out := dst[64*p : 64*p+64]
		for l, b := range q {
			out[l] = float32(d1*float32(b&0x0f)) - mn1
			out[32+l] = float32(d2*float32(b>>4)) - mn2
		}
	}
}

// dequantQ5_K: as Q4_K, plus a fifth bit (16) for weight 64p+l from bit 2p
// of qh[l] and for weight 64p+32+l from bit 2p+1.
func dequantQ5_K(dst []float32, blk []byte) {
	d, dmin := f16At(blk, 0), f16At(blk, 2)
	scales, qh, qs := blk[4:16], blk[16:48], blk[48:176]
	dst = dst[:QK_K]
	for p := range 4 {
		sc1, m1 := ScaleMinK4(2*p, scales)
		sc2, m2 := ScaleMinK4(2*p+1, scales)
		d1, mn1 := float32(d*float32(sc1)), float32(dmin*float32(m1))
		d2, mn2 := float32(d*float32(sc2)), float32(dmin*float32(m2))
		q := qs[32*p : 32*p+32]
		out := dst[64*p : 64*p+64]
		for l, b := range q {
			h := qh[l] >> (2 * p) // bit 0: the low nibble's fifth bit, bit 1: the high one's
			lo, hi := b&0x0f|(h&1)<<4, b>>4|(h&2)<<3
			out[l] = float32(d1*float32(lo)) - mn1
			out[32+l] = float32(d2*float32(hi)) - mn2
		}
	}
}

// dequantQ6_K: in half h (weights 128h..128h+127), for l = 0..31, the
// weights l, l+32, l+64, l+96 take their low 4 bits from the low nibble of
// ql[64h+l], of ql[64h+l+32], the high nibble of ql[64h+l], of ql[64h+l+32],
// and their high 2 bits from bits 0, 2, 4, 6 of qh[32h+l]. Weight i of the
// half is in sub-block 8h + i/16: w = d*scales[s]*(q-32).
func dequantQ6_K(dst []float32, blk []byte) {
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	d := f16At(blk, 208)
	dst = dst[:QK_K]
	for h := range 2 {
		l4, h2, s := ql[64*h:64*h+64], qh[32*h:32*h+32], sc[8*h:8*h+8]
		out := dst[128*h : 128*h+128]
		for l := range 32 {
			is := l / 16
			q1 := int32(l4[l]&0x0f|(h2[l]>>0&3)<<4) - 32
			q2 := int32(l4[l+32]&0x0f|(h2[l]>>2&3)<<4) - 32
			q3 := int32(l4[l]>>4|(h2[l]>>4&3)<<4) - 32
			q4 := int32(l4[l+32]>>4|(h2[l]>>6&3)<<4) - 32
			out[l] = float32(d*float32(int8(s[is]))) * float32(q1)
			out[l+32] = float32(d*float32(int8(s[is+2]))) * float32(q2)
			out[l+64] = float32(d*float32(int8(s[is+4]))) * float32(q3)
			out[l+96] = float32(d*float32(int8(s[is+6]))) * float32(q4)
		}
	}
}

// dequantQ8_K: w = d*q with a float32 d.
func dequantQ8_K(dst []float32, blk []byte) {
	d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
	dst = dst[:QK_K]
	for j, q := range blk[4 : 4+QK_K] {
		dst[j] = d * float32(int8(q))
	}
}
