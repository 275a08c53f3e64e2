package kernels

import "math"

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
	// c and d4 serve the fast Q4_0 kernel, which takes a block's nibbles
	// unsigned (stored +8) and its integer dot in 4 int32 lanes, lane k
	// covering values 4k..4k+3 and 16+4k..16+4k+3:
	//   c[4b+k] = 8·Σ of those q (the +8 offset to subtract),
	//   d4[4b+k] = d[b],
	// so a pair of blocks reads 8 contiguous lanes of each.
	c  []int32
	d4 []float32
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

// quantize fills a from x: (n, cols) row-major, cols a multiple of 32.
func (a *actQ8) quantize(x []float32, n, cols int) {
	nb := n * cols / tile
	if cap(a.q) < n*cols {
		a.q = make([]int8, n*cols)
	}
	if cap(a.d) < nb {
		a.d = make([]float32, nb)
	}
	if cap(a.c) < 4*nb {
		a.c = make([]int32, 4*nb)
		a.d4 = make([]float32, 4*nb)
	}
	a.q, a.d, a.c, a.d4 = a.q[:n*cols], a.d[:nb], a.c[:4*nb], a.d4[:4*nb]
	x = x[:n*cols]
	for b := range nb {
		q := a.q[b*tile : (b+1)*tile]
		d := quantizeBlockQ8(q, x[b*tile:(b+1)*tile])
		a.d[b] = d
		for k := range 4 {
			var s int32
			for j := 4 * k; j < 4*k+4; j++ {
				s += int32(q[j]) + int32(q[j+tile/2])
			}
			a.c[4*b+k] = 8 * s
			a.d4[4*b+k] = d
		}
	}
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
