// Package ref is the slow, obviously-correct oracle for package kernels: the
// same functions (without a Pool), written as the plainest loops, allocating
// freely. The kernels' generic implementations must match it bit for bit, and
// model/ref (llama2.c run.c in Go) computes with it.
//
// Float recipe (shared with kernels, see its package doc): float32 sums in
// ascending index order; every product written float32(a*b) so the compiler
// cannot fuse it into an FMA; exp/sqrt/pow/sin/cos in float64 rounded once.
package ref

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// Dot returns Σ a[i]*b[i] accumulated in float32, i ascending.
func Dot(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("ref: Dot: len(a)=%d != len(b)=%d", len(a), len(b)))
	}
	var s float32
	for i := range a {
		s += float32(a[i] * b[i])
	}
	return s
}

// MatMul sets dst[i*w.Rows+r] = Dot(row r of w, x[i*w.Cols:(i+1)*w.Cols]) for
// i < n, decoding each row with tensor.DequantizeRow (llama2.c matmul).
//
//	// w: (Rows, Cols); x: (n, Cols); dst: (n, Rows)
func MatMul(dst []float32, w kernels.Weight, x []float32, n int) {
	if err := w.Validate(); err != nil {
		panic(err)
	}
	rb, _ := w.DType.RowBytes(w.Cols)
	row := make([]float32, w.Cols)
	for r := 0; r < w.Rows; r++ {
		tensor.DequantizeRow(row, w.Data[int64(r)*rb:int64(r+1)*rb], w.DType, w.Cols)
		for i := 0; i < n; i++ {
			dst[i*w.Rows+r] = Dot(row, x[i*w.Cols:(i+1)*w.Cols])
		}
	}
}

// MatVec is MatMul with n = 1.
func MatVec(dst []float32, w kernels.Weight, x []float32) { MatMul(dst, w, x, 1) }

// RMSNorm is llama2.c rmsnorm: dst[j] = weight[j] * (1/sqrt(Σx²/n + eps) * x[j]).
func RMSNorm(dst, x, weight []float32, eps float32) {
	var ss float32
	for j := range x {
		ss += float32(x[j] * x[j])
	}
	ss /= float32(len(x))
	ss += eps
	ss = 1 / float32(math.Sqrt(float64(ss)))
	for j := range x {
		dst[j] = weight[j] * (ss * x[j])
	}
}

// Softmax is llama2.c softmax, in place.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	maxVal := x[0]
	for i := 1; i < len(x); i++ {
		if x[i] > maxVal {
			maxVal = x[i]
		}
	}
	var sum float32
	for i := range x {
		x[i] = float32(math.Exp(float64(x[i] - maxVal)))
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}

// SiLU is x*sigmoid(x) in place, as llama2.c: v * (1/(1+exp(-v))).
func SiLU(x []float32) {
	for i := range x {
		x[i] = x[i] * (1 / (1 + float32(math.Exp(float64(-x[i])))))
	}
}

// SwiGLU sets dst[i] = silu(gate[i]) * up[i] for i < len(dst).
func SwiGLU(dst, gate, up []float32) {
	for i := range dst {
		g := gate[i] * (1 / (1 + float32(math.Exp(float64(-gate[i])))))
		dst[i] = g * up[i]
	}
}

// Add sets dst[i] += a[i] for i < len(dst).
func Add(dst, a []float32) {
	for i := range dst {
		dst[i] += a[i]
	}
}

// RoPE rotates one row of heads*headDim values in place (see kernels.RoPE for
// the pairing and the float recipe).
func RoPE(x []float32, pos int32, heads, headDim, ropeDim int, base float32, style kernels.RopeStyle) {
	if ropeDim%2 != 0 || ropeDim > headDim {
		panic(fmt.Sprintf("ref: RoPE: ropeDim=%d headDim=%d", ropeDim, headDim))
	}
	rope(x, pos, heads, headDim, ropeDim, base, nil, style)
}

