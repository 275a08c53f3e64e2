//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestQKRows4VsModel: every 4-row decode kernel this CPU runs equals
// kqModel for each of its rows bit for bit, on quantized N(0,1) rows and
// random bytes (NaN and Inf scales included), rows at a stride larger than
// a row and outputs at a stride, against activations with specials, zero
// and subnormal blocks.
func TestQKRows4VsModel(t *testing.T) {
	kerns := []struct {
		name string
		ok   bool
		dt   tensor.DType
		f    qkRows4
	}{
		{"q4k avx2", cpuAVX2, tensor.Q4_K, q4kRows4AVX2},
		{"q4k vnni", cpuVNNI, tensor.Q4_K, q4kRows4VNNI},
		{"q6k avx2", cpuAVX2, tensor.Q6_K, q6kRows4AVX2},
		{"q6k vnni", cpuVNNI, tensor.Q6_K, q6kRows4VNNI},
	}
	r := rand.New(rand.NewPCG(7, 29))
	for _, k := range kerns {
		if !k.ok {
			t.Logf("SKIP %s: CPU lacks it", k.name)
			continue
		}
		dt := k.dt
		for _, nb := range []int{1, 2, 3, 7} {
			for trial := range 40 {
				raw := trial%2 == 1
				rb := nb * dt.BlockBytes()
				gap := 1 + r.IntN(3) // rows ws = gap·rb apart
				w := make([]byte, 4*gap*rb)
				if raw {
					for i := range w {
						w[i] = byte(r.Uint32())
					}
				} else {
					v := make([]float32, nb*tensor.QK_K)
					for row := range 4 * gap {
						for i := range v {
							v[i] = float32(r.NormFloat64())
						}
						if err := tensor.QuantizeRow(w[row*rb:(row+1)*rb], v, dt); err != nil {
							t.Fatal(err)
						}
					}
				}
				_, xq := kqTestActivations(r, nb, trial)
				out := make([]float32, 4*3)
				k.f(&w[0], gap*rb, &xq[0], nb, &out[0], 12)
				for j := range 4 {
					row := w[j*gap*rb : j*gap*rb+rb]
					want := kqModel(dt, row, xq, nb)
					if g := out[3*j]; math.Float32bits(g) != math.Float32bits(want) && !(g != g && want != want) {
						t.Fatalf("%s nb=%d trial %d (raw=%v) row %d: asm %v (%#x), model %v (%#x)",
							k.name, nb, trial, raw, j, g, math.Float32bits(g), want, math.Float32bits(want))
					}
					if out[3*j+1] != 0 || out[3*j+2] != 0 {
						t.Fatalf("%s: wrote between the outputs", k.name)
					}
				}
			}
		}
	}
}
