//go:build amd64 && !purego

package kernels

import "unsafe"

// Prefill attention on AVX-512: the row blocks of attnRowBlockAVX2 (up to
// attnRowBlock query rows of a prompt going through each KV page together)
// with kernels that serve several of those rows per KV load. The scores
// take two rows at once, row a in a zmm's low 256 bits and row b in its
// high 256 (attnDots2AVX512): a K chunk broadcast to both halves meets both
// rows' q, so one 512-bit FMA does the work of two 256-bit ones, and each
// half is the AVX2 kernel's 8-lane chain for its own (row, slot), reduced
// by the same hsum8 tree (the shuffles differ, the additions do not). The
// weighted values take four rows at once (attnAxpy4AVX512): a V row's 64
// columns are loaded once into four zmm and added into all four rows'
// outputs, held in sixteen zmm across the run of slots instead of going
// through memory every four slots. Per output element that is still one
// fma(a_j, v_j[t], out[t]) per visible slot j, ascending, from zero.
//
// So every (row, head) item gets exactly the operations of attentionAVX2 in
// the same order, only grouped with other items differently: the same bits
// as a decode step over the same KV (the per-row path), whatever the
// chunking of a prompt or the rows it shares a pass with. Rows are paired
// (grouped by four) only over a run of slots that all of them see, starting
// at the same slot; the slots a row sees beyond the shared run (a causal
// block's later rows see a few more) go through the AVX2 row kernels, after
// the shared run, so each item's slots stay in ascending order.
//
// Only float32 pages take these kernels (binary16 pages would need a
// widening and an insert per K chunk); the scores need a head dim that is a
// multiple of 8, the values one that is a multiple of 64 (the 110m and 1b
// shapes have 64).

// attnWide enables the AVX-512 row-block kernels: set by the selector when
// the cap and the CPU allow AVX-512; tests switch it to compare.
var attnWide bool

func init() {
	addSelector(func(c isaLevel) {
		attnWide = c >= isaAVX512 && cpuAVX512
	})
}

// attnDots2AVX512 stores, for the m &^ 7 slots of a run (blocks of eight,
// K rows kstride bytes apart from k, at head 0's KV columns) and each of
// heads heads (head h at K columns (h/group)·d), the scores of two query
// rows: row a's q at qa (heads·d floats), row b's at qa + qd bytes; row
// a's score for head h and the block's slot s at sc + h·scstride + 4s, row
// b's scd bytes further. d is a positive multiple of 8.
//
//go:noescape
func attnDots2AVX512(sc *float32, scd, scstride uintptr, qa *float32, qd uintptr, k unsafe.Pointer, kstride uintptr, m, d, heads, group int, scale float32)

// attnAxpy4AVX512 adds, for the m slots of a run (V rows vstride bytes
// apart from v, at head 0's KV columns) and each head h (V columns
// (h/group)·d), the weighted V rows into four query rows' outputs: row r's
// output for head h at out + r·ostride + h·d·4 bytes, its weight for head h
// and the run's slot s at a + r·arstride + h·astride + 4s bytes. Per
// output element one FMA per slot, ascending. d is a positive multiple of
// 64.
//
//go:noescape
func attnAxpy4AVX512(out *float32, ostride uintptr, a *float32, arstride, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group int)

