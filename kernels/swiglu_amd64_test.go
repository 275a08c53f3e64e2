//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// swiGLUAsmMaxRelErr is the bound of the archsimd SwiGLU (its derivation is
// in elementwise_simd_amd64.go: the float32 exp's error plus four roundings
// on each side), which the assembly shares: the same operations in the same
// order.
const swiGLUAsmMaxRelErr = 1e-6

// swiGLUSweep is the input both vector SwiGLUs are held to: a sweep of gate
// over [-100, 100] (step 1e-3, 1e-2 in -short), the exp's cut-offs and large
// ± gates with their neighbours, and up cycling through 1, N(0,1) and
// N(0,1)·1e±30.
func swiGLUSweep(r *rand.Rand) (gate, up []float32) {
	step := float32(1e-3)
	if testing.Short() {
		step = 1e-2
	}
	for g := float32(-100); g <= 100; g += step {
		gate = append(gate, g)
	}
	for _, g := range []float32{-expOver, -expUnder, -88.72, -87.3, -1e10, 1e10, -1e30, 1e30,
		math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-40} {
		gate = append(gate, g, math.Nextafter32(g, 0), math.Nextafter32(g, float32(math.Inf(1))))
	}
	up = make([]float32, len(gate))
	for i := range up {
		switch i % 4 {
		case 0:
			up[i] = 1
		case 1:
			up[i] = float32(r.NormFloat64())
		case 2:
			up[i] = float32(r.NormFloat64() * 1e30)
		default:
			up[i] = float32(r.NormFloat64() * 1e-30)
		}
	}
	return gate, up
}

// checkSwiGLU holds got = SwiGLU(gate, up) to the generic kernel within
// maxRel (plus the absolute terms for results below 2^-119 and subnormals;
// infinities must agree in sign and be near MaxFloat32 on the other side)
// and returns the worst relative error above 2^-100 for gates over -87.
func checkSwiGLU(t *testing.T, gate, up, got []float32, maxRel float64) (worst float64, at float32) {
	t.Helper()
	want := make([]float32, len(gate))
	swiGLUGeneric(want, gate, up)
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsInf(w, 0) || math.IsInf(g, 0) {
			if math.Signbit(g) != math.Signbit(w) || min(math.Abs(g), math.Abs(w)) < math.MaxFloat32*(1-maxRel) {
				t.Fatalf("SwiGLU(%v, %v) = %v, generic %v", gate[i], up[i], g, w)
			}
			continue
		}
		d := math.Abs(g - w)
		if d > maxRel*math.Abs(w)+0x1p-119*math.Abs(float64(up[i]))+0x1p-148 {
			t.Fatalf("SwiGLU(%v, %v) = %v, generic %v: |Δ| %.3g", gate[i], up[i], g, w, d)
		}
		if gate[i] > -87 && w != 0 && math.Abs(w) > 0x1p-100 { // below, the absolute term rules
			if rel := d / math.Abs(w); rel > worst {
				worst, at = rel, gate[i]
			}
		}
	}
	return worst, at
}

// checkSwiGLUSpecials runs the special values through swiGLU in one call,
// so they share vectors and the tail: silu(±0) = ±0, silu(+Inf) = +Inf,
// silu(−Inf) = −0, NaN → NaN, and huge gates.
func checkSwiGLUSpecials(t *testing.T, swiGLU func(dst, gate, up []float32)) {
	t.Helper()
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	tests := []struct{ gate, up, want float32 }{
		{0, 1, 0}, {negZero, 1, negZero}, {inf, 1, inf}, {inf, -2, -inf},
		{-inf, 1, negZero}, {-inf, -3, 0}, {nan, 1, nan}, {1, nan, nan}, {-inf, inf, nan},
		{-1e30, 5, negZero}, {1e30, 2, 2e30},
	}
	g, u := make([]float32, len(tests)), make([]float32, len(tests))
	for i, tc := range tests {
		g[i], u[i] = tc.gate, tc.up
	}
	out := make([]float32, len(tests))
	swiGLU(out, g, u)
	for i, tc := range tests {
		if o := out[i]; !(math.Float32bits(o) == math.Float32bits(tc.want) || (o != o && tc.want != tc.want)) {
			t.Errorf("SwiGLU(%v, %v) = %v, want %v", tc.gate, tc.up, o, tc.want)
		}
	}
}

// TestSwiGLUAsm holds the assembly SwiGLU to the generic one within
// swiGLUAsmMaxRelErr over swiGLUSweep, at lengths that leave every tail and
// unaligned starts; the special values as the archsimd kernel has them; and
// dst aliasing gate.
func TestSwiGLUAsm(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 swiglu: CPU lacks AVX2+FMA+F16C")
	}
	gate, up := swiGLUSweep(rand.New(rand.NewPCG(31, 32)))
	got := make([]float32, len(gate))
	swiGLUAsm(got, gate, up)
	checkSwiGLU(t, gate, up, got, swiGLUAsmMaxRelErr)
	for n := 0; n <= 33; n++ { // every tail, unaligned starts
		off := n % 3
		g, u := gate[1000+off:1000+off+n], up[off:off+n]
		out := make([]float32, n+1)
		out[n] = 7
		swiGLUAsm(out[:n], g, u)
		checkSwiGLU(t, g, u, out[:n], swiGLUAsmMaxRelErr)
		if out[n] != 7 {
			t.Fatalf("n=%d: wrote past dst", n)
		}
	}
	// dst = gate, as the FFN calls it.
	g2 := append([]float32(nil), gate[:37]...)
	swiGLUAsm(g2, g2, up[:37])
	checkSwiGLU(t, gate[:37], up[:37], g2, swiGLUAsmMaxRelErr)
	checkSwiGLUSpecials(t, swiGLUAsm)
}