// rope is RoPE and RoPEScaled: with factors, pair i's frequency is divided
// by factors[i/2].
func rope(x []float32, pos int32, heads, headDim, ropeDim int, base float32, factors []float32, style kernels.RopeStyle) {
	for h := 0; h < heads; h++ {
		head := x[h*headDim : (h+1)*headDim]
		for i := 0; i < ropeDim; i += 2 {
			freq := 1 / float32(math.Pow(float64(base), float64(float32(i)/float32(ropeDim))))
			if factors != nil {
				freq /= factors[i/2]
			}
			val := float32(pos) * freq
			fcr := float32(math.Cos(float64(val)))
			fci := float32(math.Sin(float64(val)))
			var a, b int
			switch style {
			case kernels.RopeAdjacent:
				a, b = i, i+1
			case kernels.RopeHalf:
				a, b = i/2, i/2+ropeDim/2
			default:
				panic(fmt.Sprintf("ref: RoPE: unknown style %d", style))
			}
			v0, v1 := head[a], head[b]
			head[a] = float32(v0*fcr) - float32(v1*fci)
			head[b] = float32(v0*fci) + float32(v1*fcr)
		}
	}
}

// Attention is kernels.Attention written as llama2.c's attention loop over
// every slot with an explicit visibility test (scores are multiplied by
// s.Scale; pass 1/sqrt(HeadDim) for llama2.c's division by sqrtf(head_size);
// a positive s.Softcap then caps them with Softcap before the softmax).
//
//	// q, dst: (rows, Heads*HeadDim); KV rows: (kv.Len, KVHeads*HeadDim)
//
// An F16 KV (kv.K16, kv.V16) is read widened, element by element.
func Attention(dst, q []float32, rows int, kv kernels.KV, mask *kernels.Mask, s kernels.AttnShape) {
	d := s.HeadDim
	kvMul := s.Heads / s.KVHeads
	for i := 0; i < rows; i++ {
		for h := 0; h < s.Heads; h++ {
			qh := q[(i*s.Heads+h)*d : (i*s.Heads+h+1)*d]
			kvh := h / kvMul
			var visible []int
			var att []float32
			for j := 0; j < kv.Len; j++ {
				if mask != nil && !mask.Visible(i, int32(j)) {
					continue
				}
				k := kvRow(kv.K, kv.K16, kv.PageTokens, s.KVHeads*d, j)[kvh*d : (kvh+1)*d]
				visible = append(visible, j)
				att = append(att, Dot(qh, k)*s.Scale)
			}
			if s.Softcap > 0 {
				Softcap(att, s.Softcap)
			}
			Softmax(att)
			out := dst[(i*s.Heads+h)*d : (i*s.Heads+h+1)*d]
			for t := range out {
				out[t] = 0
			}
			for n, j := range visible {
				v := kvRow(kv.V, kv.V16, kv.PageTokens, s.KVHeads*d, j)[kvh*d : (kvh+1)*d]
				for t := range out {
					out[t] += float32(att[n] * v[t])
				}
			}
		}
	}
}

// kvRow returns slot j's row (width floats) from paged storage: the float32
// pages, or, when halves is non-nil (an F16 KV), the binary16 row widened.
func kvRow(pages [][]float32, halves [][]uint16, pageTokens, width, j int) []float32 {
	if halves != nil {
		h := halves[j/pageTokens][(j%pageTokens)*width : (j%pageTokens+1)*width]
		row := make([]float32, width)
		for i, x := range h {
			row[i] = tensor.F16ToF32(x)
		}
		return row
	}
	page := pages[j/pageTokens]
	return page[(j%pageTokens)*width : (j%pageTokens+1)*width]
}

// CausalMask fills m for rows at KV slots slots[i]: Hi = slot+1, Lo = 0, or
// Lo = max(0, slot-window+1) when window > 0; Tree is cleared.
func CausalMask(m *kernels.Mask, slots []int32, window int) {
	m.Lo = make([]int32, len(slots))
	m.Hi = make([]int32, len(slots))
	m.Tree, m.TreeBase = nil, nil
	for i, s := range slots {
		m.Hi[i] = s + 1
		if window > 0 {
			m.Lo[i] = int32(max(0, int64(s)-int64(window)+1))
		}
	}
}
