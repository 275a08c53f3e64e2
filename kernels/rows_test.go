package kernels_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// TestRowsSplit checks the row-wise kernels split across pools give the
// single-row kernels' bits, and do not allocate.
func TestRowsSplit(t *testing.T) {
	defer kernels.SetParallelMinMACs(1)()
	pools := []*kernels.Pool{nil, kernels.NewPool(2), kernels.NewPool(3)}
	for _, p := range pools[1:] {
		defer p.Close()
	}
	r := newRand(t)
	const heads, headDim = 3, 8
	for _, n := range []int{1, 2, 5, 17} {
		d := heads * headDim
		x, w := vec(r, n*d, normal), vec(r, d, normal)
		gate, up := vec(r, n*d, normal), vec(r, n*d, normal)
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = int32(3*i + 1)
		}
		// The single-row kernels, row by row.
		wantNorm := make([]float32, n*d)
		wantRope := append([]float32(nil), x...)
		wantGLU, wantAdd := make([]float32, n*d), append([]float32(nil), x...)
		for i := range n {
			kernels.RMSNorm(wantNorm[i*d:(i+1)*d], x[i*d:(i+1)*d], w, 1e-5)
			kernels.RoPE(wantRope[i*d:(i+1)*d], pos[i], heads, headDim, headDim, 10000, kernels.RopeHalf)
		}
		kernels.SwiGLU(wantGLU, gate, up)
		kernels.Add(wantAdd, gate)
		for k, p := range pools {
			what := fmt.Sprintf("n=%d pool=%d", n, k)
			norm := make([]float32, n*d)
			kernels.RMSNormRows(p, norm, x, n, w, 1e-5)
			requireSame(t, what+" RMSNormRows", wantNorm, norm)
			rope := append([]float32(nil), x...)
			kernels.RoPERows(p, rope, pos, heads, headDim, headDim, 10000, kernels.RopeHalf)
			requireSame(t, what+" RoPERows", wantRope, rope)
			glu := make([]float32, n*d)
			kernels.SwiGLURows(p, glu, gate, up, n)
			requireSame(t, what+" SwiGLURows", wantGLU, glu)
			add := append([]float32(nil), x...)
			kernels.AddRows(p, add, gate, n)
			requireSame(t, what+" AddRows", wantAdd, add)
			if a := testing.AllocsPerRun(10, func() {
				kernels.RMSNormRows(p, norm, x, n, w, 1e-5)
				kernels.RoPERows(p, rope, pos, heads, headDim, headDim, 10000, kernels.RopeHalf)
				kernels.SwiGLURows(p, glu, gate, up, n)
				kernels.AddRows(p, add, gate, n)
			}); a != 0 && !raceEnabled {
				t.Errorf("%s: %v allocations per call", what, a)
			}
		}
	}
	mustPanic(t, "kernels: RMSNormRows:", func() { kernels.RMSNormRows(nil, make([]float32, 3), make([]float32, 8), 2, make([]float32, 4), 1e-5) })
	mustPanic(t, "kernels: SwiGLURows:", func() { kernels.SwiGLURows(nil, make([]float32, 7), nil, nil, 2) })
	mustPanic(t, "kernels: RoPERows:", func() { kernels.RoPERows(nil, make([]float32, 5), []int32{0}, 1, 8, 8, 1e4, kernels.RopeHalf) })
}
