//go:build amd64 && !purego

package kernels

import "math"

// softmaxAsm is the attention softmax of the fast sets: softmaxSIMD of the
// archsimd build (softmax16 on AVX-512, softmax8 on AVX2) with its vector
// loops in assembly (softmax_amd64.s), so both builds give the same bits.
// Against softmaxGeneric (= ref) it differs in the exp (a float32
// polynomial within expMaxRelErr of math.Exp, exp.go) and in the order of
// the sum (lane sums, then a fixed halving): TestSoftmaxAsm holds it to the
// tolerance TestSoftmaxSIMD derives. Each output depends only on its row's
// scores, so batch invariance holds. At stories260K's head dim 8 the
// generic softmax with its float64 math.Exp was half of a one-thread
// decode at 500 tokens of context.
//
// On AVX-512 the whole of it is one assembly call (softmaxRowAVX512: the
// same operations as softmaxLanes(x, 16), without the Go between the four
// loops, which at stories260K's 8 heads × 5 layers per token cost a fifth
// of the softmax).
func softmaxAsm(x []float32) {
	if len(x) == 0 {
		return
	}
	if level == isaAVX512 {
		softmaxRowAVX512(&x[0], len(x))
		return
	}
	softmaxLanes(x, 8)
}

// softmaxLanes is softmaxAsm on w lanes (8 or 16) with its vector loops in
// assembly and the steps between them in Go.
func softmaxLanes(x []float32, w int) {
	if len(x) == 0 {
		return
	}
	n := len(x)
	full := n &^ (w - 1)
	mx := x[0]
	var m, sum [16]float32
	if full > 0 {
		if w == 16 {
			softmaxMaxAVX512(&x[0], full, &m)
		} else {
			softmaxMaxAVX2(&x[0], full, &m)
		}
		for _, v := range m[:w] {
			mx = max32(mx, v)
		}
	}
	for _, v := range x[full:] {
		mx = max32(mx, v)
	}
	if full > 0 {
		softmaxExpLanes(&x[0], full, mx, &sum, w)
	}
	var b [16]float32
	if full < n {
		// The tail through a block padded with -Inf, whose exp is 0.
		for k := range b[:w] {
			b[k] = float32(math.Inf(-1))
		}
		copy(b[:], x[full:])
		softmaxExpLanes(&b[0], w, mx, &sum, w)
	}
	// hsum16 / hsum8's order: halves, then (a0+a2)+(a1+a3).
	if w == 16 {
		for k := range 8 {
			sum[k] += sum[k+8]
		}
	}
	for k := range 4 {
		sum[k] += sum[k+4]
	}
	s := (sum[0] + sum[2]) + (sum[1] + sum[3])
	// The division is IEEE's in every lane, so the tail's, done on the
	// padded block, has the bits of x[i] /= s.
	if full > 0 {
		softmaxDiv(&x[0], full, s, w)
	}
	if full < n {
		softmaxDiv(&b[0], w, s, w)
		copy(x[full:], b[:])
	}
}

func softmaxDiv(x *float32, n int, s float32, w int) {
	if w == 16 {
		softmaxDivAVX512(x, n, s)
	} else {
		softmaxDivAVX2(x, n, s)
	}
}

func softmaxExpLanes(x *float32, n int, mx float32, sum *[16]float32, w int) {
	if w == 16 {
		softmaxExpAVX512(x, n, mx, sum)
	} else {
		softmaxExpAVX2(x, n, mx, sum)
	}
}

// max32 is the generic softmax's max step: v replaces mx only if v > mx, so
// a NaN (never greater) is skipped here and poisons the sum instead.
func max32(mx, v float32) float32 {
	if v > mx {
		return v
	}
	return mx
}

//go:noescape
func softmaxRowAVX512(x *float32, n int)

//go:noescape
func softmaxMaxAVX512(x *float32, n int, m *[16]float32)

//go:noescape
func softmaxExpAVX512(x *float32, n int, mx float32, sum *[16]float32)

//go:noescape
func softmaxDivAVX512(x *float32, n int, s float32)

//go:noescape
func softmaxMaxAVX2(x *float32, n int, m *[16]float32)

//go:noescape
func softmaxExpAVX2(x *float32, n int, mx float32, sum *[16]float32)

//go:noescape
func softmaxDivAVX2(x *float32, n int, s float32)
