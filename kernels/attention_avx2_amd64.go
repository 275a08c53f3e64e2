//go:build amd64 && !purego

package kernels

import (
	"math/bits"
	"unsafe"
)

// attentionAVX2 is attentionGeneric with its two inner loops in AVX2 + FMA
// assembly (attention_avx2_amd64.s), for head dims that are a multiple of
// 8, over float32 pages or binary16 ones (KV.K16, + F16C: each element
// widened exactly by VCVTPH2PS as it is loaded, so over a KV whose values
// are binary16 it gives the float32 kernel's bits and reads half the
// bytes). It is installed by the avx2 and avx512 sets of the default build
// (a GOEXPERIMENT=simd build keeps its archsimd attention for float32
// pages). Per item (query row, head) the operations and their order are
// fixed by the head dim and the visible slots alone:
//
//	score_j = hsum8(8-lane FMA chain of q·k_j) · Scale   (visible j ascending)
//	softmaxAsm(scores)                                   (softmax_amd64.go)
//	out[t] = fma(a_j, v_j[t], out[t])                    (visible j ascending, out from 0)
//
// so an item does not depend on the other rows, on how many slots or heads
// one assembly call covers, or on the thread split. Against ref only the
// dot's reassociation, the fused multiply-adds and the softmax's float32
// exp differ, within requireAttnRef's tolerance.
//
// The kernels take all the heads of one query row at once (as many as
// scratch holds score buffers for: AttentionScratch gives attnScoreBufs),
// slot-major: a block of eight K rows (four V rows) goes through every
// head before the next block, so each KV row is read front to back, once,
// in one pass. A decode step of many sequences reads every sequence's K
// and V from memory (at 32 sequences of 48 slots on the 110m model, 113 MB
// a step, more than the weights' compute time can hide); reading them
// head by head, 256 bytes of each 3 KB row at a time, left the hardware
// prefetchers little to follow (BenchmarkAttentionDecodeBatch 32 × 48:
// 14.5 ms a step per head, 10.2 ms by row). Small head dims gain too: one
// call per run of slots for all the heads instead of one per head. For
// KV rows of attnPrefetchRow bytes or more the kernels also prefetch the
// next block of rows of a run into L1 while the current one computes.
// attnRowsAVX2 runs the items [lo, hi) through the row kernels: per query
// row, the heads of [lo, hi) in that row that scratch has room for (one
// score buffer of kv.Len floats each), one assembly call per run of
// visible slots within a page for all those heads' scores, a softmax per
// head, one call per run for all their weighted values. E is the page
// element (float32, or uint16 for binary16 pages).
func attnRowsAVX2[E float32 | uint16](dst, q []float32, kp, vp [][]E, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int,
	dots func(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32),
	axpy func(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)) {
	d := s.HeadDim
	group := s.Heads / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	var e E
	stride := uintptr(kvDim) * unsafe.Sizeof(e)
	// One score buffer per head, 64-byte strides when scratch allows (the
	// softmax's 16-lane loads and stores then stay within cache lines).
	per := max(kv.Len, 1)
	if p16 := (per + 15) &^ 15; len(scratch) >= p16 {
		per = p16
	}
	room := max(1, len(scratch)/per) // heads whose scores fit at once
	scStride := uintptr(per) * 4
	pf := 0
	if stride >= attnPrefetchRow {
		pf = 1
	}
	for it := lo; it < hi; {
		i, h0 := it/s.Heads, it%s.Heads
		// Whole rows, several at a time when scratch holds their scores:
		// each KV page then goes through all the block's rows while it is
		// in cache, where one row at a time streamed the whole KV from
		// memory for every row of a prefill.
		if nr := min(room/s.Heads, (hi-it)/s.Heads, attnRowBlock); h0 == 0 && nr >= 2 {
			if attnWide && !kv.F16() {
				attnRowBlockAVX512(dst, q, kv, mask, s, scratch, per, i, nr, stride, pf)
			} else {
				attnRowBlockAVX2(dst, q, kp, vp, kv, mask, s, scratch, per, i, nr, stride, pf, dots, axpy)
			}
			it += nr * s.Heads
			continue
		}
		nh := min(s.Heads-h0, hi-it, room)
		qrow := q[it*d : (it+nh)*d]
		out := dst[it*d : (it+nh)*d]
		clear(out)
		koff, phase := (h0/group)*d, h0%group
		kend := ((h0+nh-1)/group + 1) * d // past the last KV column read
		jlo, jhi, tree := visibleRange(kv, mask, i)
		n := 0
		for j := jlo; ; {
			j0, m := visibleRun(mask, tree, i, j, jhi, pt)
			if m == 0 {
				break
			}
			page := kp[j0/pt]
			row := (j0 % pt) * kvDim
			_ = page[row+(m-1)*kvDim+kend-1]
			_ = scratch[(nh-1)*per+n+m-1]
			dots(&scratch[n], scStride, &qrow[0], unsafe.Pointer(&page[row+koff]), stride, m, d, nh, group, phase, pf, s.Scale)
			n += m
			j = j0 + m
		}
		if n > 0 {
			for u := range nh {
				softmaxAsm(scratch[u*per : u*per+n])
			}
			n = 0
			for j := jlo; ; {
				j0, m := visibleRun(mask, tree, i, j, jhi, pt)
				if m == 0 {
					break
				}
				page := vp[j0/pt]
				row := (j0 % pt) * kvDim
				_ = page[row+(m-1)*kvDim+kend-1]
				axpy(&out[0], &scratch[n], scStride, unsafe.Pointer(&page[row+koff]), stride, m, d, nh, group, phase, pf)
				n += m
				j = j0 + m
			}
		}
		it += nh
	}
}

