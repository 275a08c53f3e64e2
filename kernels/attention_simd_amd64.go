//go:build goexperiment.simd && amd64 && !purego

package kernels

import "simd/archsimd"

// The archsimd attention is attentionGeneric with its two inner loops
// vectorized: the q·k dot products (the matrix kernels' dot, one accumulator,
// fixed lane-sum order) and the weighted sum of values, out += a·v, as FMA
// over the head dimension (still slot by slot in ascending order, so each
// out[t] is reduced in the same order as ref, only with fused roundings).
// The softmax is softmaxSIMD (a polynomial exp, see expF32x16). A (row, head)
// item's result depends only on its own q, mask row and the KV, never on the
// other items of the call or on which thread runs it.

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

func attentionSIMD(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	width := vecWidth(d)
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		n := 0
		pg, slot := jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				scratch[n] = dotF32SIMD(width, qh, kv.K[pg][slot*kvDim+off:slot*kvDim+off+d]) * s.Scale
				n++
			}
			if slot++; slot == pt {
				pg, slot = pg+1, 0
			}
		}
		clear(out)
		if n == 0 {
			continue
		}
		att := scratch[:n]
		softmaxSIMD(att)
		n = 0
		pg, slot = jlo/pt, jlo%pt
		for j := jlo; j < jhi; j++ {
			if !tree || mask.Visible(i, int32(j)) {
				axpyF32SIMD(width, out, att[n], kv.V[pg][slot*kvDim+off:slot*kvDim+off+d])
				n++
			}
			if slot++; slot == pt {
				pg, slot = pg+1, 0
			}
		}
	}
}
