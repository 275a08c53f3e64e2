//go:build amd64 && !purego

package kernels

// ropeAsm is ropeGeneric with the RopeAdjacent rotation (the llama
// family's) in AVX2 assembly when the angles come from the cached table and
// ropeDim is a multiple of 8: four pairs a vector, each output the generic
// recipe's two products and one add or subtract, unfused
// (float32(v0·cos) − float32(v1·sin), float32(v0·sin) + float32(v1·cos),
// the second added in the other order, which IEEE addition does not see),
// so the same bits (TestRoPEVsRef). Other shapes, RopeHalf and positions
// past the table take ropeGeneric. In a 32-sequence decode step of the 110m
// model at one thread the generic loop was 1–2% of the time.
func ropeAsm(x []float32, pos int32, heads, headDim, ropeDim int, base float32, style RopeStyle) {
	if style == RopeAdjacent && ropeDim > 0 && ropeDim%8 == 0 && heads > 0 {
		if cs := ropeAngles(pos, ropeDim, base); cs != nil {
			_ = x[(heads-1)*headDim+ropeDim-1]
			_ = cs[ropeDim-1]
			ropeAdjacentAVX2(&x[0], &cs[0], heads, headDim, ropeDim)
			return
		}
	}
	ropeGeneric(x, pos, heads, headDim, ropeDim, base, style)
}

// ropeAdjacentAVX2 rotates the first ropeDim values (a positive multiple of
// 8) of each of heads rows headDim apart at x by the (cos, sin) pairs at cs
// (ropeDim values: pair i/2's cos at cs[i], its sin at cs[i+1]).
//
//go:noescape
func ropeAdjacentAVX2(x, cs *float32, heads, headDim, ropeDim int)

func init() {
	addSelector(func(c isaLevel) {
		ropeImpl = ropeGeneric
		if c >= isaAVX2 && cpuAVX2 {
			ropeImpl = ropeAsm
		}
	})
}
