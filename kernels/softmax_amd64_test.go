//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestSoftmaxAsm: the assembly attention softmax, on each vector width this
// CPU has, agrees with softmaxGeneric (= ref) within the exp's error bound
// plus the reordered sum (TestSoftmaxSIMD's tolerance), at every length
// around the vector boundaries and on unaligned slices; reproduces the NaN
// and ±Inf behavior; and gives masked (-Inf) scores zero weight.
func TestSoftmaxAsm(t *testing.T) {
	for _, set := range []string{"avx512", "avx2"} {
		t.Run(set, func(t *testing.T) {
			restore, err := SetISA(set)
			if err != nil {
				t.Fatal(err)
			}
			defer restore()
			if !strings.HasPrefix(Impl(), set) {
				t.Skipf("SKIP %s softmax: not on this CPU (%s)", set, Impl())
			}
			r := rand.New(rand.NewPCG(7, 11))
			for n := 1; n <= 70; n++ {
				for _, scale := range []float64{0.1, 3, 30} {
					buf := make([]float32, n+1)
					x := buf[1:] // unaligned
					for i := range x {
						x[i] = float32(r.NormFloat64() * scale)
					}
					want := append([]float32(nil), x...)
					softmaxGeneric(want)
					softmaxAsm(x)
					var sum float64
					for i := range x {
						sum += float64(x[i])
						tol := want[i]*(expMaxRelErr*2+float32(n)*1.2e-7) + 0x1p-126
						if d := math.Abs(float64(x[i] - want[i])); d > float64(tol) {
							t.Fatalf("n=%d scale=%v: out[%d] = %v, generic %v (|Δ| %.3g > %.3g)", n, scale, i, x[i], want[i], d, tol)
						}
					}
					if math.Abs(sum-1) > 1e-5 {
						t.Fatalf("n=%d scale=%v: weights sum to %v", n, scale, sum)
					}
				}
			}
			inf, nan := float32(math.Inf(1)), float32(math.NaN())
			for _, tc := range [][]float32{
				{1, nan, 2}, {nan}, {inf, 1, inf}, {1, inf, 3}, {-inf, -inf},
				append(make([]float32, 20), nan), append([]float32{nan}, make([]float32, 33)...),
				append(make([]float32, 16), inf, 0, 0), {-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
			} {
				want, got := append([]float32(nil), tc...), append([]float32(nil), tc...)
				softmaxGeneric(want)
				softmaxAsm(got)
				for i := range want {
					wn, gn := math.IsNaN(float64(want[i])), math.IsNaN(float64(got[i]))
					if wn != gn || (!wn && want[i] != got[i]) {
						t.Fatalf("softmax(%v) = %v, generic %v", tc, got, want)
					}
				}
			}
			for _, n := range []int{3, 17, 40} {
				got := make([]float32, n)
				for i := range got {
					got[i] = float32(math.Inf(-1))
				}
				got[n/2] = 0.5
				softmaxAsm(got)
				for i, v := range got {
					if want := float32(map[bool]int{true: 1}[i == n/2]); v != want {
						t.Fatalf("n=%d: one visible score: out[%d] = %v, want %v", n, i, v, want)
					}
				}
			}
		})
	}
}

// TestSoftmaxRowAVX512: the one-call AVX-512 softmax gives softmaxLanes(x,
// 16)'s bits (NaNs compared as NaNs: their payloads follow which operand
// the Go compiler puts first), at every length from 1 to 300 (every tail),
// on unaligned slices with NaN, ±Inf, ±0 and -Inf (masked) scores, all
// scores -Inf, and a guard on both sides that the masked tail must not
// touch.
func TestSoftmaxRowAVX512(t *testing.T) {
	if level != isaAVX512 {
		t.Skipf("SKIP avx512 softmax row: the avx512 set is not selected (CPU or SLUICE_ISA cap: %s)", Impl())
	}
	r := rand.New(rand.NewPCG(7, 13))
	specials := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, float32(math.Copysign(0, -1))}
	const guard = 0x7fc0beef
	for n := 1; n <= 300; n++ {
		for rep := range 12 {
			buf := make([]float32, n+2+rep%3)
			x := buf[1+rep%3 : 1+rep%3+n]
			for i := range buf {
				buf[i] = math.Float32frombits(guard)
			}
			for i := range x {
				x[i] = float32(r.NormFloat64() * []float64{0.5, 5, 50}[rep%3])
				if rep >= 6 && r.IntN(12) == 0 {
					x[i] = specials[r.IntN(len(specials))]
				}
				if rep == 11 {
					x[i] = float32(math.Inf(-1))
				}
			}
			want := append([]float32(nil), x...)
			softmaxLanes(want, 16)
			softmaxRowAVX512(&x[0], n)
			for i := range x {
				wn, gn := want[i] != want[i], x[i] != x[i]
				if wn != gn || (!wn && math.Float32bits(want[i]) != math.Float32bits(x[i])) {
					t.Fatalf("n=%d rep=%d: out[%d] = %v (%#x), softmaxLanes %v (%#x)", n, rep, i, x[i], math.Float32bits(x[i]), want[i], math.Float32bits(want[i]))
				}
			}
			for i, v := range buf {
				if (i < 1+rep%3 || i >= 1+rep%3+n) && math.Float32bits(v) != guard {
					t.Fatalf("n=%d rep=%d: wrote buf[%d] outside the row", n, rep, i)
				}
			}
		}
	}
}

func BenchmarkSoftmaxAsm(b *testing.B) {
	x := make([]float32, 512)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	y := make([]float32, len(x))
	for _, impl := range []struct {
		name string
		f    func([]float32)
	}{{"generic", softmaxGeneric}, {"asm", softmaxAsm}, {"lanes16", func(x []float32) { softmaxLanes(x, 16) }}} {
		b.Run(impl.name, func(b *testing.B) {
			for b.Loop() {
				copy(y, x)
				impl.f(y)
			}
		})
	}
}
