package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"github.com/sluicehq/sluice/tensor"
)

// actQ8 holds n activation rows quantized per 32-value block to int8 with one
// float32 scale per block, the way llama.cpp quantizes activations to q8_0
// before an integer dot product against Q8_0/Q4_0 weights:
//
//	d = max_j |x_j| / 127;  q_j = round(x_j / d)  (q = 0 when d = 0)
//
// so x_j ≈ d·q_j with |x_j − d·q_j| ≤ d/2 (plus float rounding of the
// reciprocal). The scale is kept in float32, not f16 as llama.cpp does: it
// costs nothing and removes one rounding. A block holding NaN or ±Inf gets
// scale NaN, so every output that reads it is NaN (ref would give NaN or ±Inf;
// the fast quantized paths only promise "non-finite").
//
// It is filled once per MatMul call (not per thread or per weight row) into
// memory owned by the Pool or taken from actFree, so the call does not allocate once
// the buffers have grown to the largest shape seen.
type actQ8 struct {
	q []int8    // n*cols quantized values, row-major like x
	d []float32 // n*cols/32 block scales

	// xb, sb and db serve the amd64 Q8_0 and Q4_0 kernels (q8Major,
	// q4Major set by the selector; the arm64 ones read q and d): the
	// inputs in groups of gw = min(n, majorGroup), each group's blocks in
	// block-major order, input i's block b at index
	// (i/gw)·nb·gw + b·gw + i%gw (majorAt): xb its 32 values (a copy of q
	// when n > 1; with one input q is already in this order), sb −128·Σ of
	// them (what the VNNI Q8_0 kernels' unsigned w+128 adds, to subtract;
	// the Q4_0 kernels take sb/16 = −8·Σ for the nibbles' +8) and db its
	// scale. A tile of up to 8 inputs then finds its blocks side by side
	// and walks one sequential stream (a stride of n blocks put every
	// block of a 128-input call in the same L1 sets). See matQ8_0VNNI.
	n, gw int
	xb    []int8
	sb    []int32
	db    []float32
	// s4 is sb/16 = −8·Σ in the same layout, for Q4_0 only (q4Major): the
	// VNNI Q4_0 panels start their integer sums from it by a broadcast
	// load, where a shift of sb would take a slot of the one port that
	// runs VPDPBUSD.
	s4 []int32
}

// actFree is a small free list serving MatMul calls made with a nil *Pool: a
// buffered channel rather than a sync.Pool, whose items the GC (and, under
// -race, a deliberate random drop) may discard, making calls allocate.
var actFree = make(chan *actQ8, 16)

// getAct takes a scratch from the free list, or a new one when it is empty
// (more concurrent nil-Pool callers than it holds).
func getAct() *actQ8 {
	select {
	case a := <-actFree:
		return a
	default:
		return new(actQ8)
	}
}

// putAct returns a to the free list, dropping it when the list is full.
func putAct(a *actQ8) {
	select {
	case actFree <- a:
	default:
	}
}

// quantize fills a from x: (n, cols) row-major, cols a multiple of 32: q and
// d always, then xb, sb and db when the kernels of weight type t read them
// (q8Major for Q8_0, q4Major for Q4_0).
func (a *actQ8) quantize(x []float32, n, cols int, t tensor.DType) {
	a.prepare(n, cols, t)
	a.rows(x, cols, t, 0, n)
}

// prepare sizes a for n rows of cols values for weight type t, so that
// rows may then run on disjoint row ranges concurrently.
func (a *actQ8) prepare(n, cols int, t tensor.DType) {
	nb := n * cols / tile
	a.q = grow(a.q, n*cols)
	a.d = grow(a.d, nb)
	if t == tensor.Q8_0 && q8Major || t == tensor.Q4_0 && q4Major {
		a.n, a.gw = n, min(n, majorGroup)
		padded := (n + a.gw - 1) / a.gw * a.gw // the last group's unused slots
		if n > 1 {
			a.xb = grow(a.xb, padded*cols)
		}
		a.sb = grow(a.sb, padded*cols/tile)
		a.db = grow(a.db, padded*cols/tile)
		if t == tensor.Q4_0 {
			a.s4 = grow(a.s4, padded*cols/tile)
		}
	}
}

// rows quantizes input rows [lo,hi) of x (cols values each) into a,
// prepared for type t.
func (a *actQ8) rows(x []float32, cols int, t tensor.DType, lo, hi int) {
	bpr := cols / tile // blocks per row
	b0, b1 := lo*bpr, hi*bpr
	quantizeBlocksImpl(a.q[b0*tile:b1*tile], a.d[b0:b1], x[b0*tile:b1*tile])
	roundScalesF16(a.d[b0:b1])
	if t == tensor.Q8_0 && q8Major || t == tensor.Q4_0 && q4Major {
		a.major(bpr, lo, hi, t == tensor.Q4_0)
	}
}

