package kernels

import (
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// f16Table holds tensor.F16ToF32 for every binary16 bit pattern (256 KiB),
// built on first use: a load instead of a branchy conversion per weight.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return t
})

// RoundF16 stores src rounded to binary16 in dst[:len(src)]: tensor.F32ToF16's
// bits for every input (nearest even; a NaN becomes the quiet NaN of its
// sign, 0x7e00 or 0xfe00). The KV cache's F16 pages are written with it, so
// model/ref, which rounds with tensor.F32ToF16, stays bit-identical. On AVX2
// machines it is F16C's VCVTPS2PH (round to nearest even, the same bits:
// TestRoundF16), with NaNs made canonical first, since VCVTPS2PH keeps a
// NaN's top payload bits.
func RoundF16(dst []uint16, src []float32) {
	roundF16Impl(dst[:len(src)], src)
}

var roundF16Impl = roundF16Generic

func roundF16Generic(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, x := range src {
		dst[i] = tensor.F32ToF16(x)
	}
}
