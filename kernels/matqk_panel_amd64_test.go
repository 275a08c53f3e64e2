//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// TestQKPanelVsRow: the AMX, VNNI and AVX2 panel tiles, reached through matQK with the
// batch threshold lowered, give every output the bits of the row kernel
// of their set (q4kDotVNNI, q4kDotAVX2 and their kin) and of kqModel, on quantized N(0,1) rows and on
// random bytes (NaN and Inf scales), against activations with an Inf, zero
// and subnormal blocks; over row ranges that start and end off the panel
// grid (rows after the last panel, inputs after the last tile) and row
// blocks smaller than a panel's bytes.
func TestQKPanelVsRow(t *testing.T) {
	testutil.SkipRace(t, "the K-quant panels against the row kernels, bit for bit")
	defer func(v, vv, a, rb int) {
		kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs, kqaRowBlockBytes = v, vv, a, rb
	}(kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs, kqaRowBlockBytes)
	kqpMinInputs, kqpMinInputsVNNI, kqaMinInputs = 1, 1, 1
	r := rand.New(rand.NewPCG(23, 1))
	type kern struct {
		pt  *kqPanels
		dot qkDot
		til qkTile
	}
	sets := []struct {
		name  string
		ok    bool
		kerns map[tensor.DType]kern
	}{
		{"amx", amxOK(), map[tensor.DType]kern{
			tensor.Q4_K: {kqPanelsAMX, q4kDotVNNI, q4kTile4VNNI},
			tensor.Q5_K: {kqPanelsAMX, q5kDotVNNI, q5kTile4VNNI},
			tensor.Q6_K: {kqPanelsAMX, q6kDotVNNI, q6kTile4VNNI},
		}},
		{"vnni", cpuVNNI, map[tensor.DType]kern{
			tensor.Q4_K: {kqPanelsVNNI, q4kDotVNNI, q4kTile4VNNI},
			tensor.Q5_K: {kqPanelsVNNI, q5kDotVNNI, q5kTile4VNNI},
			tensor.Q6_K: {kqPanelsVNNI, q6kDotVNNI, q6kTile4VNNI},
		}},
		{"avx2", cpuAVX2, map[tensor.DType]kern{
			tensor.Q4_K: {kqPanelsAVX2, q4kDotAVX2, q4kTile4AVX2},
			tensor.Q5_K: {kqPanelsAVX2, q5kDotAVX2, q5kTile4AVX2},
			tensor.Q6_K: {kqPanelsAVX2, q6kDotAVX2, q6kTile4AVX2},
		}},
	}
	for _, set := range sets {
		if !set.ok {
			t.Logf("SKIP %s: CPU lacks it", set.name)
			continue
		}
		for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
			k := set.kerns[dt]
			for _, nb := range []int{1, 2, 3} {
				for _, rows := range []int{16, 37, 50} {
					for _, n := range []int{8, 11, 19, 35} {
						for _, raw := range []bool{false, true} {
							cols := nb * tensor.QK_K
							rb := nb * dt.BlockBytes()
							w := make([]byte, rows*rb)
							if raw {
								for i := range w {
									w[i] = byte(r.Uint32())
								}
							} else {
								v := make([]float32, cols)
								for row := range rows {
									for i := range v {
										v[i] = float32(r.NormFloat64())
									}
									if err := tensor.QuantizeRow(w[row*rb:(row+1)*rb], v, dt); err != nil {
										t.Fatal(err)
									}
								}
							}
							x := make([]float32, n*cols)
							for i := range x {
								x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(r.IntN(5)-2)))
							}
							x[r.IntN(len(x))] = float32(math.Inf(-1))
							clear(x[cols : cols+tensor.QK_K])
							for i := range tensor.QK_K {
								x[(n-1)*cols+i] = 1e-40 * float32(r.NormFloat64())
							}
							xb := nb * q8kBlk
							xq := make([]byte, n*xb)
							quantizeRowQ8K(xq, x)
							for _, span := range [][2]int{{0, rows}, {3, rows - 1}} {
								for _, blockBytes := range []int{0, 1} {
									what := fmt.Sprintf("%s %v nb=%d rows=%d n=%d raw=%v rows [%d,%d) block=%d", set.name, dt, nb, rows, n, raw, span[0], span[1], blockBytes)
									if blockBytes > 0 {
										defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
										rowBlockBytes, kqaRowBlockBytes = blockBytes, blockBytes
									} else {
										kqaRowBlockBytes = 1 << 20
									}
									dst := make([]float32, n*rows)
									for i := range dst {
										dst[i] = 12345
									}
									matQK(dt, k.pt, k.dot, k.til, dst, w, xq, n, rows, cols, span[0], span[1])
									for i := range n {
										for row := range rows {
											got := dst[i*rows+row]
											if row < span[0] || row >= span[1] {
												if got != 12345 {
													t.Fatalf("%s: wrote output (%d, %d) outside its rows", what, i, row)
												}
												continue
											}
											wr, xr := w[row*rb:(row+1)*rb], xq[i*xb:(i+1)*xb]
											want := k.dot(&wr[0], &xr[0], nb)
											if math.Float32bits(got) != math.Float32bits(want) {
												t.Fatalf("%s: output (%d, %d) = %v (%#x), row kernel %v (%#x)", what, i, row, got, math.Float32bits(got), want, math.Float32bits(want))
											}
											if m := kqModel(dt, wr, xr, nb); math.Float32bits(m) != math.Float32bits(want) && !(m != m && want != want) {
												t.Fatalf("%s: output (%d, %d) row kernel %v, model %v", what, i, row, want, m)
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkKQPanelize: laying out one 16-row panel of 8 super-blocks.
func BenchmarkKQPanelize(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		b.Run(dt.String(), func(b *testing.B) {
			nb := 8
			rb := nb * dt.BlockBytes()
			src := make([]byte, PanelRows*rb)
			for i := range src {
				src[i] = byte(i * 7)
			}
			dst := make([]byte, nb*kqPanelBlk(dt))
			for b.Loop() {
				kqPanelize(dt, dst, src, nb, rb, false)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*nb*PanelRows), "ns/row-block")
		})
	}
}