// roundScalesF16 rounds each block scale to binary16, as llama.cpp's
// quantize_row_q8_0 stores it (block_q8_0's d is a ggml_half) for the
// Q8_0 and Q4_0 dot products, so both engines multiply by the same scale;
// the values stay those quantized with the unrounded scale, as ggml's. A
// scale beyond binary16's range (a block maximum over 65504·127) keeps its
// float32 value: ggml's would become +Inf and every product with it Inf or
// NaN. Measured on model/archs' 64-wide Q8_0 files, seeds 11–18 of each
// architecture: 10 of 48 greedy runs gave llama.cpp's 64 ids with float32
// scales, 42 with binary16 ones.
//
// The AVX2 sets round 8 scales at a time with F16C (roundScalesF16C): every
// block of every input of every matrix product goes through here, and the
// pair of scalar conversions was 2.5% of a 32-sequence decode step of the
// 110m Q8_0 model at one thread; VCVTPS2PH and VCVTPH2PS give the same bits
// (TestRoundScalesF16).
func roundScalesF16(d []float32) { roundScalesImpl(d) }

// roundScalesImpl is roundScalesGeneric unless a selector installs a vector
// loop with its bits.
var roundScalesImpl = roundScalesGeneric

func roundScalesGeneric(d []float32) {
	for i, v := range d {
		if v <= 65504 { // false for NaN: it stays
			d[i] = tensor.F16ToF32(tensor.F32ToF16(v))
		}
	}
}

// q8Major and q4Major are set by the selector when the Q8_0 (Q4_0)
// kernels read actQ8's block-major fields (xb, sb, db) rather than q and d.
var q8Major, q4Major = false, false

// majorGroup is the most inputs in a group of the block-major layout: 8,
// or 16 under the AMX set, whose A tiles are 16 inputs' blocks.
var majorGroup = 8

// majorAt is the index of input i's block b in xb, sb and db (nb blocks
// per input).
func (a *actQ8) majorAt(i, b, nb int) int {
	return (i/a.gw)*nb*a.gw + b*a.gw + i%a.gw
}

// major fills xb, sb and db (and s4 when q4) for input rows [lo,hi) (bpr
// blocks each).
func (a *actQ8) major(bpr, lo, hi int, q4 bool) {
	for i := lo; i < hi; i++ {
		k := a.majorAt(i, 0, bpr)
		for b := 0; b < bpr; b, k = b+1, k+a.gw {
			src := a.q[(i*bpr+b)*tile : (i*bpr+b+1)*tile]
			if a.n > 1 {
				copy(a.xb[k*tile:(k+1)*tile], src)
			}
			a.sb[k] = -128 * blockSum(src)
			if q4 {
				a.s4[k] = a.sb[k] / 16
			}
			a.db[k] = a.d[i*bpr+b]
		}
	}
}

// blockSum is Σ q over a 32-value block, eight bytes at a time: each byte
// biased to unsigned (x^0x80 = x+128), pairs and then fours of bytes added
// in wider lanes (no carry can cross: 4·255 < 2^16), less 32·128.
func blockSum(q []int8) int32 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), tile)
	const m8, m16 = 0x00ff00ff00ff00ff, 0x0000ffff0000ffff
	var s uint64
	for j := 0; j < tile; j += 8 {
		v := binary.LittleEndian.Uint64(b[j:]) ^ 0x8080808080808080
		v = v&m8 + v>>8&m8
		s += v&m16 + v>>16&m16
	}
	return int32(s&0xffffffff+s>>32) - tile*128
}

// blocks is xb, or q when it is the same (one input).
func (a *actQ8) blocks() []int8 {
	if a.n == 1 {
		return a.q
	}
	return a.xb
}

// quantizeBlockImpl is quantizeBlockQ8 or a vector version giving the same
// bits (set from an init() in actq8_simd_amd64.go).
var quantizeBlockImpl = quantizeBlockQ8

// quantizeBlocksImpl quantizes the len(d) blocks of x into q and d:
// quantizeBlocks, or an assembly version giving the same bits (set by the
// selector in dispatch_amd64.go).
var quantizeBlocksImpl = quantizeBlocks

func quantizeBlocks(q []int8, d, x []float32) {
	for b := range d {
		d[b] = quantizeBlockImpl(q[b*tile:(b+1)*tile], x[b*tile:(b+1)*tile])
	}
}

// grow returns s resized to n, reallocating only when its capacity is short.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// quantizeBlockQ8 quantizes one 32-value block into q and returns its scale.
func quantizeBlockQ8(q []int8, x []float32) float32 {
	q = q[:tile]
	x = x[:tile]
	var amax float32
	finite := true
	for _, v := range x {
		a := float32(math.Abs(float64(v)))
		if !(a <= math.MaxFloat32) { // NaN or Inf
			finite = false
		}
		amax = max(amax, a)
	}
	if !finite {
		clear(q)
		return float32(math.NaN())
	}
	if amax == 0 {
		clear(q)
		return 0
	}
	// The reciprocal in float64: 127/amax overflows float32 for subnormal amax.
	id := 127 / float64(amax)
	for j, v := range x {
		r := math.RoundToEven(float64(v) * id)
		q[j] = int8(max(-127, min(127, r)))
	}
	return amax / 127
}
