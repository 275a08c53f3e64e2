//go:build amd64 && !purego

package kernels

// attentionF16AVX2 is attentionAVX2 over a KV of binary16 pages (KV.K16,
// KV.V16): the same visible runs, the same 8-lane FMA chains, hsum8 and
// softmaxAsm, the same value FMAs in the same order, with every K and V
// element widened exactly by VCVTPH2PS as it is loaded
// (attention_f16_avx2_amd64.s). So for a KV whose values are binary16 it
// gives the bits attentionAVX2 gives over the widened float32 pages, and
// reads half the bytes. It is installed by the avx2 and avx512 sets of
// every non-purego build, GOEXPERIMENT=simd included (the archsimd
// attention reads float32 pages only). Head dims that are not a multiple
// of 8 take attentionGeneric.
func attentionF16AVX2(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	d := s.HeadDim
	if d <= 0 || d%8 != 0 || !kv.F16() {
		attentionGeneric(dst, q, kv, mask, s, scratch, lo, hi)
		return
	}
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	stride := uintptr(kvDim) * 2
	for it := lo; it < hi; it++ {
		i, h := it/s.Heads, it%s.Heads
		jlo, jhi, tree := visibleRange(kv, mask, i)
		qh := q[it*d : (it+1)*d]
		out := dst[it*d : (it+1)*d]
		off := (h / group) * d
		clear(out)
		n := 0
		for j := jlo; ; {
			j0, m := visibleRun(mask, tree, i, j, jhi, pt)
			if m == 0 {
				break
			}
			pg, slot := j0/pt, j0%pt
			page := kv.K16[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			_ = scratch[n+m-1]
			attnDotsF16AVX2(&scratch[n], &qh[0], &page[slot*kvDim+off], stride, m, d, s.Scale)
			n += m
			j = j0 + m
		}
		if n == 0 {
			continue
		}
		softmaxAsm(scratch[:n])
		n = 0
		for j := jlo; ; {
			j0, m := visibleRun(mask, tree, i, j, jhi, pt)
			if m == 0 {
				break
			}
			pg, slot := j0/pt, j0%pt
			page := kv.V16[pg]
			_ = page[(slot+m-1)*kvDim+off+d-1]
			attnAxpyF16AVX2(&out[0], &scratch[n], &page[slot*kvDim+off], stride, m, d)
			n += m
			j = j0 + m
		}
	}
}

//go:noescape
func attnDotsF16AVX2(sc *float32, q *float32, k *uint16, kstride uintptr, n, d int, scale float32)

//go:noescape
func attnAxpyF16AVX2(out *float32, a *float32, v *uint16, vstride uintptr, n, d int)

//go:noescape
func cvtPS2PHF16C(dst *uint16, src *float32, n int)

func init() {
	addSelector(func(c isaLevel) {
		attentionF16Impl = attentionGeneric
		if c >= isaAVX2 && cpuAVX2 {
			attentionF16Impl = attentionF16AVX2
		}
	})
}
