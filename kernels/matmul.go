package kernels

import (
	"fmt"

	"github.com/sluicehq/sluice/tensor"
)

// Dispatch variables for the per-dtype matrix kernels. Each computes output
// rows [lo,hi) of w for all n inputs:
//
//	// w: (rows, cols) in its dtype layout; x: (n, cols); dst: (n, rows)
//	for r := lo; r < hi; r++ {
//		for i := 0; i < n; i++ {
//			var s float32
//			for j := 0; j < cols; j++ {
//				s += float32(W(r, j) * x[i*cols+j]) // W = tensor.DequantizeRow value
//			}
//			dst[i*rows+r] = s
//		}
//	}
//
// Fast paths may replace them from an init() in a build-tagged file.
var (
	matF32Impl  matKernel = matF32Generic
	matF16Impl  matKernel = matF16Generic
	matBF16Impl matKernel = matBF16Generic
	matQ8_0Impl matKernel = matQ8_0Generic
	matQ4_0Impl matKernel = matQ4_0Generic
)

// Int8-activation kernels for Q8_0/Q4_0 weights: nil in the generic build.
// When set, MatMul quantizes x once per call (actQ8) and these compute
//
//	dst[i*rows+r] = Σ_blocks b: dW_b·dX_{i,b} · Σ_{j in b} qW(r,j)·qX(i,j)
//
// with the integer inner sum exact, so they are within the activation
// quantization error of the ref result (see actQ8), not bit-identical.
var (
	matQ8_0ActImpl actKernel
	matQ4_0ActImpl actKernel
)

// actKernel is matKernel over quantized activations.
type actKernel func(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int)

// matKernel computes dst[i*rows+r] for r in [lo,hi), i in [0,n); w is the
// whole weight's data.
type matKernel func(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int)

// matPieces is how many pieces per thread MatMul cuts a weight's rows (or
// panels) into for its Pool (Pool.forPieces; never more than the work has
// parallelMinMACs for): enough that a thread slowed for part of a matrix
// hands the rest to the other, few enough that a piece stays a long
// sequential stream (a 4096-row Q4_0 matrix at 2 threads: 8 pieces of 32
// panels, 1.2 MB each). The Q8_K-activation path (matKQ) still splits in
// fixed chunks.
const matPieces = 4

// parallelMinMACs is the least work (multiply-adds) worth handing to another
// thread; below it the wake-up costs more than it saves. It only decides how
// rows are split, never how one output is computed (tests lower it to force
// small matrices across threads).
var parallelMinMACs = 1 << 15

// MatMul multiplies n input rows by the transpose of w:
//
//	// w: (Rows, Cols); x: (n, Cols) row-major; dst: (n, Rows) row-major
//	dst[i*w.Rows+r] = Σ_j W(r, j) * x[i*w.Cols+j]   (float32, j ascending)
//
// where W(r, j) is the value tensor.DequantizeRow decodes. With the generic
// kernels (purego, SLUICE_ISA=generic) the result is bit-identical to
// kernels/ref.MatMul; the fast sets (AVX2, AVX-512, NEON) sum in their own
// fixed order, and Q8_0/Q4_0 and the K-quants over int8-quantized
// activations, so they are within the tolerance close_test.go derives, not
// bit-identical. Every set fixes each output's reduction order by the shapes
// alone: the result does not depend on n or on the pool's size (batch
// invariance). p may be nil (single-threaded). It panics if w fails Validate
// or a slice is too short. It does not allocate.
func MatMul(p *Pool, dst []float32, w Weight, x []float32, n int) {
	if err := w.Validate(); err != nil {
		panic(err)
	}
	if n < 0 || len(x) < n*w.Cols || len(dst) < n*w.Rows {
		panic(fmt.Sprintf("kernels: MatMul: %d×%d weight, n=%d: len(x)=%d (want ≥%d), len(dst)=%d (want ≥%d)",
			w.Rows, w.Cols, n, len(x), n*w.Cols, len(dst), n*w.Rows))
	}
	if n == 0 || w.Rows == 0 {
		return
	}
	if k := kqKernelFor(w.DType); k != nil { // Q4_K/Q5_K/Q6_K over Q8_K activations (actq8k.go)
		matKQ(p, k, dst, w, x, n)
		return
	}
	j := matJob{k: matKernelFor(w.DType), dt: w.DType, layout: w.Layout, dst: dst, w: w.Data, x: x, n: n, rows: w.Rows, cols: w.Cols}
	locked := false
	if j.ak = actKernelFor(w.DType); j.ak != nil {
		// Quantize the activations once for the whole call, into scratch
		// owned by the Pool (guarded by its lock, so held for the call) or,
		// without a Pool, borrowed from the actFree list.
		if p != nil {
			p.mu.Lock()
			defer p.mu.Unlock()
			locked = true
			j.xq = &p.act
		} else {
			j.xq = getAct()
			defer putAct(j.xq)
		}
		j.xq.prepare(n, w.Cols, w.DType)
		if p != nil && p.threads > 1 && n > 1 && n*w.Cols >= parallelMinQuant {
			// A prompt chunk's activations, split by input row: done by
			// the caller alone it was the largest serial part of a
			// two-thread prefill.
			p.mat = j
			p.forLocked(n, p.threads, p.quantFn)
		} else {
			j.xq.rows(x, w.Cols, w.DType, 0, n)
		}
	}
	parts := 1 + w.Rows*w.Cols*n/parallelMinMACs
	units := w.Rows // what the threads split: rows, or panels of PanelRows
	if w.Layout != RowMajor {
		units = (w.Rows + PanelRows - 1) / PanelRows
	}
	if p == nil || p.threads == 1 || parts == 1 || units == 1 {
		j.run(0, units)
		return
	}
	if !locked {
		p.mu.Lock()
		defer p.mu.Unlock()
	}
	p.mat = j
	p.forPieces(units, parts, min(parts, matPieces*p.threads), p.matFn)
	p.mat = matJob{} // drop references to the caller's slices
}

