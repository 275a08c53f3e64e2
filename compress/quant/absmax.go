package quant

import (
	"encoding/binary"
	"math"
)

// Largest code of the symmetric absmax schemes: 2^(b-1) - 1.
const (
	qmax8 = 127
	qmax4 = 7
)

func absmax(src []float32) float32 {
	var amax float32
	for _, v := range src {
		if a := float32(math.Abs(float64(v))); a > amax || a != a {
			amax = a // a NaN sticks, so the group's scale is visibly broken
		}
	}
	return amax
}

// absmaxCode is round(v/s) clamped to [-qmax, qmax]; 0 when s is 0 or the
// quotient is NaN.
func absmaxCode(v, s float32, qmax int) int {
	if s == 0 {
		return 0
	}
	r := math.Round(float64(v / s))
	switch {
	case r != r:
		return 0
	case r > float64(qmax):
		return qmax
	case r < -float64(qmax):
		return -qmax
	}
	return int(r)
}

func putScale(dst []byte, s float32) { binary.LittleEndian.PutUint32(dst, math.Float32bits(s)) }

func scaleOf(src []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(src)) }

// quantizeInt8 writes one group: f32 s, then n int8 codes.
func quantizeInt8(dst []byte, src []float32) {
	s := absmax(src) / qmax8
	putScale(dst, s)
	for i, v := range src {
		dst[4+i] = byte(int8(absmaxCode(v, s, qmax8)))
	}
}

func dequantizeInt8(dst []float32, src []byte) {
	s := scaleOf(src)
	for i := range dst {
		dst[i] = s * float32(int8(src[4+i]))
	}
}

// quantizeInt4 writes one group: f32 s, then codes+8 two per byte, the even
// weight in the low nibble.
func quantizeInt4(dst []byte, src []float32) {
	s := absmax(src) / qmax4
	putScale(dst, s)
	codes := dst[4 : 4+(len(src)+1)/2]
	clear(codes)
	for i, v := range src {
		c := byte(absmaxCode(v, s, qmax4) + 8)
		codes[i/2] |= c << (4 * (i & 1))
	}
}

func dequantizeInt4(dst []float32, src []byte) {
	s := scaleOf(src)
	for i := range dst {
		c := src[4+i/2] >> (4 * (i & 1)) & 0x0f
		dst[i] = s * float32(int(c)-8)
	}
}
