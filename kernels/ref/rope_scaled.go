package ref

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
)

// RoPEScaled is RoPE with pair i's frequency divided by factors[i/2] (see
// kernels.RoPEScaledRows for the float recipe).
func RoPEScaled(x []float32, pos int32, heads, headDim, ropeDim int, base float32, factors []float32, style kernels.RopeStyle) {
	if ropeDim%2 != 0 || ropeDim > headDim || len(factors) < ropeDim/2 {
		panic(fmt.Sprintf("ref: RoPEScaled: ropeDim=%d headDim=%d len(factors)=%d", ropeDim, headDim, len(factors)))
	}
	rope(x, pos, heads, headDim, ropeDim, base, factors, style)
}
