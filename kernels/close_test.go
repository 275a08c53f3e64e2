package kernels_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// Tolerance of the fast (archsimd) matrix paths against kernels/ref.
//
// Float weights (F32/F16/BF16): the fast paths decode weights exactly and only
// reassociate the float32 sum (vector lanes, FMA). Both the sequential ref sum
// and ours are within a few ulps·√cols of Σ|w_j x_j| for non-adversarial
// data, so we allow
//
//	|got − want| ≤ fpTol·√cols·Σ_j |w_j·x_j|,   fpTol = 2^-20 (16 ulps of 1).
//
// Int8-activation paths (Q8_0/Q4_0): x is first quantized per 32-block b to
// q_j with d_b = amax_b/127 and |x_j − d_b q_j| ≤ d_b/2 (round to nearest;
// the float64 reciprocal adds a relative error far below 2^-24), and the
// products use d'_b, d_b rounded to binary16 as llama.cpp stores it, so
// |x_j − d'_b q_j| ≤ d_b/2 + 127·|d_b − d'_b| (at most amax_b·2^-11 more
// where d'_b is a normal binary16). The integer block sums are exact and
// the weights W_j = dW·qW_j are exact in both, so the only extra error is
// Σ_j |W_j|·|x_j − d'_b q_j|:
//
//	|got − want| ≤ Σ_j |W_j|·(amax_b(j)/254 + 127·|d_b − d'_b|)·(1+2^-20) + fpTol·√cols·Σ_j|W_j·x_j|
//
// (the second term also covers the rounding of dW·dX and of the per-block
// products). Relative to the output's scale that is ~1/254 of a block's
// largest activation per unit of |W|: llama.cpp's accuracy for q8_0 dots.
//
// Special values: a NaN anywhere in a row's terms (NaN input, or Inf·0)
// forces got = NaN; any other non-finite term forces got non-finite (the
// quantized paths report NaN where ref may give ±Inf). Sums whose terms
// reach 1e37 are not compared: float32 overflow there depends on order.
const fpTol = 1.0 / (1 << 20)

// requireMatClose checks got against want = ref.MatMul(w, x, n) within the
// tolerance above, for dst laid out (n, w.Rows).
func requireMatClose(t *testing.T, what string, w kernels.Weight, x []float32, n int, want, got []float32) {
	t.Helper()
	rows, cols := w.Rows, w.Cols
	rb, err := w.DType.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	quant := w.DType == tensor.Q8_0 || w.DType == tensor.Q4_0
	row := make([]float32, cols)
	for r := 0; r < rows; r++ {
		raw := w.Data[r*int(rb) : (r+1)*int(rb)]
		tensor.DequantizeRow(row, raw, w.DType, cols)
		for i := 0; i < n; i++ {
			xs := x[i*cols : (i+1)*cols]
			g, wv := float64(got[i*rows+r]), float64(want[i*rows+r])
			if !withinTol(row, xs, raw, w.DType, quant, g, wv) {
				t.Fatalf("%s: dst[%d] (row %d, input %d) = %v, ref %v: outside tolerance %v",
					what, i*rows+r, r, i, g, wv, bound(row, xs, quant))
			}
		}
	}
}

// bound is the tolerance for one output (for messages).
func bound(w, x []float32, quant bool) float64 {
	var abs, qerr float64
	for b := 0; b*32 < len(x) || b == 0 && len(x) > 0; b++ {
		lo, hi := b*32, min(len(x), (b+1)*32)
		var amax float64
		for _, v := range x[lo:hi] {
			amax = max(amax, math.Abs(float64(v)))
		}
		d := float32(amax / 127)
		dh := float64(d)
		if d <= 65504 { // the scales kernels/actq8.go rounds
			dh = float64(tensor.F16ToF32(tensor.F32ToF16(d)))
		}
		e := amax/254 + 127*math.Abs(float64(d)-dh)
		for j := lo; j < hi; j++ {
			abs += math.Abs(float64(w[j]) * float64(x[j]))
			qerr += math.Abs(float64(w[j])) * e * (1 + fpTol)
		}
	}
	tol := fpTol * math.Sqrt(float64(len(x))) * abs
	if quant {
		tol += qerr
	}
	return tol
}

func withinTol(w, x []float32, raw []byte, dt tensor.DType, quant bool, got, want float64) bool {
	if got == want || (math.IsNaN(got) && math.IsNaN(want)) {
		return true
	}
	nan, inf := false, false
	var abs float64
	for j := range x {
		p := float64(w[j]) * float64(x[j])
		switch {
		case math.IsNaN(p):
			nan = true
		case math.IsInf(p, 0):
			inf = true
		}
		abs += math.Abs(p)
	}
	switch {
	case nan:
		return math.IsNaN(got)
	case inf:
		return math.IsNaN(got) || math.IsInf(got, 0)
	case abs >= 1e37:
		return true
	}
	if quant && scaleOverflows(raw, dt, x) {
		return true // dW·dX overflows float32 although every term is finite
	}
	return math.Abs(got-want) <= bound(w, x, quant)
}

