package quant

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// Every sluice layout is a registered tensor dtype: named, sized and decoded
// as the Scheme does, and multiplied by kernels.MatMul bit-identically to
// Scheme.MatVec (both are the sequential float32 dot of the decoded row).
func TestRegisteredCodecs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, s := range Schemes() {
		dt := s.DType()
		if dt < tensor.FirstExtension {
			continue
		}
		t.Run(s.String(), func(t *testing.T) {
			if !dt.Known() || dt.String() != s.String() || dt.BlockSize() != 1 {
				t.Fatalf("dtype %d: Known %v, String %q, BlockSize %d", dt, dt.Known(), dt.String(), dt.BlockSize())
			}
			if p, err := tensor.ParseDType(s.String()); err != nil || p != dt {
				t.Fatalf("ParseDType(%q) = %v, %v", s, p, err)
			}
			for _, cols := range []int{1, 31, 64, 172, 200} {
				rb, err := dt.RowBytes(cols)
				if err != nil || rb != int64(s.RowBytes(cols)) {
					t.Fatalf("RowBytes(%d) = %d, %v; scheme says %d", cols, rb, err, s.RowBytes(cols))
				}
				const rows = 7
				w := randRow(r, rows*cols)
				q := make([]byte, s.MatrixBytes(rows, cols))
				if err := s.Quantize(q, w, rows, cols); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, rows*cols)
				if err := s.Dequantize(want, q, rows, cols); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, rows*cols)
				for i := range rows {
					tensor.DequantizeRow(got[i*cols:], q[int64(i)*rb:], dt, cols)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("cols %d: tensor.DequantizeRow differs (-scheme +tensor):\n%s", cols, diff)
				}
				x := randRow(r, cols)
				mv := make([]float32, rows)
				s.MatVec(mv, q, x, rows, cols)
				km := make([]float32, rows)
				kernels.MatVec(nil, km, kernels.Weight{DType: dt, Data: q, Rows: rows, Cols: cols}, x)
				if diff := cmp.Diff(mv, km); diff != "" {
					t.Fatalf("cols %d: kernels.MatVec differs from Scheme.MatVec (-scheme +kernels):\n%s", cols, diff)
				}
			}
		})
	}
}

func TestCheckHalfStep(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	w := randRow(r, 172)
	for _, s := range []Scheme{Int8G32, Int4G32, Int4G128} {
		t.Run(s.String(), func(t *testing.T) {
			q := quantize(t, s, w)
			if err := s.CheckHalfStep(w, q); err != nil {
				t.Fatal(err)
			}
			bad := append([]float32(nil), w...)
			bad[100] += absmax(w) // more than half a step: s ≤ absmax/7
			if err := s.CheckHalfStep(bad, q); !errors.Is(err, ErrHalfStep) {
				t.Fatalf("perturbed row: err = %v, want ErrHalfStep", err)
			}
		})
	}
	for _, s := range []Scheme{NF4, Q8_0} {
		if err := s.CheckHalfStep(w, make([]byte, 1024)); !errors.Is(err, ErrUnknownScheme) {
			t.Errorf("%v: err = %v, want ErrUnknownScheme", s, err)
		}
	}
	if err := Int8G32.CheckHalfStep(w, make([]byte, 3)); !errors.Is(err, ErrSize) {
		t.Errorf("short row: err = %v", err)
	}
}
