//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLUAsm checks the AVX-512 SwiGLU against the generic one within
// the tolerance derived in swiglu_amd64.go, over a sweep of gates in
// [-100, 100], the exp's cut-offs and special values, every length 0–40
// (the padded last vector), and that an element's bits do not depend on
// where it falls in a call.
func TestSwiGLUAsm(t *testing.T) {
	if !cpuAVX512 {
		t.Skip("CPU lacks AVX-512")
	}
	r := rand.New(rand.NewPCG(5, 7))
	var gate []float32
	step := float32(1e-3)
	if testing.Short() {
		step = 1e-2
	}
	for g := float32(-100); g <= 100; g += step {
		gate = append(gate, g)
	}
	for _, g := range []float32{-expOver, -expUnder, -88.72, -87.3, -1e10, 1e10, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1e-40, 0, float32(math.Copysign(0, -1)),
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())} {
		gate = append(gate, g, math.Nextafter32(g, 0))
	}
	up := make([]float32, len(gate))
	for i := range up {
		up[i] = float32(r.NormFloat64())
		if i%3 == 0 {
			up[i] = 1
		}
	}
	want, got := make([]float32, len(gate)), make([]float32, len(gate))
	swiGLUGeneric(want, gate, up)
	swiGLUAsm(got, gate, up)
	for i := range want {
		g, w, x := float64(got[i]), float64(want[i]), float64(gate[i])
		switch {
		case math.IsNaN(x):
			if !math.IsNaN(g) {
				t.Fatalf("SwiGLU(NaN) = %v", g)
			}
		case math.IsInf(x, -1):
			if g != 0 || math.Signbit(g) == math.Signbit(float64(up[i])) { // −0·up
				t.Fatalf("SwiGLU(-Inf, %v) = %v, want -0·up", up[i], g)
			}
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			if math.Signbit(g) != math.Signbit(w) || min(math.Abs(g), math.Abs(w)) < math.MaxFloat32*(1-swiGLUMaxRelErr) {
				t.Fatalf("SwiGLU(%v, %v) = %v, generic %v", gate[i], up[i], g, w)
			}
		default:
			if d := math.Abs(g - w); d > swiGLUMaxRelErr*math.Abs(w)+math.Ldexp(1, -119)*math.Abs(float64(up[i]))+math.Ldexp(1, -148) {
				t.Fatalf("SwiGLU(%v, %v) = %v, generic %v: off by %g", gate[i], up[i], g, w, d)
			}
		}
	}
	// Position and length independence.
	for n := 0; n <= 40; n++ {
		for off := 0; off < 3 && off+n <= len(gate); off++ {
			d := make([]float32, n)
			swiGLUAsm(d, gate[off:off+n], up[off:off+n])
			for i := range d {
				if math.Float32bits(d[i]) != math.Float32bits(got[off+i]) && !(d[i] != d[i] && got[off+i] != got[off+i]) {
					t.Fatalf("n=%d off=%d: element %d = %v, %v in the long call", n, off, i, d[i], got[off+i])
				}
			}
		}
	}
}
