//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"simd/archsimd"

	"github.com/sluicehq/sluice/tensor"
)

// randomQ8_0 returns rows×cols of Q8_0 blocks with random bytes, the scales
// drawn from a mix that includes 0, subnormals, ±Inf and NaN.
func randomQ8_0(r *rand.Rand, rows, cols int) []byte {
	w := make([]byte, rows*cols/tile*q8Blk)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	specials := []uint16{0, 0x8000, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e00, 0x7bff}
	for b := 0; b < len(w); b += q8Blk {
		h := uint16(0x2000 + r.IntN(0x1000)) // ≈ 0.008 … 0.06
		if r.IntN(8) == 0 {
			h = specials[r.IntN(len(specials))]
		}
		if r.IntN(2) == 0 {
			h |= 0x8000
		}
		w[b], w[b+1] = byte(h), byte(h>>8)
	}
	return w
}

// TestMatQ8_0VNNI checks the assembly kernel gives exactly matQ8_0Fast's
// bits on every shape, sub-range and input count, including zero,
// subnormal, infinite and NaN scales and activations.
func TestMatQ8_0VNNI(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() || !archsimd.X86.AVX512() {
		t.Skip("CPU lacks AVX-512 VNNI: the assembly Q8_0 kernel is not used")
	}
	r := rand.New(rand.NewPCG(3, 4))
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	for _, cols := range []int{32, 64, 96, 160, 288, 768, 2048} {
		for _, rows := range []int{1, 2, 3, 5, 8, 9, 33} {
			for _, blk := range []int{256 << 10, 3 * cols / tile * q8Blk} {
				rowBlockBytes = blk
				w := randomQ8_0(r, rows, cols)
				for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 9, 17} {
					x := make([]float32, n*cols)
					for j := range x {
						x[j] = float32(r.NormFloat64())
						if r.IntN(200) == 0 {
							x[j] = []float32{0, float32(math.Inf(1)), float32(math.NaN()), 1e-40}[r.IntN(4)]
						}
					}
					if n > 2 {
						clear(x[cols : cols+tile]) // a zero block: scale 0
					}
					var xq actQ8
					xq.quantize(x, n, cols, tensor.Q8_0)
					for _, span := range [][2]int{{0, rows}, {rows / 2, rows}, {1, max(1, rows-1)}} {
						lo, hi := span[0], span[1]
						if lo >= hi {
							continue
						}
						want := make([]float32, n*rows)
						got := make([]float32, n*rows)
						for i := range got {
							got[i] = -7 // guard: untouched outside [lo,hi)
							want[i] = -7
						}
						matQ8_0Fast(want, w, &xq, n, rows, cols, lo, hi)
						matQ8_0VNNI(got, w, &xq, n, rows, cols, lo, hi)
						for i := range want {
							if math.Float32bits(want[i]) != math.Float32bits(got[i]) && !(want[i] != want[i] && got[i] != got[i]) {
								t.Fatalf("%d×%d n=%d rows [%d,%d) block %d: out[%d] (input %d row %d) = %v, want %v",
									rows, cols, n, lo, hi, blk, i, i/rows, i%rows, got[i], want[i])
							}
						}
					}
				}
			}
		}
	}
}

func BenchmarkQ8_0Kernels(b *testing.B) {
	if !archsimd.X86.AVX512VNNI() || !archsimd.X86.AVX512() {
		b.Skip("CPU lacks AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, cols, n int }{
		{32768, 2048, 1}, // 71 MB: from DRAM, past the 32 MiB L3
		{5632, 2048, 1}, {2048, 2048, 1}, {768, 768, 1}, {2048, 2048, 16}, {2048, 2048, 128},
	} {
		w := randomQ8_0(r, c.rows, c.cols)
		for b := 0; b < len(w); b += q8Blk {
			w[b], w[b+1] = 0x00, 0x24
		}
		x := make([]float32, c.n*c.cols)
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		var xq actQ8
		xq.quantize(x, c.n, c.cols, tensor.Q8_0)
		dst := make([]float32, c.n*c.rows)
		for _, k := range []struct {
			name string
			f    actKernel
		}{{"fast", matQ8_0Fast}, {"vnni", matQ8_0VNNI}} {
			b.Run(fmt.Sprintf("%s/%dx%d/n=%d", k.name, c.rows, c.cols, c.n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.f(dst, w, &xq, c.n, c.rows, c.cols, 0, c.rows)
				}
			})
		}
	}
}

// TestVNNIDispatch checks an AVX-512 VNNI machine runs the assembly kernel.
func TestVNNIDispatch(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() || !archsimd.X86.AVX512() || !archsimd.X86.FMA() {
		t.Skip("CPU lacks AVX-512 VNNI")
	}
	defer setISA(isaCap)
	setISA(isaAVX512)
	if fmt.Sprintf("%p", matQ8_0ActImpl) != fmt.Sprintf("%p", actKernel(matQ8_0VNNI)) {
		t.Error("matQ8_0ActImpl is not matQ8_0VNNI on a VNNI CPU")
	}
	if fmt.Sprintf("%p", matQ4_0ActImpl) != fmt.Sprintf("%p", actKernel(matQ4_0VNNI)) {
		t.Error("matQ4_0ActImpl is not matQ4_0VNNI on a VNNI CPU")
	}
	for name, k := range map[string]matKernel{"F32": matF32Impl, "F16": matF16Impl, "BF16": matBF16Impl} {
		want := map[string]matKernel{"F32": matF32Asm, "F16": matF16Asm, "BF16": matBF16Asm}[name]
		if fmt.Sprintf("%p", k) != fmt.Sprintf("%p", want) {
			t.Errorf("%s kernel is not the assembly one on an AVX-512 CPU", name)
		}
	}
}