// attnRowBlockAVX2 is attnRowsAVX2 for the nr whole rows i…i+nr−1 (all
// heads), page-major: for each KV page, every row's runs of visible slots in
// it (each row's in ascending order, as alone), so a page is read from
// memory once for the block rather than once per row. Every item gets the
// same calls over the same runs as attnRowsAVX2 gives it, in the same
// order, so the same bits. Row r's head u scores at scratch[(r·Heads+u)·per:].
func attnRowBlockAVX2[E float32 | uint16](dst, q []float32, kp, vp [][]E, kv KV, mask *Mask, s AttnShape, scratch []float32, per, i, nr int, stride uintptr, pf int,
	dots func(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32),
	axpy func(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)) {
	d, nh := s.HeadDim, s.Heads
	group := nh / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	scStride := uintptr(per) * 4
	var rs [attnRowBlock]attnBlockRow
	plo, phi := attnBlockRows(&rs, dst, kv, mask, i, nr, nh*d)
	_ = scratch[(nr*nh-1)*per+per-1]
	for _, values := range [2]bool{false, true} {
		// The scores, page by page; a softmax per item; the values, page
		// by page.
		if values {
			for r := range nr {
				if n := rs[r].n; n > 0 {
					for u := range nh {
						b := (r*nh + u) * per
						softmaxAsm(scratch[b : b+n])
					}
				}
			}
		}
		var next, n [attnRowBlock]int
		for r := range nr {
			next[r] = rs[r].lo
		}
		for pg := plo; pg < phi; pg++ {
			end := (pg + 1) * pt
			for r := range nr {
				for next[r] < min(end, rs[r].hi) {
					j0, m := visibleRun(mask, rs[r].tree, i+r, next[r], rs[r].hi, pt)
					if m == 0 {
						next[r] = rs[r].hi
						break
					}
					if j0 >= end { // the row's next run is in a later page
						break
					}
					row := (j0 % pt) * kvDim
					sc := &scratch[r*nh*per+n[r]]
					if values {
						page := vp[j0/pt]
						_ = page[row+m*kvDim-1]
						out := dst[(i+r)*nh*d : (i+r+1)*nh*d]
						axpy(&out[0], sc, scStride, unsafe.Pointer(&page[row]), stride, m, d, nh, group, 0, pf)
					} else {
						page := kp[j0/pt]
						_ = page[row+m*kvDim-1]
						qrow := q[(i+r)*nh*d : (i+r+1)*nh*d]
						dots(sc, scStride, &qrow[0], unsafe.Pointer(&page[row]), stride, m, d, nh, group, 0, pf, s.Scale)
					}
					n[r] += m
					next[r] = j0 + m
				}
			}
		}
		for r := range nr {
			rs[r].n = n[r]
		}
	}
}

func attentionAVX2(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	if d := s.HeadDim; d <= 0 || d%8 != 0 {
		attentionGeneric(dst, q, kv, mask, s, scratch, lo, hi)
		return
	}
	if kv.F16() {
		attnRowsAVX2(dst, q, kv.K16, kv.V16, kv, mask, s, scratch, lo, hi, attnDotsRowF16AVX2, attnAxpyRowF16AVX2)
		return
	}
	attnRowsAVX2(dst, q, kv.K, kv.V, kv, mask, s, scratch, lo, hi, attnDotsRowAVX2, attnAxpyRowAVX2)
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
func attnDotsRowAVX2(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32)

//go:noescape
func attnAxpyRowAVX2(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)

//go:noescape
func attnDotsRowF16AVX2(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32)

//go:noescape
func attnAxpyRowF16AVX2(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)

// attnPrefetchRow is the KV row size (bytes) from which the row kernels
// prefetch each block's successor: rows that large (a model with 256 KV
// columns or more) come from memory in a decode step of many sequences,
// while a small model's KV stays in cache, where the hints would only cost
// instructions. In the 110m model at 32 sequences (profiles alternating
// with and without, 7 pairs) attention took 1.80 against 1.97 s median;
// in a kernel benchmark with the KV in L2 the hints cost a few %.
const attnPrefetchRow = uintptr(1024)

// attnSelector installs attentionAVX2: for binary16 pages in every
// non-purego build, for float32 pages in the default build only (a
// GOEXPERIMENT=simd build leaves those to its archsimd selector).
func init() {
	addSelector(func(c isaLevel) {
		attentionF16Impl = attentionGeneric
		if !archsimdBuild {
			attentionImpl = attentionGeneric
		}
		if c >= isaAVX2 && cpuAVX2 {
			attentionF16Impl = attentionAVX2
			if !archsimdBuild {
				attentionImpl = attentionAVX2
			}
		}
	})
}

// attnBlockRow is one row of a row block: its visible KV range [lo,hi),
// whether a tree mask cuts it, and its count of visible slots (n, set once
// the scores are done).
type attnBlockRow struct {
	lo, hi, n int
	tree      bool
}

// attnBlockRows fills rs with rows i…i+nr−1's visible ranges, clears their
// outputs (width floats a row) and returns the pages [plo,phi) any of them
// sees: the set-up the AVX2 and AVX-512 row blocks share.
func attnBlockRows(rs *[attnRowBlock]attnBlockRow, dst []float32, kv KV, mask *Mask, i, nr, width int) (plo, phi int) {
	pt := kv.PageTokens
	plo, phi = kv.Len, 0
	for r := range nr {
		x := &rs[r]
		x.lo, x.hi, x.tree = visibleRange(kv, mask, i+r)
		if x.lo < x.hi {
			plo, phi = min(plo, x.lo/pt), max(phi, (x.hi-1)/pt+1)
		}
		clear(dst[(i+r)*width : (i+r+1)*width])
	}
	return plo, phi
}
