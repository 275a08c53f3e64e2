//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestMatQ8_0AVX2 checks the AVX2 kernels over both layouts give exactly
// canonQ8_0's bits (the VNNI set's order) on every shape, sub-range, tile
// remainder and input count, including zero, subnormal, infinite and NaN
// scales and activations, and row blocks smaller than a panel block.
func TestMatQ8_0AVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 Q8_0 kernels: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(13, 14))
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	colsList := []int{32, 64, 96, 160, 288, 768, 2048}
	ns := []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 17, 33}
	if testing.Short() {
		colsList, ns = []int{32, 96, 768}, []int{1, 3, 4, 8, 13}
	}
	for _, cols := range colsList {
		for _, rows := range []int{1, 2, 3, 5, 9, 16, 17, 33, 48, 50} {
			w := randomQ8_0(r, rows, cols)
			pw, err := Repack(Weight{DType: tensor.Q8_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
			if err != nil {
				t.Fatal(err)
			}
			for _, blk := range []int{256 << 10, 3 * cols / tile * q8Blk, 2 * PanelRows * cols / tile * q8Blk} {
				rowBlockBytes = blk
				for _, n := range ns {
					if cols >= 768 && n > 9 && rows > 17 {
						continue
					}
					xq := q8Acts(r, n, cols)
					spans := [][2]int{{0, rows}, {rows / 2, rows}, {1, max(1, rows-1)}}
					pspans := [][2]int{{0, rows}}
					if rows > 16 {
						pspans = append(pspans, [2]int{16, rows}, [2]int{0, 16})
					}
					check := func(what string, k actKernel, data []byte, lo, hi int) {
						t.Helper()
						want := make([]float32, n*rows)
						got := make([]float32, n*rows)
						for i := range got {
							got[i], want[i] = -7, -7 // guard: untouched outside [lo,hi)
						}
						canonQ8_0(want, w, xq, n, rows, cols, lo, hi)
						k(got, data, xq, n, rows, cols, lo, hi)
						for i := range want {
							if !sameQ8Bits(want[i], got[i]) {
								t.Fatalf("%s %d×%d n=%d rows [%d,%d) block %d: out[%d] (input %d row %d) = %v, want %v",
									what, rows, cols, n, lo, hi, blk, i, i/rows, i%rows, got[i], want[i])
							}
						}
					}
					for _, s := range spans {
						if s[0] < s[1] {
							check("row-major", matQ8_0AVX2, w, s[0], s[1])
						}
					}
					if pw.Layout == PanelQ8_0 {
						for _, s := range pspans {
							check("panel", matQ8_0AVX2Panel, pw.Data, s[0], s[1])
						}
					}
				}
			}
		}
	}
}
