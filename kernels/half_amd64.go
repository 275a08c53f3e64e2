//go:build amd64 && !purego

package kernels

func init() {
	addSelector(func(c isaLevel) {
		roundF16Impl, roundScalesImpl = roundF16Generic, roundScalesGeneric
		if c >= isaAVX2 && cpuAVX2 {
			roundF16Impl, roundScalesImpl = roundF16F16C, roundScalesF16CTail
		}
	})
}

// roundF16F16C is RoundF16 with VCVTPS2PH over the multiple of 8, the
// generic loop for the tail.
func roundF16F16C(dst []uint16, src []float32) {
	n := len(src)
	dst = dst[:n]
	if n8 := n &^ 7; n8 > 0 {
		f32ToF16F16C(&dst[0], &src[0], n8)
	}
	roundF16Generic(dst[n&^7:], src[n&^7:])
}

// f32ToF16F16C sets dst[i] = VCVTPS2PH(src[i]) rounding to nearest even
// for i < n (a multiple of 8), each NaN first replaced by the quiet NaN of
// its sign (half_amd64.s).
//
//go:noescape
func f32ToF16F16C(dst *uint16, src *float32, n int)

// roundScalesF16CTail is roundScalesGeneric with F16C over the multiple of
// 8, the generic loop for the tail.
func roundScalesF16CTail(d []float32) {
	n8 := len(d) &^ 7
	if n8 > 0 {
		roundScalesF16C(&d[0], n8)
	}
	roundScalesGeneric(d[n8:])
}

// roundScalesF16C sets d[i] = VCVTPH2PS(VCVTPS2PH(d[i])), rounding to
// nearest even, where d[i] <= 65504 (not NaN, not above binary16's largest
// finite value), for i < n (a multiple of 8): roundScalesGeneric's rule,
// with tensor.F32ToF16's rounding (TestRoundF16) and an exact widening.
//
//go:noescape
func roundScalesF16C(d *float32, n int)
