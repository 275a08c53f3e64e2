//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"simd/archsimd"
)

// expLanes runs the exp of the given width on xs (any length) through full
// vectors.
func expLanes(width int, xs []float32) []float32 {
	out := make([]float32, len(xs))
	for j := 0; j < len(xs); j += width {
		var b [16]float32
		copy(b[:width], xs[j:])
		if width == 16 {
			expF32x16(archsimd.LoadFloat32x16(&b)).Store(&b)
		} else {
			expF32x8(archsimd.LoadFloat32x8((*[8]float32)(b[:8]))).Store((*[8]float32)(b[:8]))
		}
		copy(out[j:], b[:width])
	}
	return out
}

// TestExpSIMD measures the vector exp against math.Exp: relative error at
// most expMaxRelErr over [expUnder, expOver] (every float32 of [-88, 0] at a
// stride, a sweep of the positives), exactly 0 below and for -Inf, +Inf above
// and for +Inf, NaN for NaN, and exactly 1 at ±0.
func TestExpSIMD(t *testing.T) {
	widths := []int{8}
	if archsimd.X86.AVX512() {
		widths = append(widths, 16)
	}
	stride := uint32(509) // about 2.2M inputs
	if testing.Short() {
		stride = 4099
	}
	var xs []float32
	// -88 < expUnder: the float32s just past the threshold are checked too.
	for b := uint32(0x80000000); b <= math.Float32bits(-88); b += stride {
		xs = append(xs, math.Float32frombits(b))
	}
	for x := float32(1e-30); x <= expOver; x *= 1.0001 {
		xs = append(xs, x)
	}
	for _, x := range []float32{expUnder, math.Nextafter32(expUnder, 0), expOver, -0.5 * math.Ln2, 0.5 * math.Ln2, -1, 1} {
		xs = append(xs, x)
	}
	for _, w := range widths {
		t.Run(fmt.Sprintf("width=%d", w), func(t *testing.T) {
			got := expLanes(w, xs)
			var worst float64
			var worstX float32
			for i, x := range xs {
				want := math.Exp(float64(x))
				switch {
				case x < expUnder:
					if got[i] != 0 {
						t.Fatalf("exp(%v) = %v, want 0 below expUnder", x, got[i])
					}
					continue
				case x > expOver:
					continue
				}
				rel := math.Abs(float64(got[i])-want) / want
				if rel > worst {
					worst, worstX = rel, x
				}
			}
			t.Logf("max relative error %.3g (%.2f ulp of 1) at x=%v over %d inputs", worst, worst*(1<<23), worstX, len(xs))
			if worst > expMaxRelErr {
				t.Fatalf("max relative error %.3g at x=%v, want ≤ %.3g", worst, worstX, expMaxRelErr)
			}
			inf, nan := float32(math.Inf(1)), float32(math.NaN())
			special := []float32{float32(math.Inf(-1)), -1e30, -104, inf, 1e30, 89, nan, 0, float32(math.Copysign(0, -1))}
			sg := expLanes(w, special)
			for i, want := range []float32{0, 0, 0, inf, inf, inf, nan, 1, 1} {
				if g := sg[i]; !(g == want || (math.IsNaN(float64(g)) && math.IsNaN(float64(want)))) {
					t.Errorf("exp(%v) = %v, want %v", special[i], g, want)
				}
			}
		})
	}
}

// TestSoftmaxSIMD: the attention softmax agrees with the generic (= ref)
// softmax within the exp's error plus the reordered sum, on both vector
// widths and every length around the vector boundaries; and reproduces its
// NaN/±Inf behavior (all NaN when an input is NaN, or when an infinite max
// meets an equal infinity).
func TestSoftmaxSIMD(t *testing.T) {
	for _, avx2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("avx2=%v", avx2), func(t *testing.T) {
			if avx2 {
				defer UseAVX2()()
			}
			r := rand.New(rand.NewPCG(7, 11))
			for n := 1; n <= 70; n++ {
				for _, scale := range []float64{0.1, 3, 30} {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(r.NormFloat64() * scale)
					}
					want, got := append([]float32(nil), x...), append([]float32(nil), x...)
					softmaxGeneric(want)
					softmaxSIMD(got)
					var sum float64
					for i := range got {
						sum += float64(got[i])
						// each weight: exp error + sum reassociation and the division.
						tol := want[i]*(expMaxRelErr*2+float32(n)*1.2e-7) + 0x1p-126 // results below 2^-126 may flush to 0
						if d := math.Abs(float64(got[i] - want[i])); d > float64(tol) {
							t.Fatalf("n=%d scale=%v: out[%d] = %v, generic %v (|Δ| %.3g > %.3g)", n, scale, i, got[i], want[i], d, tol)
						}
					}
					if math.Abs(sum-1) > 1e-5 {
						t.Fatalf("n=%d scale=%v: weights sum to %v", n, scale, sum)
					}
				}
			}
			inf, nan := float32(math.Inf(1)), float32(math.NaN())
			for _, tc := range [][]float32{
				{1, nan, 2}, {nan}, {inf, 1, inf}, {1, inf, 3}, {-inf32(), -inf32()},
				append(make([]float32, 20), nan), append([]float32{nan}, make([]float32, 33)...),
			} {
				want, got := append([]float32(nil), tc...), append([]float32(nil), tc...)
				softmaxGeneric(want)
				softmaxSIMD(got)
				for i := range want {
					if math.IsNaN(float64(want[i])) != math.IsNaN(float64(got[i])) {
						t.Fatalf("softmax(%v) = %v, generic %v", tc, got, want)
					}
				}
			}
			// -Inf scores (masked slots) are zero weights.
			got := []float32{float32(math.Inf(-1)), 0, float32(math.Inf(-1))}
			softmaxSIMD(got)
			if got[0] != 0 || got[1] != 1 || got[2] != 0 {
				t.Fatalf("softmax(-Inf, 0, -Inf) = %v, want [0 1 0]", got)
			}
		})
	}
}

func inf32() float32 { return float32(math.Inf(1)) }

func BenchmarkSoftmaxSIMD(b *testing.B) {
	x := make([]float32, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for _, impl := range []struct {
		name string
		f    func([]float32)
	}{{"generic", softmaxGeneric}, {"simd", softmaxSIMD}} {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				for i := range x {
					x[i] = float32(r.NormFloat64() * 3)
				}
				b.StartTimer()
				impl.f(x)
			}
		})
	}
}

// TestSoftmaxAsmOracle: the assembly softmax gives softmaxSIMD's bits, on
// both widths, at every length around the vector boundaries.
func TestSoftmaxAsmOracle(t *testing.T) {
	for _, avx2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("avx2=%v", avx2), func(t *testing.T) {
			if avx2 {
				defer UseAVX2()()
			}
			r := rand.New(rand.NewPCG(3, 5))
			for n := 1; n <= 80; n++ {
				for _, scale := range []float64{0.1, 3, 30, 300} {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(r.NormFloat64() * scale)
					}
					if n%7 == 0 {
						x[n/2] = float32(math.Inf(-1))
					}
					want, got := append([]float32(nil), x...), append([]float32(nil), x...)
					softmaxSIMD(want)
					softmaxAsm(got)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("n=%d scale=%v: out[%d] = %v, archsimd %v", n, scale, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
}
