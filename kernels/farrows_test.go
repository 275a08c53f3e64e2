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

func TestFarRows(t *testing.T) {
	for _, c := range []struct{ n, k, rb, want int }{
		{64, 2, 1152, 31},  // 32·1152 = 9·4096: one row closer
		{64, 2, 1000, 32},  // no aliasing
		{768, 8, 1536, 95}, // 96·1536 = 36·4096
		{7, 8, 1536, 0},    // fewer rows than streams
		{3, 2, 4096, 1},    // h = 1 is kept
	} {
		if got := farRows(c.n, c.k, c.rb); got != c.want {
			t.Errorf("farRows(%d, %d, %d) = %d, want %d", c.n, c.k, c.rb, got, c.want)
		}
	}
}

// TestDecodeFarRowsBits: decode (n = 1) shapes where the far-row distance
// is moved off a 4 KiB multiple (so some rows go to the leftover kernels)
// give the archsimd kernels' bits (for VNNI Q8_0, canonQ8_0's).
func TestDecodeFarRowsBits(t *testing.T) {
	if !archsimd.X86.AVX512() || !archsimd.X86.AVX512VNNI() {
		t.Skip("CPU lacks AVX-512 VNNI")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		dt         tensor.DType
		rows, cols int
	}{{tensor.Q8_0, 64, 2048}, {tensor.Q8_0, 67, 2048}, {tensor.Q4_0, 64, 2048}, {tensor.Q4_0, 65, 2048},
		{tensor.F16, 64, 1024}, {tensor.F16, 70, 1024}, {tensor.BF16, 64, 1024}} {
		t.Run(fmt.Sprintf("%v/%dx%d", c.dt, c.rows, c.cols), func(t *testing.T) {
			x := make([]float32, c.cols)
			for j := range x {
				x[j] = float32(r.NormFloat64())
			}
			rb, _ := c.dt.RowBytes(c.cols)
			w := make([]byte, c.rows*int(rb))
			row := make([]float32, c.cols)
			for i := range c.rows {
				for j := range row {
					row[j] = float32(r.NormFloat64())
				}
				dst := w[i*int(rb) : (i+1)*int(rb)]
				switch c.dt {
				case tensor.Q8_0:
					tensor.QuantizeRowQ8_0(dst, row)
				case tensor.Q4_0:
					tensor.QuantizeRowQ4_0(dst, row)
				case tensor.F16:
					for j, v := range row {
						h := tensor.F32ToF16(v)
						dst[2*j], dst[2*j+1] = byte(h), byte(h>>8)
					}
				case tensor.BF16:
					for j, v := range row {
						h := tensor.F32ToBF16(v)
						dst[2*j], dst[2*j+1] = byte(h), byte(h>>8)
					}
				}
			}
			want, got := make([]float32, c.rows), make([]float32, c.rows)
			switch c.dt {
			case tensor.Q8_0, tensor.Q4_0:
				defer func(v bool) { q8Major = v }(q8Major)
				defer func(v bool) { q4Major = v }(q4Major)
				q8Major = true  // the VNNI layout, whatever SLUICE_ISA installed
				q4Major = false // the VNNI Q4_0 pair layout (the AMX set installs q4Major)
				var xq actQ8
				xq.quantize(x, 1, c.cols, c.dt)
				if c.dt == tensor.Q8_0 {
					// The VNNI Q8_0 order is its own (matq8_vnni_amd64.go):
					// its oracle is canonQ8_0, not the archsimd kernel.
					canonQ8_0(want, w, &xq, 1, c.rows, c.cols, 0, c.rows)
					matQ8_0VNNI(got, w, &xq, 1, c.rows, c.cols, 0, c.rows)
				} else {
					matQ4_0Fast(want, w, &xq, 1, c.rows, c.cols, 0, c.rows)
					matQ4_0VNNI(got, w, &xq, 1, c.rows, c.cols, 0, c.rows)
				}
			case tensor.F16:
				matF16AVX512(want, w, x, 1, c.rows, c.cols, 0, c.rows)
				matF16Asm(got, w, x, 1, c.rows, c.cols, 0, c.rows)
			case tensor.BF16:
				matBF16AVX512(want, w, x, 1, c.rows, c.cols, 0, c.rows)
				matBF16Asm(got, w, x, 1, c.rows, c.cols, 0, c.rows)
			}
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("row %d: %v, want %v", i, got[i], want[i])
				}
			}
		})
	}
}
