//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"simd/archsimd"
)

// BenchmarkQ4VNNI compares matQ4_0VNNI with matQ4_0Fast on one thread, MB/s
// counting weight bytes:
//   - decode (n=1) on 2048×5632 weights cycled through 78 MB (12 matrices),
//     so every weight byte comes from DRAM as in a real decode, and on one
//     2048×2048 weight that stays in L3;
//   - prefill (n=64, n=512) on 2048×2048, bound by arithmetic.
func BenchmarkQ4VNNI(b *testing.B) {
	if !archsimd.X86.AVX512VNNI() {
		b.Skip("CPU lacks AVX-512 VNNI")
	}
	kernels := []struct {
		name string
		k    actKernel
	}{{"fast", matQ4_0Fast}, {"vnni", matQ4_0VNNI}}
	shapes := []struct {
		name             string
		n, rows, cols, m int // m weights cycled
	}{
		{"n=1/2048x5632/dram", 1, 2048, 5632, 12},
		{"n=1/2048x2048/l3", 1, 2048, 2048, 1},
		{"n=64/2048x2048", 64, 2048, 2048, 1},
		{"n=512/2048x2048", 512, 2048, 2048, 1},
	}
	for _, s := range shapes {
		r := rand.New(rand.NewPCG(uint64(s.rows), uint64(s.cols)))
		ws := make([][]byte, s.m)
		ws[0] = q4VNNIWeight(r, s.rows, s.cols, false, false)
		for i := 1; i < s.m; i++ { // the same scales, random nibbles
			ws[i] = append([]byte(nil), ws[0]...)
			for j := range ws[i] {
				if j%q4Blk >= 2 {
					ws[i][j] = byte(r.Uint32())
				}
			}
		}
		xq := q4VNNIActs(r, s.n, s.cols, false)
		dst := make([]float32, s.n*s.rows)
		for _, k := range kernels {
			b.Run(fmt.Sprintf("%s/%s", s.name, k.name), func(b *testing.B) {
				b.SetBytes(int64(s.m * len(ws[0])))
				for b.Loop() {
					for _, w := range ws {
						k.k(dst, w, xq, s.n, s.rows, s.cols, 0, s.rows)
					}
				}
			})
		}
	}
}
