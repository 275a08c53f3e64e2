package kernels_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

func TestImpl(t *testing.T) {
	// The line `make test-kernels` prints: which kernels this run tested.
	t.Logf("kernels: SLUICE_ISA=%s (cap %s): Impl %s", os.Getenv("SLUICE_ISA"), kernels.ISACap(), kernels.Impl())
	if got := kernels.Impl(); got != wantImpl {
		t.Fatalf("Impl() = %q, want %q", got, wantImpl)
	}
	// SLUICE_EXPECT_ISA is set by a make target that must run a given set
	// (test-arm64 under qemu): a CPU model or build that selected another
	// fails here instead of passing on the wrong kernels.
	if e := os.Getenv("SLUICE_EXPECT_ISA"); e != "" && kernels.Impl() != e {
		t.Fatalf("Impl() = %q, but SLUICE_EXPECT_ISA=%s", kernels.Impl(), e)
	}
	if kernels.PureGo && kernels.Impl() != "generic" {
		t.Fatalf("purego build dispatches to %q, want generic", kernels.Impl())
	}
}

// TestMatVecVsRef checks every dtype against ref on awkward column counts
// (rows fixed) and row counts (cols fixed), with x, dst and weight data at
// start offsets 0–3 and guard bands around dst.
func TestMatVecVsRef(t *testing.T) {
	type shape struct{ rows, cols int }
	for _, dt := range dtypes {
		var shapes []shape
		for _, c := range colSizes(dt) {
			shapes = append(shapes, shape{3, c})
		}
		for _, r := range sizes {
			if testing.Short() && r > 257 {
				continue
			}
			shapes = append(shapes, shape{r, 32})
		}
		for _, mode := range []weightMode{encoded, rawBits} {
			for _, xk := range []kind{normal, special} {
				t.Run(fmt.Sprintf("%v/%v/x=%v", dt, mode, xk), func(t *testing.T) {
					r := newRand(t)
					for _, sh := range shapes {
						for _, off := range offsets() {
							w := makeWeight(r, dt, sh.rows, sh.cols, off, mode)
							x := append(make([]float32, off), vec(r, sh.cols, xk)...)[off:]
							want := make([]float32, sh.rows)
							ref.MatVec(want, w, x)
							buf, dst := guarded(sh.rows, off)
							kernels.MatVec(nil, dst, w, x)
							checkGuard(t, buf, off, sh.rows)
							requireMatRef(t, fmt.Sprintf("%d×%d off=%d", sh.rows, sh.cols, off), w, x, 1, want, dst)
						}
					}
				})
			}
		}
	}
}

// TestMatMulBatchInvariance: a MatMul of n rows equals n MatVec calls bit
// for bit, for every pool size, with splitting forced down to single rows, and
// equals ref.MatMul (bit for bit on the generic kernels, within tolerance on a
// fast path).
func TestMatMulBatchInvariance(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := map[int]*kernels.Pool{}
	for _, th := range []int{1, 2, 3, 7} {
		pools[th] = kernels.NewPool(th)
		defer pools[th].Close()
	}
	for _, dt := range dtypes {
		t.Run(dt.String(), func(t *testing.T) {
			r := newRand(t)
			for _, rows := range []int{1, 2, 5, 17, 64} {
				cols := 64
				if dt.BlockSize() == 1 {
					cols = 33
				}
				w := makeWeight(r, dt, rows, cols, 0, encoded)
				for _, n := range []int{1, 2, 3, 8} {
					x := vec(r, n*cols, special)
					single := make([]float32, n*rows)
					for i := 0; i < n; i++ {
						kernels.MatVec(nil, single[i*rows:(i+1)*rows], w, x[i*cols:(i+1)*cols])
					}
					want := make([]float32, n*rows)
					ref.MatMul(want, w, x, n)
					requireMatRef(t, fmt.Sprintf("rows=%d n=%d MatVec vs ref", rows, n), w, x, n, want, single)
					for _, th := range []int{1, 2, 3, 7} {
						buf, dst := guarded(n*rows, 1)
						kernels.MatMul(pools[th], dst, w, x, n)
						checkGuard(t, buf, 1, n*rows)
						requireSame(t, fmt.Sprintf("rows=%d n=%d threads=%d", rows, n, th), single, dst)
					}
				}
			}
		})
	}
}

// TestMatVecPropagation: a NaN or Inf in x reaches every output row, and an
// Inf weight reaches its own row only.
func TestMatVecPropagation(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			r := newRand(t)
			const rows, cols = 4, 9
			w := makeWeight(r, dt, rows, cols, 0, encoded)
			x := vec(r, cols, normal)
			x[5] = float32(math.NaN())
			dst := make([]float32, rows)
			kernels.MatVec(nil, dst, w, x)
			for i, v := range dst {
				if !math.IsNaN(float64(v)) {
					t.Errorf("NaN in x: row %d = %v, want NaN", i, v)
				}
			}
			// +Inf weight at row 2, col 3 with positive x: row 2 is +Inf, others finite.
			switch dt {
			case tensor.F32:
				copy(w.Data[(2*cols+3)*4:], []byte{0, 0, 0x80, 0x7f})
			default:
				inf := [2]byte{0x00, 0x7c} // f16 +Inf
				if dt == tensor.BF16 {
					inf = [2]byte{0x80, 0x7f}
				}
				copy(w.Data[(2*cols+3)*2:], inf[:])
			}
			for i := range x {
				x[i] = 1
			}
			kernels.MatVec(nil, dst, w, x)
			for i, v := range dst {
				if inf := math.IsInf(float64(v), 1); inf != (i == 2) {
					t.Errorf("Inf weight in row 2: row %d = %v", i, v)
				}
			}
		})
	}
}

