package ref

import (
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// GELUTanh is ggml's tanh approximation of GELU,
// 0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²))), in float32 with every
// product rounded on its own and tanh in float64 rounded once.
func GELUTanh(x float32) float32 {
	const a, s = 0.044715, 0.79788456080286535587989211986876
	inner := float32(s*x) * (1 + float32(float32(a*x)*x))
	return float32(0.5*x) * (1 + float32(math.Tanh(float64(inner))))
}

// GeGLU sets dst[i] = gelu(gate[i])·up[i] as ggml's CPU backend computes it:
// 0 for gate ≤ -10, gate·up for gate ≥ 10, otherwise GELUTanh of the gate
// rounded to f16, itself rounded to f16 (ggml's table), times up.
func GeGLU(dst, gate, up []float32) {
	for i := range dst {
		x := gate[i]
		switch {
		case x <= -10:
			dst[i] = 0
		case x >= 10:
			dst[i] = x * up[i]
		default:
			h := tensor.F16ToF32(tensor.F32ToF16(x))
			g := tensor.F16ToF32(tensor.F32ToF16(GELUTanh(h)))
			dst[i] = g * up[i]
		}
	}
}

// Softcap sets x[i] = c·tanh(x[i]/c), as x[i]·(1/c), tanh, ·c.
func Softcap(x []float32, c float32) {
	inv := 1 / c
	for i := range x {
		x[i] = float32(math.Tanh(float64(x[i]*inv))) * c
	}
}

// Scale sets x[i] *= s.
func Scale(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}
