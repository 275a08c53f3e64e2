package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// eachCase runs f for every awkward size, start offset 0–3 and value kind.
func eachCase(t *testing.T, f func(t *testing.T, n, off int, k kind)) {
	for _, k := range []kind{normal, special} {
		t.Run(k.String(), func(t *testing.T) {
			for _, n := range sizes {
				for _, off := range offsets() {
					f(t, n, off, k)
				}
			}
		})
	}
}

// at returns a copy of v that starts at offset off of its backing array.
func at(v []float32, off int) []float32 {
	return append(make([]float32, off, off+len(v)), v...)[off:]
}

func TestDotVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		a, b := at(vec(r, n, k), off), at(vec(r, n, k), 3-off)
		want, got := ref.Dot(a, b), kernels.Dot(a, b)
		if !same(want, got) {
			t.Fatalf("n=%d off=%d: Dot = %v, ref %v", n, off, got, want)
		}
	})
	mustPanic(t, "kernels: Dot:", func() { kernels.Dot(make([]float32, 3), make([]float32, 2)) })
}

// TestDotOrder pins the sequential float32 order: 1e8 + 1 - 1e8 loses the 1
// left to right, whatever a pairwise or reversed sum would give.
func TestDotOrder(t *testing.T) {
	a := []float32{1e8, 1, -1e8, 1}
	b := []float32{1, 1, 1, 1}
	if got := kernels.Dot(a, b); got != 1 {
		t.Fatalf("Dot = %v, want 1 (sequential float32 sum)", got)
	}
}

func TestRMSNormVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		x, w := at(vec(r, n, k), off), vec(r, n, normal)
		want := make([]float32, n)
		ref.RMSNorm(want, x, w, 1e-5)
		buf, dst := guarded(n, off)
		kernels.RMSNorm(dst, x, w, 1e-5)
		checkGuard(t, buf, off, n)
		requireSame(t, fmt.Sprintf("n=%d off=%d", n, off), want, dst)
		kernels.RMSNorm(x, x, w, 1e-5) // in place
		requireSame(t, fmt.Sprintf("in place n=%d off=%d", n, off), want, x)
	})
}

func TestRMSNormHand(t *testing.T) {
	// x = (3, 4): mean square 12.5, 1/sqrt(12.5+0) = 0.28284…; weight (1, 2).
	dst := make([]float32, 2)
	kernels.RMSNorm(dst, []float32{3, 4}, []float32{1, 2}, 0)
	want := []float64{3 / math.Sqrt(12.5), 8 / math.Sqrt(12.5)}
	for i := range want {
		if math.Abs(float64(dst[i])-want[i]) > 1e-6 {
			t.Fatalf("RMSNorm = %v, want %v", dst, want)
		}
	}
}

func TestSoftmaxVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		want := vec(r, n, k)
		for i := range want {
			want[i] *= 10
		}
		got := at(want, off)
		ref.Softmax(want)
		kernels.Softmax(got)
		requireSame(t, fmt.Sprintf("n=%d off=%d", n, off), want, got)
	})
}

func TestSoftmaxCases(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	tests := []struct {
		name    string
		in, out []float32 // NaN in out means "must be NaN"
	}{
		{"uniform", []float32{2, 2, 2, 2}, []float32{0.25, 0.25, 0.25, 0.25}},
		{"one", []float32{-7}, []float32{1}},
		{"huge logits stay finite", []float32{1e30, 1e30}, []float32{0.5, 0.5}},
		{"minus inf is zero weight", []float32{0, float32(math.Inf(-1))}, []float32{1, 0}},
		{"NaN poisons all", []float32{1, nan, 2}, []float32{nan, nan, nan}},
		{"+Inf poisons all", []float32{inf, 0}, []float32{nan, nan}},
		{"empty", []float32{}, []float32{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := append([]float32(nil), tc.in...)
			kernels.Softmax(got)
			for i := range tc.out {
				w, g := tc.out[i], got[i]
				if (w != w) != (g != g) || (w == w && math.Abs(float64(w-g)) > 1e-7) {
					t.Fatalf("Softmax(%v) = %v, want %v", tc.in, got, tc.out)
				}
			}
		})
	}
}

func TestSiLUVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		want := vec(r, n, k)
		got := at(want, off)
		ref.SiLU(want)
		kernels.SiLU(got)
		requireSame(t, fmt.Sprintf("n=%d off=%d", n, off), want, got)
	})
	x := []float32{0, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), -100}
	kernels.SiLU(x)
	want := []float64{0, 1 / (1 + math.Exp(-1)), -1 / (1 + math.E), math.Inf(1), math.NaN(), 0}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(float64(x[i])) || math.Abs(float64(x[i])-want[i]) > 1e-6 {
			t.Fatalf("SiLU element %d = %v, want %v", i, x[i], want[i])
		}
	}
}

func TestSwiGLUVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		gate, up := at(vec(r, n, k), off), vec(r, n, k)
		want := make([]float32, n)
		ref.SwiGLU(want, gate, up)
		buf, dst := guarded(n, off)
		kernels.SwiGLU(dst, gate, up)
		checkGuard(t, buf, off, n)
		requireSwiGLURef(t, fmt.Sprintf("n=%d off=%d", n, off), gate, up, want, dst)
		g := append([]float32(nil), gate...)
		kernels.SwiGLU(g, g, up) // in place over gate
		requireSame(t, fmt.Sprintf("in place n=%d off=%d", n, off), dst, g)
	})
	mustPanic(t, "kernels: SwiGLU:", func() { kernels.SwiGLU(make([]float32, 3), make([]float32, 3), make([]float32, 2)) })
}

// swiGLUTol is the relative tolerance of the archsimd SwiGLU against ref
// (swiGLUMaxRelErr, derived in elementwise_simd_amd64.go).
const swiGLUTol = 1e-6

// requireSwiGLURef checks SwiGLU(gate, up) against want = ref.SwiGLU: bit for
// bit on the generic kernels; on a fast path within
// swiGLUTol·|want| + 2^-119·|up| + 2^-148, NaN where ref is NaN, except that
// silu(−Inf) is −0 (ref computes −Inf·0 = NaN), so got = −0·up there, and a
// result beyond MaxFloat32·(1 − swiGLUTol) may be ±Inf on either side.
func requireSwiGLURef(t *testing.T, what string, gate, up, want, got []float32) {
	t.Helper()
	if kernels.SwiGLUExact() {
		requireSame(t, what, want, got)
		return
	}
	for i := range want {
		g, w, u := float64(got[i]), float64(want[i]), float64(up[i])
		if math.IsInf(float64(gate[i]), -1) {
			w = float64(float32(math.Copysign(0, -1)) * up[i])
		}
		ok := false
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			ok = math.IsNaN(w) && math.IsNaN(g)
		case math.IsInf(w, 0) || math.IsInf(g, 0):
			ok = math.Signbit(g) == math.Signbit(w) && min(math.Abs(g), math.Abs(w)) >= math.MaxFloat32*(1-swiGLUTol)
		default:
			ok = math.Abs(g-w) <= swiGLUTol*math.Abs(w)+0x1p-119*math.Abs(u)+0x1p-148
		}
		if !ok {
			t.Fatalf("%s (%s): element %d: SwiGLU(gate %v, up %v) = %v, ref %v", what, kernels.Impl(), i, gate[i], up[i], got[i], want[i])
		}
	}
}

func TestAddVsRef(t *testing.T) {
	eachCase(t, func(t *testing.T, n, off int, k kind) {
		r := newRand(t, uint64(n), uint64(off))
		a, init := vec(r, n, k), vec(r, n, k)
		want := append([]float32(nil), init...)
		ref.Add(want, a)
		buf, dst := guarded(n, off)
		copy(dst, init)
		kernels.Add(dst, at(a, 3-off))
		checkGuard(t, buf, off, n)
		requireSame(t, fmt.Sprintf("n=%d off=%d", n, off), want, dst)
	})
	mustPanic(t, "kernels: Add:", func() { kernels.Add(make([]float32, 3), make([]float32, 2)) })
}
