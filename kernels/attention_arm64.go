//go:build arm64 && !purego

package kernels

import "unsafe"

// attentionNEON is attentionGeneric with its two inner loops in NEON
// assembly (attention_arm64.s), for head dims that are a multiple of 8
// (others take the generic kernel). Per item (query row, head) the
// operations and their order are fixed by the head dim and the visible
// slots alone:
//
//	score_j = ((A+B)[0]+(A+B)[1]) + ((A+B)[2]+(A+B)[3]) · Scale   (two 4-lane FMA chains of q·k_j)
//	softmaxGeneric(scores)                                        (the same as ref)
//	out[t] = fma(a_j, v_j[t], out[t])                             (visible j ascending, out from 0)
//
// so an item does not depend on the other rows, on how many slots one
// assembly call covers (a run of visible slots within a page) or on the
// thread split. Against ref only the dot's reassociation and the fused
// multiply-adds differ, within requireAttnRef's tolerance.
func attentionNEON(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	if s.HeadDim <= 0 || s.HeadDim%8 != 0 {
		attentionGeneric(dst, q, kv, mask, s, scratch, lo, hi)
		return
	}
	attnPagesNEON(dst, q, kv, kv.K, kv.V, attnDotsNEON, attnAxpyNEON, mask, s, scratch, lo, hi)
}

// attentionF16NEON is attentionNEON over a KV of binary16 pages (KV.K16,
// KV.V16): the same runs, chains and order, with every K and V element
// widened exactly by FCVTL as it is loaded, so over f16-exact values it
// gives attentionNEON's bits over the widened float32 pages and reads half
// the bytes. Head dims that are not a multiple of 8 take attentionGeneric.
func attentionF16NEON(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	if s.HeadDim <= 0 || s.HeadDim%8 != 0 || !kv.F16() {
		attentionGeneric(dst, q, kv, mask, s, scratch, lo, hi)
		return
	}
	attnPagesNEON(dst, q, kv, kv.K16, kv.V16, attnDotsF16NEON, attnAxpyF16NEON, mask, s, scratch, lo, hi)
}

// attnPagesNEON runs items [lo,hi) over the K and V pages kp, vp (float32
// or binary16 elements) with the matching dot and axpy routines.
func attnPagesNEON[E float32 | uint16](dst, q []float32, kv KV, kp, vp [][]E,
	dots func(sc, q *float32, k *E, kstride uintptr, n, d int, scale float32),
	axpy func(out, a *float32, v *E, vstride uintptr, n, d int),
	mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	var e E
	stride := uintptr(kvDim) * unsafe.Sizeof(e)
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		clear(out)
		n := 0
		// Runs of visible slots within one page: start slot j, length m.
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
			page := kp[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			_ = scratch[n+m-1]
			dots(&scratch[n], &qh[0], &page[slot*kvDim+off], stride, m, d, s.Scale)
			n += m
			j += m
		}
		if n == 0 {
			continue
		}
		softmaxGeneric(scratch[:n])
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
			page := vp[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			axpy(&out[0], &scratch[n], &page[slot*kvDim+off], stride, m, d)
			n += m
			j += m
		}
	}
}

//go:noescape
func attnDotsNEON(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)

//go:noescape
func attnAxpyNEON(out *float32, a *float32, v *float32, vstride uintptr, n, d int)

//go:noescape
func attnDotsF16NEON(sc *float32, q *float32, k *uint16, kstride uintptr, n, d int, scale float32)

//go:noescape
func attnAxpyF16NEON(out *float32, a *float32, v *uint16, vstride uintptr, n, d int)
