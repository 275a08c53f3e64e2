package tensor

import (
	"encoding/binary"
	"math"
)

// F16ToF32 converts an IEEE 754 binary16 value, including subnormals, ±Inf and NaN.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0 && mant == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: renormalise
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		mant &= 0x3ff
		return math.Float32frombits(sign | e<<23 | mant<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 rounds to nearest even, as numpy and ggml's GGML_FP32_TO_FP16 do.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff { // Inf or NaN (keep NaN quiet and non-zero)
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := mant >> shift
		rem := mant & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(r)
}

// BF16ToF32 widens a bfloat16 (the top half of a float32).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F32Bytes returns v in the F32 layout of GGUF, llama2.c and safetensors
// data: little-endian IEEE 754 binary32, bits unchanged (NaN payloads too).
func F32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// DequantizeRow writes n float32 values decoded from src (laid out as dtype t)
// into dst. It is the plain reference decoding every kernel is tested against.
// Extension dtypes (see RegisterCodec) are decoded by their Codec.
func DequantizeRow(dst []float32, src []byte, t DType, n int) {
	dst = dst[:n]
	switch t {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case Q8_0:
		for b := 0; b < n/QK8_0; b++ {
			blk := src[b*Q8_0BlockLen:]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			for j := 0; j < QK8_0; j++ {
				dst[b*QK8_0+j] = d * float32(int8(blk[2+j]))
			}
		}
	case Q4_0:
		for b := 0; b < n/QK4_0; b++ {
			blk := src[b*Q4_0BlockLen:]
			d := F16ToF32(binary.LittleEndian.Uint16(blk))
			for j := 0; j < QK4_0/2; j++ {
				q := blk[2+j]
				dst[b*QK4_0+j] = d * float32(int32(q&0x0f)-8)
				dst[b*QK4_0+j+QK4_0/2] = d * float32(int32(q>>4)-8)
			}
		}
	default:
		if dequantBlocks(dst, src, t, n) {
			return
		}
		c, ok := LookupCodec(t)
		if !ok {
			panic("tensor: DequantizeRow of unsupported dtype " + t.String())
		}
		c.DequantizeRow(dst, src, n)
	}
}

// QuantizeRowQ8_0 encodes n float32 values (n a multiple of 32) as llama.cpp's
// quantize_row_q8_0_ref does: d = absmax/127, q = roundf(x/d) (ties away from zero).
func QuantizeRowQ8_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK8_0; b++ {
		x := src[b*QK8_0 : (b+1)*QK8_0]
		var amax float32
		for _, v := range x {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*Q8_0BlockLen:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j, v := range x {
			blk[2+j] = byte(int8(math.Round(float64(v * id)))) // roundf: ties away from zero
		}
	}
}

// QuantizeRowQ4_0 encodes as llama.cpp's quantize_row_q4_0_ref: the signed value
// of largest magnitude maps to -8, d = max/-8, q = min(15, trunc(x/d + 8.5)).
func QuantizeRowQ4_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK4_0; b++ {
		x := src[b*QK4_0 : (b+1)*QK4_0]
		var amax, mx float32
		for _, v := range x {
			if a := float32(math.Abs(float64(v))); a > amax {
				amax, mx = a, v
			}
		}
		d := mx / -8
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*Q4_0BlockLen:]
		binary.LittleEndian.PutUint16(blk, F32ToF16(d))
		for j := 0; j < QK4_0/2; j++ {
			x0 := min(15, int8(x[j]*id+8.5))
			x1 := min(15, int8(x[j+QK4_0/2]*id+8.5))
			blk[2+j] = byte(x0) | byte(x1)<<4
		}
	}
}
