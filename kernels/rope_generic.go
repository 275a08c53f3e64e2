package kernels

import "math"

// ropeAngle is the shared float recipe (see RoPE): the cos and sin of
// pos·ropeFreq(i).
func ropeAngle(pos int32, i, ropeDim int, base float32) (cos, sin float32) {
	return ropeCosSin(pos, ropeFreq(i, ropeDim, base))
}

// ropeFreq is pair i's frequency, base^(−i/ropeDim), in ropeAngle's float32
// steps.
func ropeFreq(i, ropeDim int, base float32) float32 {
	return 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
}

// ropeCosSin is ropeAngle's rest: the angle pos·freq in float32, its cos
// and sin in float64, rounded to float32.
func ropeCosSin(pos int32, freq float32) (cos, sin float32) {
	val := float32(pos) * freq
	return float32(math.Cos(float64(val))), float32(math.Sin(float64(val)))
}

func ropeGeneric(x []float32, pos int32, heads, headDim, ropeDim int, base float32, style RopeStyle) {
	cs := ropeAngles(pos, ropeDim, base)
	for i := 0; i < ropeDim; i += 2 {
		var fcr, fci float32
		if cs != nil {
			fcr, fci = cs[i], cs[i+1]
		} else {
			fcr, fci = ropeAngle(pos, i, ropeDim, base)
		}
		a, b := i, i+1
		if style == RopeHalf {
			a, b = i/2, i/2+ropeDim/2
		}
		for h := 0; h < heads; h++ {
			v := x[h*headDim : (h+1)*headDim]
			v0, v1 := v[a], v[b]
			v[a] = float32(v0*fcr) - float32(v1*fci)
			v[b] = float32(v0*fci) + float32(v1*fcr)
		}
	}
}
