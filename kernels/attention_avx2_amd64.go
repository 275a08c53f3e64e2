//go:build amd64 && !purego

package kernels

import "math/bits"

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
			for j := jlo; ; {
				j0, m := visibleRun(mask, tree, i, j, jhi, pt)
				if m == 0 {
					break
				}
				pg, slot := j0/pt, j0%pt
				page := kv.K[pg]
				_ = page[(slot+m-1)*kvDim+off+d-1]
				_ = sc[n+m-1]
				attnDotsAVX2(&sc[n], &qh[0], &page[slot*kvDim+off], stride, m, d, s.Scale)
				n += m
				j = j0 + m
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
		for j := jlo; ; {
			j0, m := visibleRun(mask, tree, i, j, jhi, pt)
			if m == 0 {
				break
			}
			pg, slot := j0/pt, j0%pt
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
			j = j0 + m
		}
		it += k
	}
}

// visibleRun finds the first slot j0 ≥ j below hi that row i of mask sees
// and the length m of the run of visible slots from it that stays within
// one page of pt slots (m = 0: none left). Below the row's TreeBase every
// slot in [Lo, Hi) is visible; above it the tree's bit words are scanned a
// word at a time, not slot by slot (a SpecExec verification pass over a
// 64-node tree asked Mask.Visible per slot, per head, twice: a seventh of
// the run).
func visibleRun(mask *Mask, tree bool, i, j, hi, pt int) (j0, m int) {
	if j >= hi {
		return j, 0
	}
	end := min(hi, (j/pt+1)*pt)
	if !tree {
		return j, end - j
	}
	base := int(mask.TreeBase[i])
	if j < base {
		return j, min(end, base) - j
	}
	words := mask.Tree[i]
	// Skip to the next set bit.
	k := j - base
	for {
		w := k / 64
		if w >= len(words) {
			return hi, 0
		}
		if b := words[w] >> (uint(k) % 64); b != 0 {
			k += bits.TrailingZeros64(b)
			break
		}
		k = (w + 1) * 64
	}
	j0 = base + k
	if j0 >= hi {
		return hi, 0
	}
	end = min(hi, (j0/pt+1)*pt)
	// Count the set bits from k on, up to the page's (or range's) end.
	for m = 0; j0+m < end; {
		kk := k + m
		w := kk / 64
		if w >= len(words) {
			break
		}
		ones := bits.TrailingZeros64(^(words[w] >> (uint(kk) % 64)))
		if rem := 64 - kk%64; ones > rem {
			ones = rem
		}
		m += ones
		if ones < 64-kk%64 {
			break // a clear bit ends the run
		}
	}
	return j0, min(m, end-j0)
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
