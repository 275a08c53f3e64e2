package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// geluInputs are values around the f16 table's edges (±10), zero, and the
// usual range, plus random ones.
func geluInputs(t *testing.T, n int, k kind) []float32 {
	r := newRand(t, uint64(n))
	x := vec(r, n, k)
	edges := []float32{0, -0.0, 1, -1, 9.99, 10, 10.01, -9.99, -10, -10.01, 65504, -65504, 1e-8, -1e-8, 3.5, -3.5}
	for i := range x {
		if i%5 == 0 {
			x[i] = edges[(i/5)%len(edges)]
		} else if k == normal {
			x[i] *= 4 // spread over the curve's bend and past ±10
		}
	}
	return x
}

func TestGeGLUVsRef(t *testing.T) {
	for _, k := range []kind{normal, special} {
		for _, n := range sizes {
			for _, off := range offsets() {
				gate := at(geluInputs(t, n, k), off)
				up := vec(newRand(t, uint64(n), 7), n, normal)
				want := make([]float32, n)
				ref.GeGLU(want, gate, up)
				buf, dst := guarded(n, off)
				kernels.GeGLU(dst, gate, up)
				checkGuard(t, buf, off, n)
				requireSame(t, fmt.Sprintf("%v n=%d off=%d", k, n, off), want, dst)
			}
		}
	}
	mustPanic(t, "kernels: GeGLU:", func() { kernels.GeGLU(make([]float32, 3), make([]float32, 2), make([]float32, 3)) })
}

// TestGeGLUIsGgmlTable: GELU through the f16 table is within f16 rounding
// of the float formula, exactly 0 below -10 and the identity above 10, and
// the formula itself has GELU's known values.
func TestGeGLUIsGgmlTable(t *testing.T) {
	for _, c := range []struct{ x, want float32 }{{0, 0}, {1, 0.8411920}, {-1, -0.1588080}, {2, 1.9545977}, {-3, -0.0036373}} {
		if got := kernels.GELUTanh(c.x); math.Abs(float64(got-c.want)) > 1e-6 {
			t.Errorf("GELUTanh(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	xs := []float32{-12, -10, -9.5, -1, -0.25, 0, 0.3, 1, 2.5, 9.5, 10, 12}
	ones := []float32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}
	got := make([]float32, len(xs))
	kernels.GeGLU(got, xs, ones)
	for i, x := range xs {
		switch {
		case x <= -10:
			if got[i] != 0 {
				t.Errorf("gelu(%v) = %v, want 0", x, got[i])
			}
		case x >= 10:
			if got[i] != x {
				t.Errorf("gelu(%v) = %v, want %v", x, got[i], x)
			}
		default:
			f := kernels.GELUTanh(x)
			if d := math.Abs(float64(got[i] - f)); d > 2e-3*(math.Abs(float64(f))+1e-3) {
				t.Errorf("gelu(%v) = %v through the table, %v by the formula", x, got[i], f)
			}
		}
	}
	// An input between two f16 values takes the table entry of its rounding.
	a, b := []float32{1.0004}, []float32{1}
	kernels.GeGLU(a, a, b)
	one := []float32{1}
	kernels.GeGLU(one, one, b)
	if a[0] != one[0] {
		t.Errorf("gelu(1.0004) = %v, gelu(1) = %v: want the same f16 entry", a[0], one[0])
	}
}

func TestSoftcapScaleVsRef(t *testing.T) {
	for _, k := range []kind{normal, special} {
		for _, n := range sizes {
			r := newRand(t, uint64(n))
			x := vec(r, n, k)
			for i := range x {
				x[i] *= 60
			}
			for _, c := range []float32{50, 30, 1.5} {
				want, got := append([]float32(nil), x...), append([]float32(nil), x...)
				ref.Softcap(want, c)
				kernels.Softcap(got, c)
				requireSame(t, fmt.Sprintf("Softcap %v n=%d", c, n), want, got)
				for i, v := range got {
					if !math.IsNaN(float64(v)) && math.Abs(float64(v)) > float64(c) {
						t.Fatalf("Softcap(%v, %v) = %v beyond the cap", x[i], c, v)
					}
				}
			}
			want, got := append([]float32(nil), x...), append([]float32(nil), x...)
			ref.Scale(want, 0.125)
			kernels.Scale(got, 0.125)
			requireSame(t, fmt.Sprintf("Scale n=%d", n), want, got)
		}
	}
	mustPanic(t, "kernels: Softcap:", func() { kernels.Softcap(make([]float32, 1), 0) })
}

func TestGeGLURowsEqualsGeGLU(t *testing.T) {
	r := newRand(t)
	const n, d = 37, 613
	gate, up := vec(r, n*d, normal), vec(r, n*d, normal)
	for i := range gate {
		gate[i] *= 5
	}
	want := make([]float32, n*d)
	kernels.GeGLU(want, gate, up)
	for _, th := range []int{1, 2, 3} {
		p := kernels.NewPool(th)
		got := make([]float32, n*d)
		kernels.GeGLURows(p, got, gate, up, n)
		p.Close()
		requireSame(t, fmt.Sprintf("threads=%d", th), want, got)
	}
}

// TestAttentionSoftcapVsRef: capped attention equals ref bit for bit in
// every build (a capped call always runs the generic kernel), for every
// mask kind and thread count, and the cap changes the result.
func TestAttentionSoftcapVsRef(t *testing.T) {
	r := newRand(t)
	for _, sh := range attnShapes {
		s := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.headDim, Scale: 1, Softcap: 2}
		width := sh.kvHeads * sh.headDim
		const n, rows = 19, 4
		kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 5)
		for name, m := range maskKinds(r, rows, n) {
			q := vec(r, rows*sh.heads*sh.headDim, normal)
			for i := range q {
				q[i] *= 3 // scores well past the cap
			}
			want := make([]float32, len(q))
			ref.Attention(want, q, rows, kv, m, s)
			for _, th := range []int{1, 2} {
				p := kernels.NewPool(th)
				got := make([]float32, len(q))
				kernels.AttentionPool(p, got, q, rows, kv, m, s, make([]float32, kernels.AttentionPoolScratch(p, kv, rows)))
				p.Close()
				requireSame(t, fmt.Sprintf("h%d kv%d d%d mask=%s threads=%d", sh.heads, sh.kvHeads, sh.headDim, name, th), want, got)
			}
			uncapped := make([]float32, len(q))
			s0 := s
			s0.Softcap = 0
			ref.Attention(uncapped, q, rows, kv, m, s0)
			if sh.headDim > 0 && slicesEqual(uncapped, want) && m == nil {
				t.Errorf("h%d d%d: a cap of 2 left attention unchanged", sh.heads, sh.headDim)
			}
		}
	}
}

func slicesEqual(a, b []float32) bool {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
