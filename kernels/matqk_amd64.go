//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// The Q4_K, Q5_K and Q6_K products over Q8_K activations (actq8k.go), in
// assembly (matqk_amd64.s): AVX2, AVX-512 BW, and AVX-512 with VNNI's
// VPDPWSSD. The recipe is ggml_vec_dot_q{4,5,6}_K_q8_K's. Per super-block
// b of a weight row, with the row's integer levels l (0..15 for Q4_K, 0..31
// for Q5_K, 0..63 for Q6_K), 6-bit or int8 sub-block scales sc and mins m
// (ScaleMinK4), and the activation block's q, bsums and d:
//
//	Q4_K, Q5_K:  I = Σ_j sc_j · Σ_{i in sub-block j} l_i·q_i      (8 × 32)
//	             M = Σ_j m_j · (bsums[2j] + bsums[2j+1])
//	             s += float32(float32(d·dx)·float32(I)) − float32(float32(dmin·dx)·float32(M))
//	Q6_K:        I = Σ_s sc_s · (Σ_{i in s} l_i·q_i − 32·bsums[s])   (16 × 16)
//	             s += float32(float32(d·dx)·float32(I))
//
// with I and M exact int32 (VPMADDUBSW pairs stay below 2^15: 63·128·2;
// the sums below 2^31), each float32 operation rounded on its own (no FMA),
// s starting at 0 and running over b in order. An f16 scale d or dmin that
// is ±Inf is taken as NaN (as quantScaleTable does for Q8_0/Q4_0). So every
// kernel set (and matqk_model_test.go's Go model of it) gives the same bits
// for an output, whatever n, the tile or the thread split: batch invariant.
//
// Against kernels/ref the difference is the activation rounding (|x−d·q| ≤
// |d|/2 per value) and the float rounding of the two scaled sums; the
// tests' tolerance (matqk_test.go) is derived from both.

func init() { addSelector(selectKQuant) }

// selectKQuant installs the Q8_K-activation kernels for cap c (nil below
// AVX2: the generic block kernels, bit-identical to ref, run instead).
func selectKQuant(c isaLevel) {
	matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = nil, nil, nil
	switch {
	case c >= isaAMX && cpuAMX && amxOK():
		matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KAMX, matQ5_KAMX, matQ6_KAMX
	case c >= isaAVX512 && cpuVNNI:
		matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KVNNI, matQ5_KVNNI, matQ6_KVNNI
	case c >= isaAVX512 && cpuAVX512:
		matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KAVX512, matQ5_KAVX512, matQ6_KAVX512
	case c >= isaAVX2 && cpuAVX2:
		matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KAVX2, matQ5_KAVX2, matQ6_KAVX2
	}
}

// qkDot is one assembly kernel: the dot of the nb super-blocks at w with
// the nb Q8_K blocks at x (nb > 0).
type qkDot func(w, x *byte, nb int) float32

