package kernels

import (
	"fmt"
	"math"
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// GELU's tanh approximation as ggml writes it (ggml_gelu_f32):
//
//	0.5·x·(1 + tanh(√(2/π)·x·(1 + 0.044715·x²)))
const (
	geluCoefA     = 0.044715
	geluSqrt2ByPi = 0.79788456080286535587989211986876
)

// GELUTanh is that formula in float32, each product rounded on its own
// (float32(a*b), the package's recipe) and tanh taken in float64 and
// rounded once.
func GELUTanh(x float32) float32 {
	inner := float32(geluSqrt2ByPi*x) * (1 + float32(float32(geluCoefA*x)*x))
	return float32(0.5*x) * (1 + float32(math.Tanh(float64(inner))))
}

// geluF16 is ggml's GELU table (ggml_table_gelu_f16): for every f16 bit
// pattern h, the f16 rounding of GELUTanh(h).
var geluF16 = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for h := range t {
		t[h] = tensor.F16ToF32(tensor.F32ToF16(GELUTanh(tensor.F16ToF32(uint16(h)))))
	}
	return &t
})

// geGLUImpl is ggml's CPU GEGLU (ggml_vec_geglu_f32 with GGML_GELU_FP16,
// the default build):
//
//	x := gate[i]
//	x <= -10: dst[i] = 0
//	x >= 10:  dst[i] = x * up[i]
//	else:     dst[i] = f16(GELUTanh(f16(x))) * up[i]   (f16(): round to nearest even)
var geGLUImpl = geGLUGeneric

// GeGLU sets dst = gelu(gate)·up elementwise over len(dst) values with
// GELU's tanh approximation computed as ggml's CPU backend does: the input
// rounded to f16, the result looked up in (rounded to) f16, identity beyond
// ±10 (Gemma's feed-forward gate). dst may be gate or up. It panics if gate
// or up is shorter than dst.
func GeGLU(dst, gate, up []float32) {
	if len(gate) < len(dst) || len(up) < len(dst) {
		panic(fmt.Sprintf("kernels: GeGLU: len(dst)=%d, len(gate)=%d, len(up)=%d", len(dst), len(gate), len(up)))
	}
	geGLUImpl(dst, gate, up)
}

func geGLUGeneric(dst, gate, up []float32) {
	gate = gate[:len(dst)]
	up = up[:len(dst)]
	t := geluF16()
	for i, x := range gate {
		switch {
		case x <= -10:
			dst[i] = 0
		case x >= 10:
			dst[i] = x * up[i]
		default:
			dst[i] = t[tensor.F32ToF16(x)] * up[i]
		}
	}
}

// softcapImpl is ggml's scale, tanh, scale:
//
//	inv := 1 / c; for i, v := range x { x[i] = float32(math.Tanh(float64(v * inv))) * c }
var softcapImpl = softcapGeneric

// Softcap replaces x by c·tanh(x/c) in place (Gemma 2's logit
// soft-capping), computed as llama.cpp's graph does: x·(1/c), tanh, ·c.
// c must be positive.
func Softcap(x []float32, c float32) {
	if !(c > 0) {
		panic(fmt.Sprintf("kernels: Softcap: cap %v, want > 0", c))
	}
	softcapImpl(x, c)
}

func softcapGeneric(x []float32, c float32) {
	inv := 1 / c
	for i, v := range x {
		x[i] = float32(math.Tanh(float64(v*inv))) * c
	}
}

// scaleImpl is: for i := range x { x[i] *= s }
var scaleImpl = scaleGeneric

// Scale multiplies x by s in place (ggml_scale).
func Scale(x []float32, s float32) { scaleImpl(x, s) }

func scaleGeneric(x []float32, s float32) {
	for i := range x {
		x[i] *= s
	}
}
