//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"simd/archsimd"
)

// TestSwiGLUSIMD measures the vector SwiGLU against the generic one on both
// widths: relative error ≤ swiGLUMaxRelErr (plus the absolute terms derived
// in elementwise_simd_amd64.go) over a fine sweep of gate in [-100, 100], the
// exp's cut-offs, large ± gates and random up; and the special values:
// silu(±0) = ±0, silu(+Inf) = +Inf, silu(−Inf) = −0, NaN → NaN.
func TestSwiGLUSIMD(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	var gate []float32
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
	up := make([]float32, len(gate))
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
	for _, avx2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("avx2=%v", avx2), func(t *testing.T) {
			if avx2 {
				defer UseAVX2()()
			}
			want, got := make([]float32, len(gate)), make([]float32, len(gate))
			swiGLUGeneric(want, gate, up)
			swiGLUSIMD(got, gate, up)
			var worst float64
			var worstG float32
			for i := range want {
				g, w := float64(got[i]), float64(want[i])
				if math.IsInf(w, 0) || math.IsInf(g, 0) {
					if math.Signbit(g) != math.Signbit(w) || min(math.Abs(g), math.Abs(w)) < math.MaxFloat32*(1-swiGLUMaxRelErr) {
						t.Fatalf("SwiGLU(%v, %v) = %v, generic %v", gate[i], up[i], g, w)
					}
					continue
				}
				d := math.Abs(g - w)
				if d > swiGLUMaxRelErr*math.Abs(w)+0x1p-119*math.Abs(float64(up[i]))+0x1p-148 {
					t.Fatalf("SwiGLU(%v, %v) = %v, generic %v: |Δ| %.3g", gate[i], up[i], g, w, d)
				}
				if gate[i] > -87 && w != 0 && math.Abs(w) > 0x1p-100 { // below, the absolute term rules
					if rel := d / math.Abs(w); rel > worst {
						worst, worstG = rel, gate[i]
					}
				}
			}
			t.Logf("max relative error %.3g (%.2f ulp) at gate=%v over %d inputs", worst, worst*(1<<23), worstG, len(gate))

			inf, nan := float32(math.Inf(1)), float32(math.NaN())
			negZero := float32(math.Copysign(0, -1))
			tests := []struct{ gate, up, want float32 }{
				{0, 1, 0}, {negZero, 1, negZero}, {inf, 1, inf}, {inf, -2, -inf},
				{-inf, 1, negZero}, {-inf, -3, 0}, {nan, 1, nan}, {1, nan, nan}, {-inf, inf, nan},
				{-1e30, 5, negZero}, {1e30, 2, 2e30},
			}
			// All in one call, so they share vectors and the tail.
			g, u := make([]float32, len(tests)), make([]float32, len(tests))
			for i, tc := range tests {
				g[i], u[i] = tc.gate, tc.up
			}
			out := make([]float32, len(tests))
			swiGLUSIMD(out, g, u)
			for i, tc := range tests {
				if o := out[i]; !(math.Float32bits(o) == math.Float32bits(tc.want) || (o != o && tc.want != tc.want)) {
					t.Errorf("SwiGLU(%v, %v) = %v, want %v", tc.gate, tc.up, o, tc.want)
				}
			}
		})
	}
}

func TestSwiGLUSIMDNoAlloc(t *testing.T) {
	dst, gate, up := make([]float32, 5632+7), make([]float32, 5632+7), make([]float32, 5632+7)
	if a := testing.AllocsPerRun(10, func() { SwiGLU(dst, gate, up) }); a != 0 {
		t.Fatalf("SwiGLU allocates %v times per call", a)
	}
}

// BenchmarkSwiGLUImpl compares the generic and vector SwiGLU at a 1b model's
// hidden size in one run.
func BenchmarkSwiGLUImpl(b *testing.B) {
	const n = 5632
	r := rand.New(rand.NewPCG(1, 2))
	gate, up, dst := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range gate {
		gate[i], up[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
	}
	for _, impl := range []struct {
		name string
		f    func(dst, gate, up []float32)
	}{{"generic", swiGLUGeneric}, {"simd", swiGLUSIMD}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(3 * 4 * n)
			for b.Loop() {
				impl.f(dst, gate, up)
			}
		})
	}
}

// TestSwiGLUAsmMatchesSIMD: the assembly SwiGLU of the default build gives
// the archsimd one's bits (the same operations lane for lane).
func TestSwiGLUAsmMatchesSIMD(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("CPU lacks AVX-512")
	}
	r := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 4099} {
		gate, up := make([]float32, n), make([]float32, n)
		for i := range gate {
			gate[i] = float32(r.NormFloat64() * 30)
			up[i] = float32(r.NormFloat64())
			if r.IntN(50) == 0 {
				gate[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), -90, 90}[r.IntN(5)]
			}
		}
		want, got := make([]float32, n), make([]float32, n)
		swiGLU16(want, gate, up)
		swiGLUAsm(got, gate, up)
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
				t.Fatalf("n=%d: [%d] SwiGLU(%v, %v) = %v, archsimd %v", n, i, gate[i], up[i], got[i], want[i])
			}
		}
	}
}
