package kernels

import "fmt"

// The row-wise kernels of a forward pass (RMSNorm, RoPE, SwiGLU, the
// residual add) over the n rows of a batch, split across a Pool when the
// batch is large enough to pay for the hand-off: on two threads a prompt
// chunk spent a tenth of its time in them on one thread while the other
// waited. Each row (each element, for SwiGLU and Add) is computed exactly as
// the single-row kernel computes it, so the split never changes a bit. p may
// be nil. None of them allocates.

// parallelMinRows is the least floats worth splitting a row-wise kernel
// across threads (a var for tests).
var parallelMinRows = 1 << 14

type rowKind uint8

const (
	rowRMSNorm rowKind = iota + 1
	rowRoPE
	rowSwiGLU
	rowAdd
	rowGeGLU
)

// rowJob is one row-wise call, split by row across a Pool.
type rowJob struct {
	kind                    rowKind
	dst, a, b, w            []float32
	pos                     []int32
	dim                     int // floats per row
	heads, headDim, ropeDim int
	base, eps               float32
	style                   RopeStyle
}

func (j *rowJob) run(lo, hi int) {
	d := j.dim
	switch j.kind {
	case rowRMSNorm:
		if rmsNormRowsFast(j.dst, j.a, j.w, d, lo, hi, j.eps) {
			return
		}
		for r := lo; r < hi; r++ {
			rmsNormImpl(j.dst[r*d:(r+1)*d], j.a[r*d:(r+1)*d], j.w, j.eps)
		}
	case rowRoPE:
		for r := lo; r < hi; r++ {
			ropeImpl(j.dst[r*d:(r+1)*d], j.pos[r], j.heads, j.headDim, j.ropeDim, j.base, j.style)
		}
	case rowSwiGLU:
		swiGLUImpl(j.dst[lo*d:hi*d], j.a[lo*d:hi*d], j.b[lo*d:hi*d])
	case rowAdd:
		addImpl(j.dst[lo*d:hi*d], j.a[lo*d:hi*d])
	case rowGeGLU:
		geGLUImpl(j.dst[lo*d:hi*d], j.a[lo*d:hi*d], j.b[lo*d:hi*d])
	}
}

// runRows runs j over n rows, on p's threads when worthwhile.
func runRows(p *Pool, j rowJob, n int) {
	if p == nil || p.threads == 1 || n < 2 || n*j.dim < parallelMinRows {
		j.run(0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.row = j
	p.forLocked(n, p.threads, p.rowFn)
	p.row = rowJob{} // drop references to the caller's slices
}

// RMSNormRows is RMSNorm of each of the n rows of x (len(x)/n floats each)
// into dst, with one weight for all rows.
func RMSNormRows(p *Pool, dst, x []float32, n int, weight []float32, eps float32) {
	d := rowsDim("RMSNormRows", len(x), n)
	if len(dst) < n*d || len(weight) < d {
		panic(fmt.Sprintf("kernels: RMSNormRows: %d rows of %d: len(dst)=%d, len(weight)=%d", n, d, len(dst), len(weight)))
	}
	runRows(p, rowJob{kind: rowRMSNorm, dst: dst, a: x, w: weight, dim: d, eps: eps}, n)
}

// RoPERows is RoPE of each row of x (heads·headDim floats) at the position
// of the same index in pos.
func RoPERows(p *Pool, x []float32, pos []int32, heads, headDim, ropeDim int, base float32, style RopeStyle) {
	n, d := len(pos), heads*headDim
	if ropeDim < 0 || ropeDim%2 != 0 || ropeDim > headDim || heads < 0 || len(x) < n*d ||
		(style != RopeAdjacent && style != RopeHalf) {
		panic(fmt.Sprintf("kernels: RoPERows: %d rows, len(x)=%d heads=%d headDim=%d ropeDim=%d style=%d",
			n, len(x), heads, headDim, ropeDim, style))
	}
	runRows(p, rowJob{kind: rowRoPE, dst: x, pos: pos, dim: d, heads: heads, headDim: headDim,
		ropeDim: ropeDim, base: base, style: style}, n)
}

// SwiGLURows is SwiGLU over n rows of len(dst)/n values.
func SwiGLURows(p *Pool, dst, gate, up []float32, n int) {
	d := rowsDim("SwiGLURows", len(dst), n)
	if len(gate) < n*d || len(up) < n*d {
		panic(fmt.Sprintf("kernels: SwiGLURows: len(dst)=%d, len(gate)=%d, len(up)=%d", len(dst), len(gate), len(up)))
	}
	runRows(p, rowJob{kind: rowSwiGLU, dst: dst, a: gate, b: up, dim: d}, n)
}

// GeGLURows is GeGLU over n rows of len(dst)/n values.
func GeGLURows(p *Pool, dst, gate, up []float32, n int) {
	d := rowsDim("GeGLURows", len(dst), n)
	if len(gate) < n*d || len(up) < n*d {
		panic(fmt.Sprintf("kernels: GeGLURows: len(dst)=%d, len(gate)=%d, len(up)=%d", len(dst), len(gate), len(up)))
	}
	runRows(p, rowJob{kind: rowGeGLU, dst: dst, a: gate, b: up, dim: d}, n)
}

// AddRows is Add (dst += a) over n rows of len(dst)/n values.
func AddRows(p *Pool, dst, a []float32, n int) {
	d := rowsDim("AddRows", len(dst), n)
	if len(a) < n*d {
		panic(fmt.Sprintf("kernels: AddRows: len(dst)=%d, len(a)=%d", len(dst), len(a)))
	}
	runRows(p, rowJob{kind: rowAdd, dst: dst, a: a, dim: d}, n)
}

// rowsDim is the row length of l floats in n rows; it panics unless they
// divide evenly. No rows of no floats is an empty call.
func rowsDim(name string, l, n int) int {
	if n == 0 && l == 0 {
		return 0
	}
	if n <= 0 || l%n != 0 {
		panic(fmt.Sprintf("kernels: %s: %d floats do not make %d rows", name, l, n))
	}
	return l / n
}