func TestMatMulQuantInfScale(t *testing.T) {
	// A Q8_0 block whose f16 scale is +Inf: q>0 weights are +Inf, q=0 weights NaN (Inf*0).
	w := kernels.Weight{DType: tensor.Q8_0, Rows: 1, Cols: 32, Data: make([]byte, tensor.Q8_0BlockLen)}
	w.Data[0], w.Data[1] = 0x00, 0x7c
	w.Data[2] = 1
	x := make([]float32, 32)
	x[0] = 1
	dst := []float32{0}
	kernels.MatVec(nil, dst, w, x)
	if !math.IsNaN(float64(dst[0])) { // +Inf*1 + Inf*0(NaN) ...
		t.Fatalf("Inf-scale block dot = %v, want NaN", dst[0])
	}
	want := []float32{0}
	ref.MatVec(want, w, x)
	requireMatRef(t, "Inf scale", w, x, 1, want, dst)
}

func TestWeightValidate(t *testing.T) {
	tests := []struct {
		name string
		w    kernels.Weight
		want string // substring of the error; "" = valid
	}{
		{"f32 ok", kernels.Weight{DType: tensor.F32, Rows: 2, Cols: 3, Data: make([]byte, 24)}, ""},
		{"empty ok", kernels.Weight{DType: tensor.Q4_0}, ""},
		{"q8 ok", kernels.Weight{DType: tensor.Q8_0, Rows: 2, Cols: 64, Data: make([]byte, 4*34)}, ""},
		{"short data", kernels.Weight{DType: tensor.F16, Rows: 2, Cols: 3, Data: make([]byte, 11)}, "11 data bytes, want at least 12"},
		{"partial block", kernels.Weight{DType: tensor.Q4_0, Rows: 1, Cols: 48, Data: make([]byte, 64)}, "not a whole number of 32-element blocks"},
		{"unknown dtype", kernels.Weight{DType: 23, Rows: 1, Cols: 1, Data: make([]byte, 64)}, "unsupported dtype ggml_type(23)"},
		{"q4_K partial super-block", kernels.Weight{DType: tensor.Q4_K, Rows: 1, Cols: 128, Data: make([]byte, 144)}, "not a whole number of 256-element blocks"},
		{"negative", kernels.Weight{DType: tensor.F32, Rows: -1, Cols: 1}, "negative dimension"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.w.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, kernels.ErrBadWeight) {
				t.Fatalf("Validate() = %v, want an ErrBadWeight containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "kernels: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
			mustPanic(t, "kernels: weight", func() {
				kernels.MatVec(nil, make([]float32, 8), tc.w, make([]float32, 64))
			})
		})
	}
}

func TestMatMulShapePanics(t *testing.T) {
	w := kernels.Weight{DType: tensor.F32, Rows: 2, Cols: 3, Data: make([]byte, 24)}
	mustPanic(t, "kernels: MatMul:", func() { kernels.MatMul(nil, make([]float32, 4), w, make([]float32, 5), 2) })
	mustPanic(t, "kernels: MatMul:", func() { kernels.MatMul(nil, make([]float32, 3), w, make([]float32, 6), 2) })
	mustPanic(t, "kernels: MatMul:", func() { kernels.MatMul(nil, nil, w, nil, -1) })
	kernels.MatMul(nil, nil, w, nil, 0) // n = 0 is a no-op
}

// TestMatMulConcurrentCallers: two goroutines sharing one Pool both get right
// answers (calls serialize; run with -race).
func TestMatMulConcurrentCallers(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	p := kernels.NewPool(3)
	defer p.Close()
	r := newRand(t)
	w := makeWeight(r, tensor.Q4_0, 37, 64, 0, encoded)
	xs := [2][]float32{vec(r, 64, normal), vec(r, 64, normal)}
	var want [2][]float32
	for k := range xs {
		want[k] = make([]float32, 37)
		ref.MatVec(want[k], w, xs[k])
		got := make([]float32, 37)
		kernels.MatVec(nil, got, w, xs[k])
		requireMatRef(t, "single caller", w, xs[k], 1, want[k], got)
		want[k] = got // the shared-pool calls must reproduce it bit for bit
	}
	errc := make(chan error, 2)
	for k := range xs {
		go func() {
			dst := make([]float32, 37)
			for range 50 {
				kernels.MatVec(p, dst, w, xs[k])
				for i := range dst {
					if !same(dst[i], want[k][i]) {
						errc <- fmt.Errorf("caller %d: row %d = %v, want %v", k, i, dst[i], want[k][i])
						return
					}
				}
			}
			errc <- nil
		}()
	}
	for range xs {
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

func TestMatMulNoAlloc(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	for _, dt := range dtypes {
		r := newRand(t)
		w := makeWeight(r, dt, 64, 256, 0, encoded)
		x := vec(r, 4*256, normal)
		dst := make([]float32, 4*64)
		for _, tc := range []struct {
			name    string
			p       *kernels.Pool
			minMACs int
		}{{"nil pool", nil, 1}, {"pool split", p, 1}, {"pool inline", p, 1 << 30}} {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				defer kernels.SetParallelMinMACs(tc.minMACs)()
				if a := testing.AllocsPerRun(20, func() { kernels.MatMul(tc.p, dst, w, x, 4) }); a != 0 && !raceEnabled {
					t.Errorf("MatMul allocates %v times per call", a)
				}
				if a := testing.AllocsPerRun(20, func() { kernels.MatVec(tc.p, dst, w, x) }); a != 0 && !raceEnabled {
					t.Errorf("MatVec allocates %v times per call", a)
				}
			})
		}
	}
}
