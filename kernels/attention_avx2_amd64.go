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
	per := max(kv.Len, 0)
	// Below 32 columns one item's weighted sum of V is one to three chains of
	// dependent fused multiply-adds, one per slot: latency-bound. The heads
	// of one query row see the same slots, so four of them (items it…it+3)
	// go through attnAxpy4AVX2 side by side, each item's sum unchanged.
	four := d < 32 && len(scratch) >= attnScoreBufs*per
	for it := lo; it < hi; {
		i, h := it/s.Heads, it%s.Heads
		k := 1
		if four && hi-it >= 4 && s.Heads-h >= 4 {
			k = 4
		}
		jlo, jhi, tree := visibleRange(kv, mask, i)
		n := 0
		for u := range k {
			qh := q[(it+u)*d : (it+u+1)*d]
			clear(dst[(it+u)*d : (it+u+1)*d])
			sc := scratch[u*per:]
			off := ((h + u) / group) * d
			n = 0
			// Runs of visible slots within one page: start slot (j0), length.
			for j := jlo; j < jhi; {
				if tree && !mask.Visible(i, int32(j)) {
					j++
					continue
				}
				pg, slot := j/pt, j%pt
				m := attnRun(mask, tree, i, j, jhi, slot, pt)
				page := kv.K[pg]
				_ = page[(slot+m-1)*kvDim+off+d-1]
				_ = sc[n+m-1]
				attnDotsAVX2(&sc[n], &qh[0], &page[slot*kvDim+off], stride, m, d, s.Scale)
				n += m
				j += m
			}
			if n > 0 {
				softmaxAsm(sc[:n])
			}
		}
		if n == 0 {
			it += k
			continue
		}
		n = 0
		for j := jlo; j < jhi; {
			if tree && !mask.Visible(i, int32(j)) {
				j++
				continue
			}
			pg, slot := j/pt, j%pt
			m := attnRun(mask, tree, i, j, jhi, slot, pt)
			page := kv.V[pg]
			row := slot * kvDim
			_ = page[(slot+m-1)*kvDim+kvDim-1]
			if k == 4 {
				_ = scratch[3*per+n+m-1]
				_ = dst[(it+4)*d-1]
				o0, o1, o2, o3 := row+(h/group)*d, row+((h+1)/group)*d, row+((h+2)/group)*d, row+((h+3)/group)*d
				for c := 0; c < d; c += 8 {
					attnAxpy4AVX2(&dst[it*d+c], uintptr(d)*4, &scratch[n], uintptr(per)*4,
						&page[o0+c], &page[o1+c], &page[o2+c], &page[o3+c], stride, m)
				}
			} else {
				attnAxpyAVX2(&dst[it*d], &scratch[n], &page[row+(h/group)*d], stride, m, d)
			}
			n += m
			j += m
		}
		it += k
	}
}

// attnRun is the length of the run of visible slots from j (visible, at
// slot of its page): up to jhi and the page's end, and with a tree mask up
// to the next slot row i does not see.
func attnRun(mask *Mask, tree bool, i, j, jhi, slot, pt int) int {
	m := min(jhi-j, pt-slot)
	if tree {
		for k := 1; k < m; k++ {
			if !mask.Visible(i, int32(j+k)) {
				return k
			}
		}
	}
	return m
}

//go:noescape
func attnDotsAVX2(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)

//go:noescape
func attnAxpyAVX2(out *float32, a *float32, v *float32, vstride uintptr, n, d int)

//go:noescape
func attnAxpy4AVX2(out *float32, ostride uintptr, a *float32, astride uintptr, v0, v1, v2, v3 *float32, vstride uintptr, n int)

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
