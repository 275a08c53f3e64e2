//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestSwiGLUSIMD measures the vector SwiGLU against the generic one on both
// widths: within swiGLUMaxRelErr (derived in elementwise_simd_amd64.go)
// over swiGLUSweep, and the special values.
func TestSwiGLUSIMD(t *testing.T) {
	gate, up := swiGLUSweep(rand.New(rand.NewPCG(3, 5)))
	for _, avx2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("avx2=%v", avx2), func(t *testing.T) {
			if avx2 {
				defer UseAVX2()()
			}
			got := make([]float32, len(gate))
			swiGLUSIMD(got, gate, up)
			worst, at := checkSwiGLU(t, gate, up, got, swiGLUMaxRelErr)
			t.Logf("max relative error %.3g (%.2f ulp) at gate=%v over %d inputs", worst, worst*(1<<23), at, len(gate))
			checkSwiGLUSpecials(t, swiGLUSIMD)
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
