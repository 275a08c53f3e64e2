package quant

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestQuantizeMatrixSplit: QuantizeMatrix encodes rows in parallel ranges;
// its bytes must be those of encoding every row on its own, in order, for
// row counts that do and do not divide among the goroutines.
func TestQuantizeMatrixSplit(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	rng := rand.New(rand.NewPCG(7, 11))
	const cols = 512
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q6_K, tensor.Q8_0} {
		for _, rows := range []int{1, 63, 64, 200, 257} {
			src := make([]float32, rows*cols)
			for i := range src {
				src[i] = float32(rng.NormFloat64())
			}
			got, err := QuantizeMatrix(src, rows, cols, dt)
			if err != nil {
				t.Fatalf("%v %d rows: %v", dt, rows, err)
			}
			rb, err := dt.RowBytes(cols)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, int64(rows)*rb)
			for r := range rows {
				if err := tensor.QuantizeRow(want[int64(r)*rb:int64(r+1)*rb], src[r*cols:(r+1)*cols], dt); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%v %d rows: parallel encoding differs from row by row", dt, rows)
			}
		}
	}
}
