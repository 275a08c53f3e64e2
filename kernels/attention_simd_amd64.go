//go:build goexperiment.simd && amd64 && !purego

package kernels

import "simd/archsimd"

// The archsimd attention is attentionGeneric with its two inner loops
// vectorized: the q·k dot products (the matrix kernels' dot, one accumulator,
// fixed lane-sum order) and the weighted sum of values, out += a·v, as FMA
// over the head dimension (still slot by slot in ascending order, so each
// out[t] is reduced in the same order as ref, only with fused roundings).
// Softmax stays generic. A row's result depends only on its own q, mask row
// and the KV, never on the other rows of the call.

func init() {
	if archsimd.X86.AVX2() && archsimd.X86.FMA() {
		attentionImpl = attentionSIMD
	}
}

// vecWidth is the float32 lanes of the dot/axpy used for a head dimension d:
// 16 on AVX-512, else 8, for d ≥ 32; 1 (scalar) below: a call plus a lane
// reduction per slot costs more than it saves on tiny heads (measured 1.4×
// slower on stories260K's d=8).
func vecWidth(d int) int {
	switch {
	case d < 32:
		return 1
	case implName == "avx512":
		return 16
	}
	return 8
}

func dotF32SIMD(width int, a, b []float32) float32 {
	switch width {
	case 16:
		return dotF32x16(a, b)
	case 8:
		return dotF32x8(a, b)
	}
	return dotGeneric(a, b)
}

// axpyF32SIMD is: for t, v := range x { y[t] += a * v } (fused multiply-add
// for width > 1).
func axpyF32SIMD(width int, y []float32, a float32, x []float32) {
	y = y[:len(x)]
	j := 0
	if width == 1 {
		for t, v := range x {
			y[t] += float32(a * v)
		}
		return
	}
	if width == 16 {
		av := archsimd.BroadcastFloat32x16(a)
		for ; j+16 <= len(x); j += 16 {
			av.MulAdd(archsimd.LoadFloat32x16Slice(x[j:j+16]), archsimd.LoadFloat32x16Slice(y[j:j+16])).StoreSlice(y[j : j+16])
		}
		if j < len(x) {
			storePart16(av.MulAdd(loadPart16(x[j:]), loadPart16(y[j:])), y[j:])
		}
		return
	}
	av := archsimd.BroadcastFloat32x8(a)
	for ; j+8 <= len(x); j += 8 {
		av.MulAdd(archsimd.LoadFloat32x8Slice(x[j:j+8]), archsimd.LoadFloat32x8Slice(y[j:j+8])).StoreSlice(y[j : j+8])
	}
	if j < len(x) {
		storePart8(av.MulAdd(loadPart8(x[j:]), loadPart8(y[j:])), y[j:])
	}
}

func attentionSIMD(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	qDim := s.Heads * d
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	width := vecWidth(d)
	for i := 0; i < rows; i++ {
		lo, hi := 0, kv.Len
		tree := false
		if mask != nil {
			lo = max(lo, int(mask.Lo[i]))
			hi = min(hi, int(mask.Hi[i]))
			tree = mask.Tree != nil
		}
		for h := 0; h < s.Heads; h++ {
			qh := q[i*qDim+h*d : i*qDim+(h+1)*d]
			out := dst[i*qDim+h*d : i*qDim+(h+1)*d]
			off := (h / group) * d
			n := 0
			for j := lo; j < hi; j++ {
				if tree && !mask.Visible(i, int32(j)) {
					continue
				}
				k := kv.K[j/pt][(j%pt)*kvDim+off : (j%pt)*kvDim+off+d]
				scratch[n] = dotF32SIMD(width, qh, k) * s.Scale
				n++
			}
			clear(out)
			if n == 0 {
				continue
			}
			att := scratch[:n]
			softmaxGeneric(att)
			n = 0
			for j := lo; j < hi; j++ {
				if tree && !mask.Visible(i, int32(j)) {
					continue
				}
				a := att[n]
				n++
				axpyF32SIMD(width, out, a, kv.V[j/pt][(j%pt)*kvDim+off:(j%pt)*kvDim+off+d])
			}
		}
	}
}
