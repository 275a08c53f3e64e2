package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// kqTypes have fast kernels over Q8_K activations.
var kqTypes = []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K}

// Tolerance of the Q8_K-activation kernels against ref, per output, derived
// from their arithmetic (matqk_amd64.go). Write a weight as W_j = A_j − B_j
// with A_j = d·sc·l_j and B_j = dmin·m (Q4_K/Q5_K; B = 0 for Q6_K, whose
// offset is taken in the integers). Per 256-block b the activations become
// dx_b·q_j with |x_j − dx_b·q_j| ≤ amax_b/254·(1+2^-12) (round to nearest;
// the float32 iscale and its reciprocal add a few ulps); the integer sums
// are exact, so that costs Σ_j |W_j|·amax_b/254·(1+2^-12). The float part
// rounds d·dx, dmin·dx, float32(I), float32(M), two products, a difference
// and the running sum: within fpTol·√cols·Σ_j (|A_j|+|B_j|)·(|x_j|+amax_b/254)
// (the two scaled sums may cancel, so their own sizes count, not |W|), and
// ref's sequential sum adds fpTol·√cols·Σ_j|W_j·x_j|. A subnormal dx or d·dx
// is rounded absolutely, by at most 2^-150, times |q| ≤ 127 or |I| < 2^31:
// Σ_j |W_j|·127·2^-149 + nb·2^-118 covers it.
//
// Special values as close_test.go: NaN in a row's terms forces NaN; another
// non-finite term forces a non-finite result; sums reaching 1e37 are not
// compared. A non-finite activation block makes every output reading it
// NaN (its d is NaN), which is non-finite as ref's ±Inf or NaN is.
func kqBound(dt tensor.DType, raw []byte, w, x []float32) (tol float64, skip, nan, inf bool) {
	cols := len(x)
	a, bm := kqParts(dt, raw, cols)
	var abs, parts float64
	for b := 0; b < cols/tensor.QK_K; b++ {
		var amax float64
		for _, v := range x[b*tensor.QK_K : (b+1)*tensor.QK_K] {
			amax = max(amax, math.Abs(float64(v)))
		}
		for j := b * tensor.QK_K; j < (b+1)*tensor.QK_K; j++ {
			p := float64(w[j]) * float64(x[j])
			switch {
			case math.IsNaN(p):
				nan = true
			case math.IsInf(p, 0):
				inf = true
			}
			abs += math.Abs(p)
			tol += math.Abs(float64(w[j])) * (amax/254*(1+1.0/4096) + 127*math.Ldexp(1, -149))
			parts += (math.Abs(float64(a[j])) + math.Abs(float64(bm[j]))) * (math.Abs(float64(x[j])) + amax/254)
		}
		if math.IsInf(amax, 0) || math.IsNaN(amax) {
			inf = true
		}
	}
	sq := fpTol * math.Sqrt(float64(cols))
	tol += sq*(parts+abs) + float64(cols/tensor.QK_K)*math.Ldexp(1, -118)
	return tol, abs >= 1e37 || parts >= 1e37, nan, inf
}

// kqParts decodes A (d·sc·l) and B (dmin·m) of a row by dequantizing copies
// with dmin and then d zeroed.
func kqParts(dt tensor.DType, raw []byte, cols int) (a, b []float32) {
	a, b = make([]float32, cols), make([]float32, cols)
	if dt == tensor.Q6_K {
		tensor.DequantizeRow(a, raw, dt, cols)
		return a, b
	}
	bb := dt.BlockBytes()
	ca, cb := append([]byte(nil), raw...), append([]byte(nil), raw...)
	for o := 0; o < len(raw); o += bb {
		binary.LittleEndian.PutUint16(ca[o+2:], 0)
		binary.LittleEndian.PutUint16(cb[o:], 0)
	}
	tensor.DequantizeRow(a, ca, dt, cols)
	tensor.DequantizeRow(b, cb, dt, cols)
	return a, b
}

// requireKQRef checks got against want = ref.MatMul within kqBound when a
// fast kernel ran for w's type, else bit for bit.
func requireKQRef(t *testing.T, what string, w kernels.Weight, x []float32, n int, want, got []float32) {
	t.Helper()
	if !kernels.KQuantFast(w.DType) {
		requireSame(t, what, want, got)
		return
	}
	rows, cols := w.Rows, w.Cols
	rb, err := w.DType.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]float32, cols)
	for r := 0; r < rows; r++ {
		raw := w.Data[r*int(rb) : (r+1)*int(rb)]
		tensor.DequantizeRow(row, raw, w.DType, cols)
		for i := 0; i < n; i++ {
			g, wv := float64(got[i*rows+r]), float64(want[i*rows+r])
			if g == wv || math.IsNaN(g) && math.IsNaN(wv) {
				continue
			}
			tol, skip, nan, inf := kqBound(w.DType, raw, row, x[i*cols:(i+1)*cols])
			switch {
			case nan:
				if !math.IsNaN(g) {
					t.Fatalf("%s: dst[%d] (row %d, input %d) = %v, want NaN (ref %v)", what, i*rows+r, r, i, g, wv)
				}
			case inf:
				if !math.IsNaN(g) && !math.IsInf(g, 0) {
					t.Fatalf("%s: dst[%d] (row %d, input %d) = %v, want non-finite (ref %v)", what, i*rows+r, r, i, g, wv)
				}
			case skip:
			case math.Abs(g-wv) > tol:
				t.Fatalf("%s: dst[%d] (row %d, input %d) = %v, ref %v: |diff| %v outside tolerance %v",
					what, i*rows+r, r, i, g, wv, math.Abs(g-wv), tol)
			}
		}
	}
}

