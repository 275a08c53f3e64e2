package kernels_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// blockDTypes are the block types with only a generic kernel.
var blockDTypes = []tensor.DType{tensor.Q4_1, tensor.Q5_0, tensor.Q5_1,
	tensor.Q2_K, tensor.Q3_K, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.Q8_K}

// makeBlockWeight is makeWeight for blockDTypes: N(0,1) rows through
// tensor.QuantizeRow, or random bytes (every scale pattern, NaN and Inf
// included).
func makeBlockWeight(r *rand.Rand, t tensor.DType, rows, cols, off int, mode weightMode) kernels.Weight {
	rb, err := t.RowBytes(cols)
	if err != nil {
		panic(err)
	}
	data := make([]byte, off+rows*int(rb))[off:]
	if mode == rawBits {
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		return kernels.Weight{DType: t, Data: data, Rows: rows, Cols: cols}
	}
	row := make([]float32, cols)
	for i := range rows {
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		if err := tensor.QuantizeRow(data[i*int(rb):(i+1)*int(rb)], row, t); err != nil {
			panic(err)
		}
	}
	return kernels.Weight{DType: t, Data: data, Rows: rows, Cols: cols}
}

// TestMatMulBlockTypesVsRef: every block type, bit for bit against
// ref.MatMul (within matqk_test.go's tolerance for a type whose Q8_K
// kernel is installed; TestKQuantSets checks those batch-invariant) (which decodes rows with tensor.DequantizeRow), for row counts
// around the 4-row groups, several inputs, pool sizes with splitting forced
// to single rows, unaligned data and both weight modes.
func TestMatMulBlockTypesVsRef(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(1), kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	for _, dt := range blockDTypes {
		for _, mode := range []weightMode{encoded, rawBits} {
			t.Run(fmt.Sprintf("%v/%v", dt, mode), func(t *testing.T) {
				r := newRand(t)
				bs := dt.BlockSize()
				for _, rows := range []int{1, 3, 4, 9} {
					for _, cols := range []int{bs, 3 * bs} {
						for _, n := range []int{1, 2, 5} {
							off := r.IntN(4)
							w := makeBlockWeight(r, dt, rows, cols, off, mode)
							x := vec(r, n*cols, kind(r.IntN(2)))
							want := make([]float32, n*rows)
							ref.MatMul(want, w, x, n)
							for pi, p := range pools {
								buf, dst := guarded(n*rows, off)
								kernels.MatMul(p, dst, w, x, n)
								checkGuard(t, buf, off, n*rows)
								requireKQRef(t, fmt.Sprintf("%d×%d n=%d pool %d", rows, cols, n, pi), w, x, n, want, dst)
							}
							// A row's result does not depend on the batch.
							for i := range n {
								one := make([]float32, rows)
								kernels.MatVec(pools[2], one, w, x[i*cols:(i+1)*cols])
								requireKQRef(t, fmt.Sprintf("%d×%d row %d of %d alone", rows, cols, i, n), w, x[i*cols:(i+1)*cols], 1, want[i*rows:(i+1)*rows], one)
							}
						}
					}
				}
			})
		}
	}
}

func TestMatMulBlockTypesNoAlloc(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	for _, dt := range blockDTypes {
		r := newRand(t)
		w := makeBlockWeight(r, dt, 16, 512, 0, encoded)
		x := vec(r, 4*512, normal)
		dst := make([]float32, 4*16)
		t.Run(dt.String(), func(t *testing.T) {
			defer kernels.SetParallelMinMACs(1)()
			for _, pool := range []*kernels.Pool{nil, p} {
				if a := testing.AllocsPerRun(20, func() { kernels.MatMul(pool, dst, w, x, 4) }); a != 0 && !raceEnabled {
					t.Errorf("MatMul allocates %v times per call", a)
				}
			}
		})
	}
}

func BenchmarkMatVecBlockTypes(b *testing.B) {
	for _, dt := range append([]tensor.DType{tensor.Q4_0}, blockDTypes...) {
		b.Run(dt.String(), func(b *testing.B) {
			r := newRand(b)
			var w kernels.Weight
			if dt == tensor.Q4_0 {
				w = makeWeight(r, dt, 512, 1024, 0, encoded)
			} else {
				w = makeBlockWeight(r, dt, 512, 1024, 0, encoded)
			}
			x := vec(r, 1024, normal)
			dst := make([]float32, 512)
			b.SetBytes(int64(len(w.Data)))
			for b.Loop() {
				kernels.MatVec(nil, dst, w, x)
			}
		})
	}
}
