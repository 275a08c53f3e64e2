//go:build (amd64 || arm64) && !purego

package kernels_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// BenchmarkKQuantBatch: a 768×2048 K-quant MatMul (the 110m model's
// feed-forward shape) over batches of n inputs, one thread, with the
// panel tiles where the kernel set has them ("panels", at every n) and
// without ("rows": the row-major four-input tiles), to place
// kqpMinInputs and to measure prefill's kernels.
func BenchmarkKQuantBatch(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		for _, n := range []int{8, 16, 32, 64, 512} {
			for _, path := range []string{"rows", "panels"} {
				b.Run(fmt.Sprintf("%v/n=%d/%s", dt, n, path), func(b *testing.B) {
					min := 1 << 30
					if path == "panels" {
						min = 1
					}
					defer kernels.SetKQPanelMinInputs(min)()
					r := newRand(b)
					w := makeBlockWeight(r, dt, 768, 2048, 0, encoded)
					x := vec(r, n*2048, normal)
					dst := make([]float32, n*768)
					for b.Loop() {
						kernels.MatMul(nil, dst, w, x, n)
					}
					b.ReportMetric(float64(n*768*2048)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// TestKQuantPanels is TestKQuantSets for the batches that take the panel
// tiles (the threshold lowered to reach them with small shapes): rows off
// the panel grid, inputs off the tile, 1–3 threads and row blocks smaller
// than a panel; every row of a batch equals its MatVec bit for bit, and ref
// within kqBound. On arm64 it reaches the SDOT panels (kqnMinInputs).
func TestKQuantPanels(t *testing.T) {
	defer kernels.SetKQPanelMinInputs(1)()
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	for _, set := range isaSets {
		t.Run(set, func(t *testing.T) {
			useSet(t, set)
			for _, dt := range kqTypes {
				r := newRand(t, uint64(dt))
				colsList := []int{256, 768, 5632} // 5632: the 1b preset's feed-forward width
				if testing.Short() && runtime.GOARCH == "arm64" {
					colsList = colsList[:2] // under qemu (make test-arm64) the 5632 width takes minutes
				}
				for _, cols := range colsList {
					for _, rows := range []int{16, 33, 47} {
						for _, n := range []int{8, 13, 21} {
							for _, mode := range []weightMode{encoded, rawBits} {
								k := []kind{normal, special}[r.IntN(2)]
								w := makeBlockWeight(r, dt, rows, cols, 0, mode)
								x := vec(r, n*cols, k)
								kqCheck(t, fmt.Sprintf("%v %d×%d n=%d %s/%s", dt, rows, cols, n, mode, k), pools, w, x, n)
							}
						}
					}
				}
			}
		})
	}
}
