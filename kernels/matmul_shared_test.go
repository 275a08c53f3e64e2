package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// TestMatMulShared: MatMulShared gives, bit for bit, what separate MatMul
// calls give, under every kernel set the CPU has, at 1–3 threads: K-quant
// weights of mixed types over one quantization of x (a layer's q, k and v
// in a Q4_K_M file are Q4_K and Q6_K), and the fallbacks (an F32 weight
// among them, different Cols); and it does not allocate.
func TestMatMulShared(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	for _, set := range isaSets {
		t.Run(set, func(t *testing.T) {
			useSet(t, set)
			r := newRand(t, 5)
			const cols = 512
			mk := func(dt tensor.DType, rows, c int) kernels.Weight {
				if dt == tensor.F32 {
					return kernels.Weight{DType: tensor.F32, Rows: rows, Cols: c, Data: tensor.F32Bytes(vec(r, rows*c, normal))}
				}
				return makeBlockWeight(r, dt, rows, c, 0, encoded)
			}
			cases := map[string][]kernels.Weight{
				"q4k,q4k,q6k": {mk(tensor.Q4_K, 48, cols), mk(tensor.Q4_K, 16, cols), mk(tensor.Q6_K, 33, cols)},
				"q5k,q5k":     {mk(tensor.Q5_K, 40, cols), mk(tensor.Q5_K, 40, cols)},
				"q4k,f32":     {mk(tensor.Q4_K, 32, cols), mk(tensor.F32, 8, cols)},
				"q4k,cols":    {mk(tensor.Q4_K, 32, cols), mk(tensor.Q4_K, 16, cols+256)},
			}
			for name, ws := range cases {
				for _, n := range []int{1, 8, 70} {
					xs := vec(r, n*(cols+256), []kind{normal, special}[n%2]) // special: some NaN outputs
					for pi, p := range pools {
						what := fmt.Sprintf("%s n=%d pool=%d", name, n, pi)
						var prods []kernels.Product
						var want [][]float32
						x := xs[:n*(cols+256)]
						for _, w := range ws {
							d := make([]float32, n*w.Rows)
							kernels.MatMul(p, d, w, x, n)
							want = append(want, d)
							prods = append(prods, kernels.Product{Dst: make([]float32, n*w.Rows), W: w})
						}
						kernels.MatMulShared(p, x, n, prods...)
						for i := range prods {
							for e, v := range want[i] {
								if g := prods[i].Dst[e]; math.Float32bits(g) != math.Float32bits(v) && !(g != g && v != v) {
									t.Fatalf("%s: product %d out[%d] = %v shared, %v alone", what, i, e, g, v)
								}
							}
						}
						if a := testing.AllocsPerRun(3, func() { kernels.MatMulShared(p, x, n, prods...) }); a != 0 {
							t.Fatalf("%s: MatMulShared allocates %v times per call", what, a)
						}
					}
				}
			}
		})
	}
}