// qkTile is its 1 row × 4 inputs form: the dots of the row at w with the
// activation rows at x, x+xs, x+2xs, x+3xs (bytes) into *out, out+os, …
// (os in bytes), each bit-identical to qkDot's.
type qkTile func(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q4kDotAVX2(w, x *byte, nb int) float32

//go:noescape
func q5kDotAVX2(w, x *byte, nb int) float32

//go:noescape
func q6kDotAVX2(w, x *byte, nb int) float32

//go:noescape
func q4kDotAVX512(w, x *byte, nb int) float32

//go:noescape
func q5kDotAVX512(w, x *byte, nb int) float32

//go:noescape
func q6kDotAVX512(w, x *byte, nb int) float32

//go:noescape
func q4kDotVNNI(w, x *byte, nb int) float32

//go:noescape
func q5kDotVNNI(w, x *byte, nb int) float32

//go:noescape
func q6kDotVNNI(w, x *byte, nb int) float32

//go:noescape
func q4kTile4AVX2(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q4kTile4AVX512(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q4kTile4VNNI(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q5kTile4AVX2(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q5kTile4AVX512(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q5kTile4VNNI(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q6kTile4AVX2(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q6kTile4AVX512(w, x *byte, nb, xs int, out *float32, os int)

//go:noescape
func q6kTile4VNNI(w, x *byte, nb, xs int, out *float32, os int)

func matQ4_KAVX2(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q4_K, kqPanelsAVX2, q4kDotAVX2, q4kTile4AVX2, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KAVX2(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q5_K, kqPanelsAVX2, q5kDotAVX2, q5kTile4AVX2, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KAVX2(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q6_K, kqPanelsAVX2, q6kDotAVX2, q6kTile4AVX2, dst, w, xq, n, rows, cols, lo, hi)
}

// matQ4_KAVX512, matQ4_KVNNI and matQ4_KAMX take q4kDotAVX2 for the
// one-input rows the four-row decode kernels (matqk_rows_amd64.go) leave
// over: every set's dot has the same bits, and the AVX2 one streamed a
// Q4_K row from L2 at 14.4–15.4 GB per CPU-second against 13.3–13.8 for
// the VNNI dot and 12.3–13.7 for the AVX-512 one (BenchmarkDecodeStream,
// thread CPU time, alternating runs on an AVX-512/AMX Xeon). Why, by port
// counting: with no 512-bit work in flight its 256-bit integer ops issue
// on ports 0, 1 and 5 and its scale broadcasts (VPBROADCASTW from the
// stack) are loads, where the 512-bit dots have ports 0 and 5 only and
// spend port 5 on VPERMW and VINSERTI64X4. The four-input tiles keep their
// own set's kernels.
func matQ4_KAVX512(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q4_K, kqPanelsAVX2, q4kDotAVX2, q4kTile4AVX512, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KAVX512(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q5_K, kqPanelsAVX2, q5kDotAVX512, q5kTile4AVX512, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KAVX512(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q6_K, kqPanelsAVX2, q6kDotAVX512, q6kTile4AVX512, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ4_KVNNI(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q4_K, kqPanelsVNNI, q4kDotAVX2, q4kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KVNNI(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q5_K, kqPanelsVNNI, q5kDotVNNI, q5kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KVNNI(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q6_K, kqPanelsVNNI, q6kDotVNNI, q6kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ4_KAMX(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q4_K, kqPanelsAMX, q4kDotAVX2, q4kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ5_KAMX(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q5_K, kqPanelsAMX, q5kDotVNNI, q5kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

func matQ6_KAMX(dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
	matQK(tensor.Q6_K, kqPanelsAMX, q6kDotVNNI, q6kTile4VNNI, dst, w, xq, n, rows, cols, lo, hi)
}

// matQK computes outputs [lo,hi) of a row-major weight of type t for all
// n inputs with dot and tile: inputs four at a time through tile (each
// weight block unpacked once for four), the rest one at a time. For a
// batch the rows go in blocks that stay in L2 (rowBlock) while every input
// passes over them. With a panel tile pt (nil: none), a batch of at least
// pt.minInputs() inputs takes it for its whole panels of rows and whole
// tiles of inputs (kqScratchPanels), and with pt.amx a batch of at least
// kqaMinInputs takes the AMX tiles for its whole panels of rows and all
// its inputs (kqAMXPanels): the same bits as dot's.
func matQK(t tensor.DType, pt *kqPanels, dot qkDot, tile qkTile, dst []float32, w, xq []byte, n, rows, cols, lo, hi int) {
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
	if pt != nil && pt.amx && n >= kqaMinInputs && hi-lo >= PanelRows {
		if lo = kqAMXPanels(t, dst, w, xq, n, rows, lo, hi, nb, rb); lo >= hi {
			return
		}
	} else if pt != nil && n >= max(pt.minInputs(), kqpTile) && hi-lo >= PanelRows {
		n8 := n / kqpTile * kqpTile
		full := kqScratchPanels(t, pt, dst, w, xq, n8, rows, lo, hi, nb, rb)
		if n8 < n { // the inputs after the last tile, over the panels' rows
			matQK(t, nil, dot, tile, dst[n8*rows:], w, xq[n8*xb:], n-n8, rows, cols, lo, full)
		}
		if lo = full; lo >= hi {
			return
		}
	}
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
				tile(&w[r*rb], x, nb, xb, &dst[i*rows+r], 4*rows)
			}
		}
		for ; i < n; i++ {
			x := &xq[i*xb]
			out := dst[i*rows : i*rows+r1]
			r := r0
			// Four rows a quarter of the range apart in turn: four
			// sequential weight streams in different pages, which the
			// hardware prefetchers follow (farRows).
			if h := farRows(r1-r0, 4, rb); h > 0 {
				if r4 := kqRows4(t); r4 != nil {
					// The four rows in one call (matqk_rows_amd64.go).
					for j := r0; j < r0+h; j++ {
						r4(&w[j*rb], h*rb, x, nb, &out[j], h*4)
					}
				} else {
					for j := r0; j < r0+h; j++ {
						out[j] = dot(&w[j*rb], x, nb)
						out[j+h] = dot(&w[(j+h)*rb], x, nb)
						out[j+2*h] = dot(&w[(j+2*h)*rb], x, nb)
						out[j+3*h] = dot(&w[(j+3*h)*rb], x, nb)
					}
				}
				r = r0 + 4*h
			}
			for ; r < r1; r++ {
				out[r] = dot(&w[r*rb], x, nb)
			}
		}
	}
}
