package kernels_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// Test-only extension layouts (ids far from compress/*'s 1024–1040):
// rowScaled is one f32 scale per row then an int8 per weight, so a row is
// 4+cols bytes and rows start unaligned; sparseTest is the same bytes with a
// registered kernel that skips zero codes.
const (
	rowScaled  tensor.DType = 3000
	sparseTest tensor.DType = 3001
)

func rowScaledRowBytes(cols int) int64 { return 4 + int64(cols) }

func rowScaledDecode(dst []float32, src []byte, cols int) {
	s := math.Float32frombits(binary.LittleEndian.Uint32(src))
	for j := range dst[:cols] {
		dst[j] = s * float32(int8(src[4+j]))
	}
}

// sparseKernel sums only the nonzero codes, in column order.
func sparseKernel(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	rb := 4 + cols
	for r := lo; r < hi; r++ {
		row := w[r*rb : (r+1)*rb]
		s := math.Float32frombits(binary.LittleEndian.Uint32(row))
		for i := 0; i < n; i++ {
			var acc float32
			for j, q := range row[4:] {
				if q != 0 {
					acc += float32(s * float32(int8(q)) * x[i*cols+j])
				}
			}
			dst[i*rows+r] = acc
		}
	}
}

func init() {
	for _, id := range []tensor.DType{rowScaled, sparseTest} {
		if err := tensor.RegisterCodec(id, tensor.Codec{Name: fmt.Sprintf("test-%d", id), RowBytes: rowScaledRowBytes, DequantizeRow: rowScaledDecode}); err != nil {
			panic(err)
		}
	}
	if err := kernels.RegisterMatKernel(sparseTest, sparseKernel); err != nil {
		panic(err)
	}
}

func extWeight(t *testing.T, dt tensor.DType, rows, cols int, zeros bool) kernels.Weight {
	r := newRand(t, uint64(rows), uint64(cols))
	rb := int(rowScaledRowBytes(cols))
	data := make([]byte, rows*rb)
	for i := range rows {
		binary.LittleEndian.PutUint32(data[i*rb:], math.Float32bits(float32(r.NormFloat64())))
		for j := range cols {
			q := byte(r.Uint32())
			if zeros && r.IntN(2) == 0 {
				q = 0
			}
			data[i*rb+4+j] = q
		}
	}
	return kernels.Weight{DType: dt, Data: data, Rows: rows, Cols: cols}
}

// The generic extension path is bit-identical to ref (which decodes with
// tensor.DequantizeRow) in every build, for any n, shape and pool split; so is
// a registered zero-skipping kernel on finite inputs.
func TestMatMulExtVsRef(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	p := kernels.NewPool(3)
	defer p.Close()
	for _, dt := range []tensor.DType{rowScaled, sparseTest} {
		for _, sh := range []struct{ rows, cols int }{{1, 1}, {3, 7}, {4, 32}, {9, 172}, {17, 64}} {
			for _, n := range []int{1, 2, 5} {
				for _, pool := range []*kernels.Pool{nil, p} {
					t.Run(fmt.Sprintf("%v/%dx%d/n=%d/pool=%v", dt, sh.rows, sh.cols, n, pool != nil), func(t *testing.T) {
						w := extWeight(t, dt, sh.rows, sh.cols, dt == sparseTest)
						x := vec(newRand(t), n*sh.cols, normal)
						want := make([]float32, n*sh.rows)
						ref.MatMul(want, w, x, n)
						got := make([]float32, n*sh.rows)
						for i := range got {
							got[i] = float32(math.NaN()) // every output must be written
						}
						kernels.MatMul(pool, got, w, x, n)
						requireSame(t, "MatMul", want, got)
					})
				}
			}
		}
	}
}

func TestMatMulExtAllocs(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	w := extWeight(t, rowScaled, 64, 172, false)
	x := vec(newRand(t), 4*172, normal)
	dst := make([]float32, 4*64)
	for _, tc := range []struct {
		name    string
		p       *kernels.Pool
		minMACs int
	}{{"nil pool", nil, 1}, {"pool split", p, 1}, {"pool inline", p, 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			if raceEnabled {
				t.Skip("-race: sync.Pool (the extension scratch) drops items at random, so a call may allocate")
			}
			defer kernels.SetParallelMinMACs(tc.minMACs)()
			kernels.MatMul(tc.p, dst, w, x, 4) // warm the scratch pool
			if a := testing.AllocsPerRun(50, func() { kernels.MatMul(tc.p, dst, w, x, 4) }); a != 0 {
				t.Errorf("MatMul of an extension dtype allocates %v times per call", a)
			}
		})
	}
}

func TestRegisterMatKernelErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		dt   tensor.DType
		k    kernels.ExtKernel
	}{
		{"no codec", 3999, sparseKernel},
		{"builtin", tensor.F32, sparseKernel},
		{"duplicate", sparseTest, sparseKernel},
		{"nil kernel", rowScaled, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := kernels.RegisterMatKernel(tc.dt, tc.k); !errors.Is(err, kernels.ErrKernel) {
				t.Fatalf("err = %v, want ErrKernel", err)
			}
		})
	}
}

// An unregistered id above the ggml range is still rejected by Validate.
func TestValidateUnregisteredExt(t *testing.T) {
	w := kernels.Weight{DType: 3998, Data: make([]byte, 64), Rows: 2, Cols: 4}
	if err := w.Validate(); !errors.Is(err, kernels.ErrBadWeight) {
		t.Fatalf("Validate = %v, want ErrBadWeight", err)
	}
}
