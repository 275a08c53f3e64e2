package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestQuantizeBlockQ8 checks the activation quantizer's contract directly:
// |x − d·q| ≤ d/2 (with a relative slack for float rounding), |q| ≤ 127, the
// largest |x| maps to ±127, zero blocks give d = 0, non-finite blocks d = NaN.
func TestQuantizeBlockQ8(t *testing.T) {
	mk := func(f func(j int) float32) []float32 {
		x := make([]float32, tile)
		for j := range x {
			x[j] = f(j)
		}
		return x
	}
	tests := []struct {
		name string
		x    []float32
	}{
		{"ramp", mk(func(j int) float32 { return float32(j) - 15.5 })},
		{"tiny", mk(func(j int) float32 { return float32(j) * 1e-42 })},
		{"huge", mk(func(j int) float32 { return float32(j-16) * 1e37 })},
		{"one spike", mk(func(j int) float32 { return float32(j/31) * 3 })},
		{"zeros", mk(func(int) float32 { return 0 })},
		{"nan", mk(func(j int) float32 { return float32(map[bool]float64{true: math.NaN()}[j == 7]) })},
		{"inf", mk(func(j int) float32 { return float32(map[bool]float64{true: math.Inf(-1)}[j == 3]) })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := make([]int8, tile)
			d := quantizeBlockQ8(q, tc.x)
			var amax float64
			finite := true
			for _, v := range tc.x {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					finite = false
				}
				amax = max(amax, math.Abs(float64(v)))
			}
			switch {
			case !finite:
				if !math.IsNaN(float64(d)) {
					t.Fatalf("d = %v for a non-finite block, want NaN", d)
				}
				return
			case amax == 0:
				if d != 0 {
					t.Fatalf("d = %v for a zero block, want 0", d)
				}
				return
			}
			peak := false
			for j, v := range tc.x {
				if q[j] < -127 {
					t.Fatalf("q[%d] = %d < -127", j, q[j])
				}
				if math.Abs(float64(v)) == amax && (q[j] == 127 || q[j] == -127) {
					peak = true
				}
				err := math.Abs(float64(v) - float64(d)*float64(q[j]))
				// A subnormal d is itself rounded (to a multiple of 2^-149), an
				// error that |q| ≤ 127 multiplies.
				if lim := float64(d)/2*(1+1e-6) + 127*0x1p-149; err > lim {
					t.Fatalf("x[%d]=%v → q=%d, d=%v: error %v > %v", j, v, q[j], d, err, lim)
				}
			}
			if !peak && float64(d) > 0 {
				t.Fatalf("largest |x| (%v) not quantized to ±127 (d=%v)", amax, d)
			}
		})
	}
}

func TestBlockSum(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 2))
	q := make([]int8, tile)
	for k := range 2000 {
		var want int32
		for j := range q {
			switch {
			case k == 0:
				q[j] = -128
			case k == 1:
				q[j] = 127
			default:
				q[j] = int8(r.Uint32())
			}
			want += int32(q[j])
		}
		if got := blockSum(q); got != want {
			t.Fatalf("blockSum(%v) = %d, want %d", q, got, want)
		}
	}
}