// scaleOverflows reports whether some block's dW·amax_b/127 is beyond float32.
func scaleOverflows(raw []byte, dt tensor.DType, x []float32) bool {
	bl := dt.BlockBytes()
	for b := 0; b*32 < len(x); b++ {
		dw := math.Abs(float64(tensor.F16ToF32(binary.LittleEndian.Uint16(raw[b*bl:]))))
		var amax float64
		for _, v := range x[b*32 : (b+1)*32] {
			amax = max(amax, math.Abs(float64(v)))
		}
		if dw*amax/127 > 1e37 {
			return true
		}
	}
	return false
}

// requireMatRef checks a MatMul result against ref: bit for bit on the
// generic kernels, within the tolerance above on a fast path.
func requireMatRef(t *testing.T, what string, w kernels.Weight, x []float32, n int, want, got []float32) {
	t.Helper()
	if kernels.Impl() == "generic" {
		requireSame(t, what, want, got)
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	requireMatClose(t, fmt.Sprintf("%s (%s)", what, kernels.Impl()), w, x, n, want, got)
}

// requireAttnRef checks an Attention result against ref.Attention: bit for
// bit on the generic kernels; on a fast path, per head and output element t,
//
//	|got − want| ≤ (4Δ + fpTol·√m)·max_j |v_j[t]| ,  Δ = fpTol·(√d·max_j Scale·Σ|q·k_j| + 1)
//
// where j runs over the m visible slots: Δ bounds the error of each score
// (the dot's reassociation), a score error δ changes each softmax weight by a
// factor within e^{±2δ}, and the value sum adds fpTol·√m relative error. Heads
// whose visible inputs hold ±Inf or magnitudes ≥ 1e30 are not compared (where
// float32 overflows depends on operation order); NaN must match NaN.
func requireAttnRef(t *testing.T, what string, q []float32, rows int, kv kernels.KV, m *kernels.Mask, s kernels.AttnShape, want, got []float32) {
	t.Helper()
	if kernels.AttentionExact() {
		requireSame(t, what, want, got)
		return
	}
	d, group := s.HeadDim, s.Heads/s.KVHeads
	qDim, kvDim := s.Heads*d, s.KVHeads*d
	slot := func(pages [][]float32, j, off int) []float32 {
		p := pages[j/kv.PageTokens]
		return p[(j%kv.PageTokens)*kvDim+off : (j%kv.PageTokens)*kvDim+off+d]
	}
	wild := func(vs ...[]float32) bool {
		for _, v := range vs {
			for _, f := range v {
				if math.IsInf(float64(f), 0) || math.Abs(float64(f)) >= 1e30 {
					return true
				}
			}
		}
		return false
	}
	for i := 0; i < rows; i++ {
		for h := 0; h < s.Heads; h++ {
			qh := q[i*qDim+h*d : (i*qDim)+(h+1)*d]
			off := (h / group) * d
			skip := wild(qh)
			var maxS float64
			vmax := make([]float64, d)
			vis := 0
			for j := 0; j < kv.Len && !skip; j++ {
				if m != nil && !m.Visible(i, int32(j)) {
					continue
				}
				k, v := slot(kv.K, j, off), slot(kv.V, j, off)
				if wild(k, v) {
					skip = true
					break
				}
				vis++
				var sum float64
				for tt := range k {
					sum += math.Abs(float64(qh[tt]) * float64(k[tt]))
				}
				maxS = max(maxS, sum*math.Abs(float64(s.Scale)))
				for tt, vv := range v {
					vmax[tt] = max(vmax[tt], math.Abs(float64(vv)))
				}
			}
			if skip {
				continue
			}
			delta := fpTol * (math.Sqrt(float64(d))*maxS + 1)
			for tt := 0; tt < d; tt++ {
				e := i*qDim + h*d + tt
				g, w := float64(got[e]), float64(want[e])
				if math.IsNaN(g) || math.IsNaN(w) {
					if math.IsNaN(g) != math.IsNaN(w) {
						t.Fatalf("%s: element %d (row %d head %d) = %v, ref %v", what, e, i, h, g, w)
					}
					continue
				}
				tol := (4*delta + fpTol*math.Sqrt(float64(vis)+1)) * vmax[tt]
				if math.Abs(g-w) > tol {
					t.Fatalf("%s (%s): element %d (row %d head %d) = %v, ref %v: outside tolerance %v",
						what, kernels.Impl(), e, i, h, g, w, tol)
				}
			}
		}
	}
}
