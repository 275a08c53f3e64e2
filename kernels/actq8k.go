package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// Q8_K activations for the fast Q4_K, Q5_K and Q6_K kernels.
//
// When a fast kernel is installed for one of those weight types (matqk*.go),
// MatMul quantizes its n input rows once per call, each 256-value block as
// llama.cpp quantizes activations for ggml_vec_dot_q{4,5,6}_K_q8_K
// (quantize_row_q8_K_ref), into ggml's block_q8_K layout:
//
//	{ f32 d; i8 q[256]; i16 bsums[16] }   292 bytes
//	amax = the x of largest |x| (the first, with its sign); iscale = -127/amax
//	q = min(127, nearest(iscale·x)); d = 1/iscale; bsums[k] = Σ q[16k..16k+15]
//
// so x ≈ d·q with |x − d·q| ≤ |d|/2 up to float rounding. Two cases ggml does
// not handle are defined here: a block holding NaN or ±Inf gets d = NaN
// (every output reading it is then NaN, as for actQ8), and a block whose
// -127/amax overflows float32 (subnormal amax) takes the reciprocal in
// float64. An all-zero block has d = 0 and q = 0.
//
// The kernels then compute, per 256-value super-block of a weight row, an
// exact int32 sum of the integer weight levels times q, and combine it with
// the block's float scales once (see matqk_amd64.go); the result is within
// the activation quantization error of kernels/ref, not bit-identical.

// q8kBlk is the byte length of one quantized activation block.
const q8kBlk = tensor.Q8_KBlockLen

// kqKernel computes outputs [lo,hi) of w (rows × cols, a K-quant layout) for
// the n activation rows in xq (cols/256 q8K blocks each).
type kqKernel func(dst []float32, w, xq []byte, n, rows, cols, lo, hi int)

// Dispatch variables for the Q8_K-activation kernels: nil (use the generic
// block kernels, bit-identical to ref) unless a selector installs one.
var (
	matQ4_KActImpl kqKernel
	matQ5_KActImpl kqKernel
	matQ6_KActImpl kqKernel
)

// kqKernelFor is the installed Q8_K-activation kernel for t, or nil.
func kqKernelFor(t tensor.DType) kqKernel {
	switch t {
	case tensor.Q4_K:
		return matQ4_KActImpl
	case tensor.Q5_K:
		return matQ5_KActImpl
	case tensor.Q6_K:
		return matQ6_KActImpl
	}
	return nil
}

// kqJob is one MatMul call over Q8_K activations, with its scratch. Jobs are
// reused from kqFree, so their bound methods are made once and a call does
// not allocate once xq has grown to the largest shape seen.
type kqJob struct {
	k             kqKernel
	dst, x        []float32
	w, xq         []byte
	n, rows, cols int

	runFn, quantFn func(lo, hi int)
}

// kqFree is the free list of jobs (a channel, as actFree, so the GC does not
// drop them).
var kqFree = make(chan *kqJob, 16)

func getKQ() *kqJob {
	select {
	case j := <-kqFree:
		return j
	default:
		j := new(kqJob)
		j.runFn, j.quantFn = j.run, j.quant
		return j
	}
}

func putKQ(j *kqJob) {
	j.dst, j.x, j.w = nil, nil, nil // drop references to the caller's slices
	select {
	case kqFree <- j:
	default:
	}
}

func (j *kqJob) run(lo, hi int) { j.k(j.dst, j.w, j.xq, j.n, j.rows, j.cols, lo, hi) }

// quant quantizes input rows [lo,hi).
func (j *kqJob) quant(lo, hi int) {
	nb := j.cols / tensor.QK_K
	for i := lo; i < hi; i++ {
		quantizeRowQ8K(j.xq[i*nb*q8kBlk:(i+1)*nb*q8kBlk], j.x[i*j.cols:(i+1)*j.cols])
	}
}

