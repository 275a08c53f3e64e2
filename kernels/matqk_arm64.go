//go:build arm64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// The Q4_K, Q5_K and Q6_K products over Q8_K activations (actq8k.go) in
// NEON assembly (matqk_arm64.s), with the arithmetic of the amd64 sets
// (matqk_amd64.go), so every set on both architectures gives the same bits
// for an output. Per super-block b of a weight row, with integer levels l,
// sub-block scales sc and mins m, and the activation block's q, bsums, dx:
//
//	Q4_K, Q5_K:  I = Σ_j sc_j · Σ_{i in sub-block j} l_i·q_i      (8 × 32)
//	             M = Σ_j m_j · (bsums[2j] + bsums[2j+1])
//	             s += float32(float32(d·dx)·float32(I)) − float32(float32(dmin·dx)·float32(M))
//	Q6_K:        I = Σ_s sc_s · Σ_{i in s} l_i·q_i − 32·Σ_s sc_s·bsums[s]   (16 × 16)
//	             s += float32(float32(d·dx)·float32(I))
//
// I and M are exact int32 on both integer paths: SDOT ("neon-dotprod") and
// SMULL/SMLAL into int16 lanes then SADDLP ("neon"; at most four products of
// a level below 64 and an activation byte share a lane, below 2^15), so the
// two sets give the same bits. d and dmin are f16 read through
// quantScaleTable (±Inf made NaN), each float32 operation is rounded on its
// own (no FMA), and s starts at 0 and runs over b in order, whatever n, the
// tile or the thread split: batch invariant.
//
// Decode (n = 1) runs one row per call; batches run tiles of one row × four
// inputs (each weight block unpacked once for four inputs, the four sums
// in the lanes of one register, each lane's float steps those of the
// one-input kernel) over blocks of rows that stay in L2 (rowBlock), the
// leftover inputs one at a time; on the SDOT set, batches of kqnMinInputs
// or more take panel tiles instead (matqk_panel_arm64.go, the same bits).
// The activations are quantized by quantizeRowQ8K (its blocks in NEON,
// actq8k_arm64.s): one pass over n×cols floats per call, against a weight
// pass of rows×cols.
type qkNEON struct {
	dot  func(w, x *byte, nb int, tab *float32) float32
	tile func(w, x *byte, nb, xs int, out *float32, os int, tab *float32)
}

var (
	q4kDP = qkNEON{q4kDotDP, q4kTileDP}
	q5kDP = qkNEON{q5kDotDP, q5kTileDP}
	q6kDP = qkNEON{q6kDotDP, q6kTileDP}
	q4kSM = qkNEON{q4kDotSM, q4kTileSM}
	q5kSM = qkNEON{q5kDotSM, q5kTileSM}
	q6kSM = qkNEON{q6kDotSM, q6kTileSM}
)

func matQ4_KDotProd(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q4kDP, tensor.Q4_K, true, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KDotProd(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q5kDP, tensor.Q5_K, true, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KDotProd(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q6kDP, tensor.Q6_K, true, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ4_KNEON(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q4kSM, tensor.Q4_K, false, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KNEON(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q5kSM, tensor.Q5_K, false, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KNEON(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQKNEON(&q6kSM, tensor.Q6_K, false, dst, w, xq, n, rows, cols, lo, hi)
}

// matQKNEON computes outputs [lo,hi) for all n inputs with k, for weights
// of type t. With panels (the SDOT set), a batch of at least kqnMinInputs
// takes the panel tiles (matqk_panel_arm64.go) for its whole panels of rows
// and whole tiles of inputs, the same bits as k's.
func matQKNEON(k *qkNEON, t tensor.DType, panels bool, dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	nb := cols / tensor.QK_K
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	if n <= 0 || lo >= hi {
		return
	}
	rb, xb := nb*t.BlockBytes(), nb*q8kBlk
	// Everything the assembly touches, checked once.
	_ = w[hi*rb-1]
	_ = xq[n*xb-1]
	_ = dst[(n-1)*rows+hi-1]
	if panels && n >= max(kqnMinInputs, kqnTile) && hi-lo >= PanelRows {
		n4 := n / kqnTile * kqnTile
		full := kqScratchPanelsNEON(t, dst, w, xq, n4, rows, lo, hi, nb, rb)
		if n4 < n { // the inputs after the last tile, over the panels' rows
			matQKNEON(k, t, false, dst[n4*rows:], w, xq[n4*xb:], n-n4, rows, cols, lo, full)
		}
		if lo = full; lo >= hi {
			return
		}
	}
	tab := &quantScaleTable()[0]
	step := rowBlock(rb)
	if n == 1 {
		step = hi - lo
	}
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			x := &xq[i*xb]
			for r := r0; r < r1; r++ {
				k.tile(&w[r*rb], x, nb, xb, &dst[i*rows+r], 4*rows, tab)
			}
		}
		for ; i < n; i++ {
			x := &xq[i*xb]
			out := dst[i*rows : i*rows+r1]
			for r := r0; r < r1; r++ {
				out[r] = k.dot(&w[r*rb], x, nb, tab)
			}
		}
	}
}

//go:noescape
func q4kDotDP(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q5kDotDP(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q6kDotDP(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q4kDotSM(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q5kDotSM(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q6kDotSM(w, x *byte, nb int, tab *float32) float32

//go:noescape
func q4kTileDP(w, x *byte, nb, xs int, out *float32, os int, tab *float32)

//go:noescape
func q5kTileDP(w, x *byte, nb, xs int, out *float32, os int, tab *float32)

//go:noescape
func q6kTileDP(w, x *byte, nb, xs int, out *float32, os int, tab *float32)

//go:noescape
func q4kTileSM(w, x *byte, nb, xs int, out *float32, os int, tab *float32)

//go:noescape
func q5kTileSM(w, x *byte, nb, xs int, out *float32, os int, tab *float32)

//go:noescape
func q6kTileSM(w, x *byte, nb, xs int, out *float32, os int, tab *float32)
