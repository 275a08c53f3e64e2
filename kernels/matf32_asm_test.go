//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"simd/archsimd"
)

// TestF32Rows checks the assembly row dot equals dotF32x16 bit for bit,
// including tails, specials and rows ending at the end of the allocation.
func TestF32Rows(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("CPU lacks AVX-512")
	}
	r := rand.New(rand.NewPCG(7, 8))
	specials := []float32{0, float32(math.Copysign(0, -1)), 1e-40, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.MaxFloat32}
	for cols := 1; cols <= 70; cols++ {
		for _, rows := range []int{1, 2, 5} {
			w := make([]float32, rows*cols)
			x := make([]float32, cols)
			for i := range w {
				w[i] = float32(r.NormFloat64())
				if r.IntN(50) == 0 {
					w[i] = specials[r.IntN(len(specials))]
				}
			}
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			got := make([]float32, rows+1)
			got[rows] = -3
			f32Rows(&got[0], &w[0], cols, rows, &x[0])
			for k := range rows {
				want := dotF32x16(w[k*cols:(k+1)*cols], x)
				if math.Float32bits(want) != math.Float32bits(got[k]) && !(want != want && got[k] != got[k]) {
					t.Fatalf("cols %d row %d: %v, want %v", cols, k, got[k], want)
				}
			}
			if got[rows] != -3 {
				t.Fatalf("cols %d: wrote past nrows", cols)
			}
		}
	}
}

func BenchmarkF32Rows(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ rows, cols int }{{8192, 2048}, {768, 768}, {2048, 768}} {
		w := make([]float32, c.rows*c.cols)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		x := make([]float32, c.cols)
		dst := make([]float32, c.rows)
		wb := unsafeF32Bytes(w)
		b.Run(fmt.Sprintf("go/%dx%d", c.rows, c.cols), func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				matF32AVX512(dst, wb, x, 1, c.rows, c.cols, 0, c.rows)
			}
		})
		b.Run(fmt.Sprintf("asm/%dx%d", c.rows, c.cols), func(b *testing.B) {
			b.SetBytes(int64(4 * len(w)))
			for b.Loop() {
				f32Rows(&dst[0], &w[0], c.cols, c.rows, &x[0])
			}
		})
	}
}

func unsafeF32Bytes(w []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
}
