package prune

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/kernels"
	kref "github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// sparse24Weight prunes a random (rows, cols) matrix to 2:4 and returns it
// dense and as a DTypeSparse24 kernel weight.
func sparse24Weight(t testing.TB, r *rand.Rand, rows, cols int) ([]float32, kernels.Weight) {
	w := randWeights(r, rows*cols, false)
	if err := NM(w, rows, cols, 2, 4); err != nil {
		t.Fatal(err)
	}
	s, err := Compress24(w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	return w, kernels.Weight{DType: DTypeSparse24, Data: s.Encode(), Rows: rows, Cols: cols}
}

// DTypeSparse24 is a registered dtype: tensor.DequantizeRow gives back the
// pruned dense rows, and kernels.MatMul (the zero-skipping kernel) is
// bit-identical to kernels/ref's dense sequential dot over those rows.
func TestSparse24Dtype(t *testing.T) {
	if DTypeSparse24.String() != Sparse24Name || !DTypeSparse24.Known() {
		t.Fatalf("dtype %d: String %q, Known %v", DTypeSparse24, DTypeSparse24.String(), DTypeSparse24.Known())
	}
	p := kernels.NewPool(3)
	defer p.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][2]int{{1, 1}, {3, 6}, {4, 8}, {5, 172}, {9, 64}, {64, 172}} {
		rows, cols := sh[0], sh[1]
		dense, w := sparse24Weight(t, r, rows, cols)
		if rb, err := DTypeSparse24.RowBytes(cols); err != nil || rb != int64(RowBytes24(cols)) {
			t.Fatalf("RowBytes(%d) = %d, %v", cols, rb, err)
		}
		back := make([]float32, rows*cols)
		for i := range rows {
			tensor.DequantizeRow(back[i*cols:], w.Data[i*RowBytes24(cols):], DTypeSparse24, cols)
		}
		if diff := gocmp.Diff(dense, back); diff != "" {
			t.Fatalf("%dx%d: decoded rows differ (-pruned +decoded):\n%s", rows, cols, diff)
		}
		for _, n := range []int{1, 3} {
			for _, pool := range []*kernels.Pool{nil, p} {
				t.Run(fmt.Sprintf("%dx%d/n=%d/pool=%v", rows, cols, n, pool != nil), func(t *testing.T) {
					x := randWeights(r, n*cols, false)
					want := make([]float32, n*rows)
					kref.MatMul(want, w, x, n)
					got := make([]float32, n*rows)
					for i := range got {
						got[i] = float32(math.NaN())
					}
					kernels.MatMul(pool, got, w, x, n)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("output %d: kernel %v, ref %v", i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// Corrupt index bytes decode to some row and multiply without panicking.
func TestSparse24CorruptNoPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	const rows, cols = 5, 10
	data := make([]byte, rows*RowBytes24(cols))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	w := kernels.Weight{DType: DTypeSparse24, Data: data, Rows: rows, Cols: cols}
	dst := make([]float32, rows*cols)
	for i := range rows {
		tensor.DequantizeRow(dst[i*cols:], data[i*RowBytes24(cols):], DTypeSparse24, cols)
	}
	kernels.MatVec(nil, make([]float32, rows), w, make([]float32, cols))
}

func TestSparse24MatMulAllocs(t *testing.T) {
	_, w := sparse24Weight(t, rand.New(rand.NewPCG(1, 2)), 64, 172)
	x := make([]float32, 4*172)
	dst := make([]float32, 4*64)
	if a := testing.AllocsPerRun(20, func() { kernels.MatMul(nil, dst, w, x, 4) }); a != 0 {
		t.Errorf("MatMul allocates %v times per call", a)
	}
}

// BenchmarkKernelSparse24 compares kernels.MatVec on a 2:4 matrix stored
// dense (F32) and compressed (DTypeSparse24), both bit-identical to ref.
func BenchmarkKernelSparse24(b *testing.B) {
	for _, sh := range [][2]int{{288, 768}, {2048, 5632}} {
		rows, cols := sh[0], sh[1]
		r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
		dense, w := sparse24Weight(b, r, rows, cols)
		f32 := make([]byte, 0, 4*len(dense))
		for _, v := range dense {
			f32 = append(f32, byte(math.Float32bits(v)), byte(math.Float32bits(v)>>8), byte(math.Float32bits(v)>>16), byte(math.Float32bits(v)>>24))
		}
		x := randWeights(r, cols, false)
		dst := make([]float32, rows)
		for _, k := range []kernels.Weight{{DType: tensor.F32, Data: f32, Rows: rows, Cols: cols}, w} {
			b.Run(fmt.Sprintf("%v/%dx%d", k.DType, rows, cols), func(b *testing.B) {
				b.SetBytes(int64(len(k.Data)))
				for b.Loop() {
					kernels.MatVec(nil, dst, k, x)
				}
			})
		}
	}
}

// FuzzDecodeRow24: arbitrary bytes in a 2:4 tensor (a corrupt file) decode
// and multiply without panicking; well-formed rows (Decode24 accepts them)
// multiply exactly as their decoded dense rows.
func FuzzDecodeRow24(f *testing.F) {
	_, w := sparse24Weight(f, rand.New(rand.NewPCG(1, 1)), 2, 10)
	f.Add(w.Data, uint8(10))
	f.Add(make([]byte, 27), uint8(12))
	f.Fuzz(func(t *testing.T, data []byte, c uint8) {
		cols := int(c%64) + 1
		rb := RowBytes24(cols)
		rows := len(data) / rb
		if rows == 0 {
			return
		}
		data = data[:rows*rb]
		dense := make([]float32, rows*cols)
		for r := range rows {
			tensor.DequantizeRow(dense[r*cols:], data[r*rb:], DTypeSparse24, cols)
		}
		x := make([]float32, cols)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		got := make([]float32, rows)
		kernels.MatVec(nil, got, kernels.Weight{DType: DTypeSparse24, Data: data, Rows: rows, Cols: cols}, x)
		if _, err := Decode24(data, rows, cols); err != nil {
			return
		}
		for r := range rows {
			var want float32
			for j, v := range dense[r*cols : (r+1)*cols] {
				want += float32(v * x[j])
			}
			if !(want == got[r] || want != want && got[r] != got[r]) {
				t.Fatalf("row %d: kernel %v, dense %v", r, got[r], want)
			}
		}
	})
}
