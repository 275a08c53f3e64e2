//go:build amd64 && !purego

package kernels

// attentionAVX2 is attentionGeneric with its two inner loops in AVX2 + FMA
// assembly (attention_avx2_amd64.s), for head dims that are a multiple of
// 8; it is installed by the avx2 and avx512 sets of the default build (a
// GOEXPERIMENT=simd build keeps its archsimd attention). Per item (query
// row, head) the operations and their order are fixed by the head dim and
// the visible slots alone:
//
//	score_j = hsum8(8-lane FMA chain of q·k_j) · Scale   (visible j ascending)
//	softmaxAsm(scores)                                   (softmax_amd64.go)
//	out[t] = fma(a_j, v_j[t], out[t])                    (visible j ascending, out from 0)
//
// so an item does not depend on the other rows, on how many slots one
// assembly call covers (a run of visible slots within a page: scored eight,
// four or one at a time, each slot with its own chain and the same sums) or
// on the thread split. Against ref
// only the dot's reassociation, the fused multiply-adds and the softmax's
// float32 exp differ, within requireAttnRef's tolerance. The 110m model at
// 450 tokens of context spent 54% of a one-thread avx2 run in the generic
// attention, most of it in the scalar dot products.
func attentionAVX2(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	d := s.HeadDim
	if d <= 0 || d%8 != 0 {
		attentionGeneric(dst, q, kv, mask, s, scratch, lo, hi)
		return
	}
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	stride := uintptr(kvDim) * 4
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		clear(out)
		n := 0
		// Runs of visible slots within one page: start slot (j0), length.
		for j := jlo; j < jhi; {
			if tree && !mask.Visible(i, int32(j)) {
				j++
				continue
			}
			pg, slot := j/pt, j%pt
			m := 1
			for j+m < jhi && slot+m < pt && (!tree || mask.Visible(i, int32(j+m))) {
				m++
			}
			page := kv.K[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			_ = scratch[n+m-1]
			attnDotsAVX2(&scratch[n], &qh[0], &page[slot*kvDim+off], stride, m, d, s.Scale)
			n += m
			j += m
		}
		if n == 0 {
			continue
		}
		softmaxAsm(scratch[:n])
		n = 0
		for j := jlo; j < jhi; {
			if tree && !mask.Visible(i, int32(j)) {
				j++
				continue
			}
			pg, slot := j/pt, j%pt
			m := 1
			for j+m < jhi && slot+m < pt && (!tree || mask.Visible(i, int32(j+m))) {
				m++
			}
			page := kv.V[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			attnAxpyAVX2(&out[0], &scratch[n], &page[slot*kvDim+off], stride, m, d)
			n += m
			j += m
		}
	}
}

//go:noescape
func attnDotsAVX2(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)

//go:noescape
func attnAxpyAVX2(out *float32, a *float32, v *float32, vstride uintptr, n, d int)

// attnSelector installs attentionAVX2 in the default build; a
// GOEXPERIMENT=simd build leaves attention to its archsimd selector.
func init() {
	if archsimdBuild {
		return
	}
	addSelector(func(c isaLevel) {
		attentionImpl = attentionGeneric
		if c >= isaAVX2 && cpuAVX2 {
			attentionImpl = attentionAVX2
		}
	})
}