// attnRowBlockAVX512 is attnRowBlockAVX2 for float32 pages on AVX-512: per
// KV page, first the shared runs of row pairs (scores) or row quads
// (values) through the wide kernels, then each row's remaining runs in the
// page through the AVX2 row kernels, as attnRowBlockAVX2 runs them. Row r's
// head u scores at scratch[(r·Heads+u)·per:].
func attnRowBlockAVX512(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, per, i, nr int, stride uintptr, pf int) {
	d, nh := s.HeadDim, s.Heads
	group := nh / s.KVHeads
	kvDim := s.KVHeads * d
	pt := kv.PageTokens
	kp, vp := kv.K, kv.V
	scStride := uintptr(per) * 4
	var rs [attnRowBlock]attnBlockRow
	plo, phi := attnBlockRows(&rs, dst, kv, mask, i, nr, nh*d)
	_ = scratch[(nr*nh-1)*per+per-1]
	_ = q[(i+nr)*nh*d-1]
	_ = dst[(i+nr)*nh*d-1]
	wideValues := d%64 == 0
	for _, values := range [2]bool{false, true} {
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
		var next, n, j0, m [attnRowBlock]int
		for r := range nr {
			next[r] = rs[r].lo
		}
		// run finds row r's next run of visible slots in the page that
		// ends at end (m[r] = 0: none left there).
		run := func(r, end int) {
			m[r] = 0
			if next[r] >= min(end, rs[r].hi) {
				return
			}
			a, b := visibleRun(mask, rs[r].tree, i+r, next[r], rs[r].hi, pt)
			if b == 0 {
				next[r] = rs[r].hi
				return
			}
			if a >= end {
				return
			}
			j0[r], m[r] = a, b
		}
		// step consumes c slots of row r's current run.
		step := func(r, c int) {
			n[r] += c
			next[r] = j0[r] + c
		}
		for pg := plo; pg < phi; pg++ {
			end := (pg + 1) * pt
			if !values {
				for r := 0; r+1 < nr; r += 2 {
					for {
						run(r, end)
						run(r+1, end)
						c := min(m[r], m[r+1]) &^ 7
						if c == 0 || j0[r] != j0[r+1] {
							break
						}
						row := (j0[r] % pt) * kvDim
						page := kp[j0[r]/pt]
						_ = page[row+c*kvDim-1]
						sa := &scratch[r*nh*per+n[r]]
						sb := &scratch[(r+1)*nh*per+n[r+1]]
						attnDots2AVX512(sa, uintptr(unsafe.Pointer(sb))-uintptr(unsafe.Pointer(sa)), scStride,
							&q[(i+r)*nh*d], uintptr(nh*d)*4, unsafe.Pointer(&page[row]), stride, c, d, nh, group, s.Scale)
						step(r, c)
						step(r+1, c)
					}
				}
			} else if wideValues {
				for r := 0; r+3 < nr; r += 4 {
					for {
						run(r, end)
						run(r+1, end)
						run(r+2, end)
						run(r+3, end)
						c := min(m[r], m[r+1], m[r+2], m[r+3])
						if c == 0 || j0[r] != j0[r+1] || j0[r] != j0[r+2] || j0[r] != j0[r+3] {
							break
						}
						row := (j0[r] % pt) * kvDim
						page := vp[j0[r]/pt]
						_ = page[row+c*kvDim-1]
						// The four rows' weights must sit at one stride: rows
						// r…r+3 have consumed the same slots of equal runs
						// only if their counts agree.
						if n[r] != n[r+1] || n[r] != n[r+2] || n[r] != n[r+3] {
							break
						}
						attnAxpy4AVX512(&dst[(i+r)*nh*d], uintptr(nh*d)*4, &scratch[r*nh*per+n[r]], uintptr(nh*per)*4, scStride,
							unsafe.Pointer(&page[row]), stride, c, d, nh, group)
						for k := r; k < r+4; k++ {
							step(k, c)
						}
					}
				}
			}
			// Each row's remaining runs in the page, as attnRowBlockAVX2.
			for r := range nr {
				for {
					run(r, end)
					if m[r] == 0 {
						break
					}
					c := m[r]
					row := (j0[r] % pt) * kvDim
					sc := &scratch[r*nh*per+n[r]]
					if values {
						page := vp[j0[r]/pt]
						_ = page[row+c*kvDim-1]
						out := dst[(i+r)*nh*d : (i+r+1)*nh*d]
						attnAxpyRowAVX2(&out[0], sc, scStride, unsafe.Pointer(&page[row]), stride, c, d, nh, group, 0, pf)
					} else {
						page := kp[j0[r]/pt]
						_ = page[row+c*kvDim-1]
						qrow := q[(i+r)*nh*d : (i+r+1)*nh*d]
						attnDotsRowAVX2(sc, scStride, &qrow[0], unsafe.Pointer(&page[row]), stride, c, d, nh, group, 0, pf, s.Scale)
					}
					step(r, c)
				}
			}
		}
		for r := range nr {
			rs[r].n = n[r]
		}
	}
}