// TestKQuantSets runs Q4_K, Q5_K and Q6_K MatMuls under every kernel set
// this CPU has against ref: within kqBound on the fast sets, bit for bit on
// generic; over 1, 2, 3 and 5 super-blocks, row counts off every tile, n up
// to 9, quantized and random-byte weights, normal and special activations,
// unaligned slices with guards; and batch invariance: every row of an n-row
// call, at every pool size and row-block size, equals a MatVec of it alone.
func TestKQuantSets(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	for _, set := range isaSets {
		t.Run(set, func(t *testing.T) {
			useSet(t, set)
			for _, dt := range kqTypes {
				t.Run(dt.String(), func(t *testing.T) {
					// Every non-generic set, amd64 and arm64, has them.
					if set != "generic" && !kernels.KQuantFast(dt) {
						t.Fatalf("%s set installed no Q8_K kernel for %v", set, dt)
					}
					r := newRand(t)
					for _, cols := range []int{256, 512, 768, 1280} {
						for _, rows := range []int{1, 3, 5, 17} {
							for _, mode := range []weightMode{encoded, rawBits} {
								for _, k := range []kind{normal, special} {
									off := r.IntN(4)
									n := 1 + r.IntN(9)
									w := makeBlockWeight(r, dt, rows, cols, off, mode)
									x := vec(r, n*cols+off, k)[off:]
									what := fmt.Sprintf("%v %d×%d n=%d %s/%s", dt, rows, cols, n, mode, k)
									kqCheck(t, what, pools, w, x, n)
								}
							}
						}
					}
				})
			}
		})
	}
}

func kqCheck(t *testing.T, what string, pools []*kernels.Pool, w kernels.Weight, x []float32, n int) {
	t.Helper()
	rows, cols := w.Rows, w.Cols
	want := make([]float32, n*rows)
	ref.MatMul(want, w, x, n)
	single := make([]float32, n*rows)
	for i := 0; i < n; i++ {
		buf, dst := guarded(rows, 1)
		kernels.MatVec(nil, dst, w, x[i*cols:(i+1)*cols])
		checkGuard(t, buf, 1, rows)
		copy(single[i*rows:], dst)
	}
	requireKQRef(t, what, w, x, n, want, single)
	for bi, blk := range []int{0, 2 * cols} {
		restore := func() {}
		if blk > 0 {
			restore = setRowBlockBytes(blk)
		}
		for k, p := range pools {
			for _, m := range []int{1, min(2, n), n} {
				buf, dst := guarded(m*rows, 3)
				kernels.MatMul(p, dst, w, x, m)
				checkGuard(t, buf, 3, m*rows)
				requireSame(t, fmt.Sprintf("%s m=%d pool=%d block=%d vs MatVec", what, m, k, bi), single[:m*rows], dst)
			}
		}
		restore()
	}
}

// TestKQuantEdges: no columns gives zeros, and a one-row weight over a
// prompt-sized batch agrees with ref.
func TestKQuantEdges(t *testing.T) {
	for _, dt := range kqTypes {
		w := kernels.Weight{DType: dt, Rows: 3, Cols: 0}
		dst := []float32{1, 2, 3, 4, 5, 6}
		kernels.MatMul(nil, dst, w, nil, 2)
		for i, v := range dst {
			if v != 0 {
				t.Fatalf("%v 3×0: dst[%d] = %v, want 0", dt, i, v)
			}
		}
		r := newRand(t, uint64(dt))
		w = makeBlockWeight(r, dt, 1, 512, 0, encoded)
		x := vec(r, 64*512, normal)
		want, got := make([]float32, 64), make([]float32, 64)
		ref.MatMul(want, w, x, 64)
		kernels.MatMul(nil, got, w, x, 64)
		requireKQRef(t, fmt.Sprintf("%v 1×512 n=64", dt), w, x, 64, want, got)
	}
}

func TestKQuantNoAlloc(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	defer kernels.SetParallelMinMACs(1)()
	for _, dt := range kqTypes {
		r := newRand(t)
		w := makeBlockWeight(r, dt, 16, 512, 0, encoded)
		x := vec(r, 4*512, normal)
		dst := make([]float32, 4*16)
		for _, pool := range []*kernels.Pool{nil, p} {
			if a := testing.AllocsPerRun(20, func() { kernels.MatMul(pool, dst, w, x, 4) }); a != 0 && !raceEnabled {
				t.Errorf("%v: MatMul allocates %v times per call", dt, a)
			}
		}
	}
}

func BenchmarkKQuantMatVec(b *testing.B) {
	for _, dt := range kqTypes {
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("%v/n=%d", dt, n), func(b *testing.B) {
				r := newRand(b)
				w := makeBlockWeight(r, dt, 2048, 2048, 0, encoded)
				x := vec(r, n*2048, normal)
				dst := make([]float32, n*2048)
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					kernels.MatMul(nil, dst, w, x, n)
				}
			})
		}
	}
}