// MatVec is MatMul with one input row: dst (w.Rows) = w · x (w.Cols).
func MatVec(p *Pool, dst []float32, w Weight, x []float32) {
	MatMul(p, dst, w, x, 1)
}

// matJob is one MatMul call, split by output row across a Pool.
type matJob struct {
	k             matKernel // nil: the generic extension path, matExt(dt, …)
	dt            tensor.DType
	layout        Layout
	ak            actKernel // when non-nil, used instead of k over xq
	xq            *actQ8
	dst, x        []float32
	w             []byte
	n, rows, cols int
}

// quant quantizes input rows [lo,hi) of the call's activations.
func (j *matJob) quant(lo, hi int) { j.xq.rows(j.x, j.cols, j.dt, lo, hi) }

// parallelMinQuant is the least activation count worth quantizing on more
// than one thread (a var for tests).
var parallelMinQuant = 1 << 14

// run computes units [lo,hi): output rows, or for a panel weight panels
// of PanelRows rows (the last one short when Rows%16 > 0).
func (j *matJob) run(lo, hi int) {
	if j.layout == RowMajor {
		j.rowMajor(j.dst, j.w, lo, hi)
		return
	}
	lo, hi = lo*PanelRows, min(hi*PanelRows, j.rows)
	pk := matQ8_0PanelImpl
	if j.layout == PanelQ4_0 {
		pk = matQ4_0PanelImpl
	}
	if j.ak != nil && pk != nil {
		pk(j.dst, j.w, j.xq, j.n, j.rows, j.cols, lo, hi)
		return
	}
	j.unpanelled(lo, hi)
}

// rowMajor runs the call's row-major kernel over rows [lo,hi) of w, with dst
// laid out (n, j.rows) from the weight's row 0.
func (j *matJob) rowMajor(dst []float32, w []byte, lo, hi int) {
	if j.ak != nil {
		j.ak(dst, w, j.xq, j.n, j.rows, j.cols, lo, hi)
		return
	}
	if j.k == nil {
		matExt(j.dt, dst, w, j.x, j.n, j.rows, j.cols, lo, hi)
		return
	}
	j.k(dst, w, j.x, j.n, j.rows, j.cols, lo, hi)
}

// actKernelFor is the int8-activation kernel for t, or nil.
func actKernelFor(t tensor.DType) actKernel {
	switch t {
	case tensor.Q8_0:
		return matQ8_0ActImpl
	case tensor.Q4_0:
		return matQ4_0ActImpl
	}
	return nil
}

// matKernelFor picks the dispatch variable for a dtype Validate accepted: for
// an extension dtype its registered kernel, or nil for the generic matExt.
func matKernelFor(t tensor.DType) matKernel {
	switch t {
	case tensor.F32:
		return matF32Impl
	case tensor.F16:
		return matF16Impl
	case tensor.BF16:
		return matBF16Impl
	case tensor.Q8_0:
		return matQ8_0Impl
	case tensor.Q4_0:
		return matQ4_0Impl
	}
	if k := blockKernelFor(t); k != nil {
		return k
	}
	if k := extKernelFor(t); k != nil {
		return k
	}
	if _, ok := tensor.LookupCodec(t); ok {
		return nil
	}
	panic("kernels: MatMul: unsupported dtype " + t.String())
}