// matKQ is MatMul for a weight with a Q8_K-activation kernel k (shapes
// already checked, n and rows > 0): quantize the inputs once (split by input
// row across p for a prompt chunk), then split the output rows as MatMul
// does. Each output's arithmetic depends only on cols.
func matKQ(p *Pool, k kqKernel, dst []float32, w Weight, x []float32, n int) {
	j := getKQ()
	defer putKQ(j)
	nb := w.Cols / tensor.QK_K
	j.k, j.dst, j.x, j.w, j.n, j.rows, j.cols = k, dst, x, w.Data, n, w.Rows, w.Cols
	j.xq = grow(j.xq, n*nb*q8kBlk)
	parts := 1 + w.Rows*w.Cols*n/parallelMinMACs
	if p == nil || p.threads == 1 {
		j.quant(0, n)
		j.run(0, w.Rows)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > 1 && n*w.Cols >= parallelMinQuant {
		p.forLocked(n, p.threads, j.quantFn)
	} else {
		j.quant(0, n)
	}
	p.forPieces(w.Rows, parts, min(parts, matPieces*p.threads), j.runFn)
}

// q8kBlockImpl, when set (amd64 from AVX2 up), quantizes the blocks it
// takes with quantizeBlockQ8K's bytes and reports whether it took one; the
// others go to quantizeBlockQ8K.
var q8kBlockImpl func(dst []byte, x []float32) bool

// quantizeRowQ8K quantizes len(x)/256 blocks of x into dst (block_q8_K).
func quantizeRowQ8K(dst []byte, x []float32) {
	fast := q8kBlockImpl
	for b := 0; b < len(x)/tensor.QK_K; b++ {
		d, v := dst[b*q8kBlk:(b+1)*q8kBlk], x[b*tensor.QK_K:(b+1)*tensor.QK_K]
		if fast == nil || !fast(d, v) {
			quantizeBlockQ8K(d, v)
		}
	}
}

// quantizeBlockQ8K is quantize_row_q8_K_ref for one block, with the NaN and
// subnormal cases described above.
func quantizeBlockQ8K(dst []byte, x []float32) {
	dst = dst[:q8kBlk]
	x = x[:tensor.QK_K]
	q, bs := dst[4:4+tensor.QK_K], dst[4+tensor.QK_K:]
	var amax, mx float32
	finite := true
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if !(a <= math.MaxFloat32) {
			finite = false
		}
		if a > amax {
			amax, mx = a, v
		}
	}
	if !finite || amax == 0 {
		d := float32(0)
		if !finite {
			d = float32(math.NaN())
		}
		binary.LittleEndian.PutUint32(dst, math.Float32bits(d))
		clear(dst[4:])
		return
	}
	iscale := -127 / mx
	var d float32
	if math.IsInf(float64(iscale), 0) {
		is := -127 / float64(mx)
		for j, v := range x {
			q[j] = byte(int8(min(127, math.RoundToEven(is*float64(v)))))
		}
		d = float32(1 / is)
	} else {
		for j, v := range x {
			q[j] = byte(int8(min(127, nearest(float32(iscale*v)))))
		}
		d = 1 / iscale
	}
	binary.LittleEndian.PutUint32(dst, math.Float32bits(d))
	for k := range tensor.QK_K / 16 {
		var s int16
		for _, v := range q[16*k : 16*k+16] {
			s += int16(int8(v))
		}
		binary.LittleEndian.PutUint16(bs[2*k:], uint16(s))
	}
}

// nearest is ggml's nearest_int (round half to even through the float32
// add of 1.5·2²³), valid for |f| ≤ 2²²; |iscale·x| ≤ 127 here. Callers
// round the product first (float32(iscale*v)): on arm64 the compiler may
// otherwise fuse it with the add into one FMADD, which rounds once and
// gave different bytes from amd64's and the NEON quantizer's.
func nearest(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// Product is one weight and its output for MatMulShared.
type Product struct {
	Dst []float32
	W   Weight
}

// MatMulShared is MatMul of each product's weight over the same n input rows
// x: Dst = W · x for every product, in order. When every weight takes Q8_K
// activations (Q4_K, Q5_K, Q6_K with a fast kernel installed) and they have
// the same Cols, x is quantized once for all of them: a layer's q, k and v
// (or gate and up) had quantized the same rows two or three times, 3–5% of
// a K-quant prefill. Quantizing a row is deterministic, so the results are
// those of separate MatMul calls, bit for bit; otherwise it makes them. It
// panics as MatMul does. It does not allocate.
func MatMulShared(p *Pool, x []float32, n int, prods ...Product) {
	shared := len(prods) > 1
	for _, pr := range prods {
		w := pr.W
		if err := w.Validate(); err != nil {
			panic(err)
		}
		if n < 0 || len(x) < n*w.Cols || len(pr.Dst) < n*w.Rows {
			panic(fmt.Sprintf("kernels: MatMulShared: %d×%d weight, n=%d: len(x)=%d (want ≥%d), len(dst)=%d (want ≥%d)",
				w.Rows, w.Cols, n, len(x), n*w.Cols, len(pr.Dst), n*w.Rows))
		}
		if kqKernelFor(w.DType) == nil || w.Cols != prods[0].W.Cols || w.Rows == 0 {
			shared = false
		}
	}
	if !shared || n == 0 {
		for _, pr := range prods {
			MatMul(p, pr.Dst, pr.W, x, n)
		}
		return
	}
	j := getKQ()
	defer putKQ(j)
	cols := prods[0].W.Cols
	nb := cols / tensor.QK_K
	j.x, j.n, j.cols = x, n, cols
	j.xq = grow(j.xq, n*nb*q8kBlk)
	if p == nil || p.threads == 1 {
		j.quant(0, n)
		for _, pr := range prods {
			j.k, j.dst, j.w, j.rows = kqKernelFor(pr.W.DType), pr.Dst, pr.W.Data, pr.W.Rows
			j.run(0, j.rows)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > 1 && n*cols >= parallelMinQuant {
		p.forLocked(n, p.threads, j.quantFn)
	} else {
		j.quant(0, n)
	}
	for _, pr := range prods {
		j.k, j.dst, j.w, j.rows = kqKernelFor(pr.W.DType), pr.Dst, pr.W.Data, pr.W.Rows
		parts := 1 + j.rows*cols*n/parallelMinMACs
		p.forPieces(j.rows, parts, min(parts, matPieces*p.threads), j.runFn)
	}
}
