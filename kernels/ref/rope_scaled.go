package ref

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
)

// RoPEScaled is RoPE with pair i's frequency divided by factors[i/2] (see
// kernels.RoPEScaledRows for the float recipe).
func RoPEScaled(x []float32, pos int32, heads, headDim, ropeDim int, base float32, factors []float32, style kernels.RopeStyle) {
	if ropeDim%2 != 0 || ropeDim > headDim || len(factors) < ropeDim/2 {
		panic(fmt.Sprintf("ref: RoPEScaled: ropeDim=%d headDim=%d len(factors)=%d", ropeDim, headDim, len(factors)))
	}
	for h := 0; h < heads; h++ {
		head := x[h*headDim : (h+1)*headDim]
		for i := 0; i < ropeDim; i += 2 {
			freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
			freq /= factors[i/2]
			val := float32(pos) * freq
			fcr := float32(math.Cos(float64(val)))
			fci := float32(math.Sin(float64(val)))
			var a, b int
			switch style {
			case kernels.RopeAdjacent:
				a, b = i, i+1
			case kernels.RopeHalf:
				a, b = i/2, i/2+ropeDim/2
			default:
				panic(fmt.Sprintf("ref: RoPEScaled: unknown style %d", style))
			}
			v0, v1 := head[a], head[b]
			head[a] = float32(v0*fcr) - float32(v1*fci)
			head[b] = float32(v0*fci) + float32(v1*fcr)
		}
	}
}
