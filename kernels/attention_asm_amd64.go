//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math/bits"
	"unsafe"
)

// For head dims that are a multiple of 16 on AVX-512 the tile's inner loops
// run in assembly (attention_amd64.s): per block of 16 slots and item, one
// call scores the visible slots (16 FMA chains, their lanes summed by a
// transpose in hsum16's tree, times Scale, stored packed) and one adds the
// weighted value rows. The operations per item are those of score16 and
// axpyRows16, in the same order, so the result is bit-identical to the
// archsimd tile and to attentionSIMDItems. What the assembly saves is the
// Go overhead around those operations: per-row slice headers and bounds
// checks, the accumulators' round trip through memory, the permutation
// indices reloaded for every transpose and the score compaction one slot
// at a time; the block's row pointers are found once for all the tile's
// items.
//
// The assembly needs AVX-512F (which implies the BMI1 and POPCNT it also
// uses on every CPU that has it).

// attnAsm enables the assembly tile; tests and benchmarks switch it off to
// compare with the archsimd tile.
var attnAsm bool // set by the selector in attention_simd_amd64.go

// attnPrefetch makes the assembly prefetch the next block's rows (a var so
// that benchmarks can measure it).
var attnPrefetch = true

// attnScores16 stores at sc the scores Scale·(q · K_k[off:off+d]) of the
// block slots k in vis (bit k), packed in ascending k: popcount(vis)
// floats. rows[k] is slot k's KV row; off is in bytes; d is a positive
// multiple of 16. All 16 rows are read, visible or not, so each must be
// a readable row (the Go side repeats a real one for missing slots).
// next, unless nil, is the next block's rows: their lines [off, off+4d)
// are prefetched.
//
//go:noescape
func attnScores16(sc *float32, q *float32, rows *[attnBlock]unsafe.Pointer, off, d uintptr, vis uint32, scale float32, next *[attnBlock]unsafe.Pointer)

// attnAxpy16 adds to out[0:d] the rows V_k[off:off+d] (rows[k], off in
// bytes) of the block slots k in vis, ascending, the n-th of them times
// w[n]: out[t] = fma(w[n], V_k[t], out[t]). Only the rows in vis are read;
// next is prefetched as in attnScores16.
//
//go:noescape
func attnAxpy16(out *float32, w *float32, rows *[attnBlock]unsafe.Pointer, off, d uintptr, vis uint32, next *[attnBlock]unsafe.Pointer)

// useAsm reports whether the tile runs on the assembly: 16 lanes and a
// head dim without a partial last vector.
func (t *attnTile) useAsm() bool {
	return attnAsm && t.width == 16 && t.s.HeadDim%16 == 0
}

// runAsm is run's work for the assembly: the same two block passes around
// the softmax. Each pass finds the row pointers of block j0+16 while block
// j0 computes, and the assembly prefetches them item by item; the last K
// block prefetches the first V block.
func (t *attnTile) runAsm(items []attnItem) {
	d := t.s.HeadDim
	// unsafe.Pointer, not uintptr: the pointers stay valid even were a
	// page on a stack that moved between here and the call.
	var rowsA, rowsB [attnBlock]unsafe.Pointer
	cur, next := &rowsA, &rowsB
	nb := t.rowPtrs(cur, t.kv.K, t.lo)
	for j0 := t.lo; j0 < t.hi; j0 += attnBlock {
		pf := next
		nnext := 0
		if j0+attnBlock < t.hi {
			nnext = t.rowPtrs(next, t.kv.K, j0+attnBlock)
		} else {
			nnext = t.rowPtrs(next, t.kv.V, t.lo)
		}
		if !attnPrefetch {
			pf = nil
		}
		lastOff := -1
		for k := range items {
			it := &items[k]
			vis := t.blockVis(it, j0, nb)
			if vis == 0 {
				continue
			}
			n := it.n + bits.OnesCount32(vis)
			sc := it.sc[it.n:n]
			qh := t.q[it.it*d : (it.it+1)*d]
			attnScores16(&sc[0], &qh[0], cur, uintptr(it.off)*4, uintptr(d), vis, t.s.Scale, prefetchFor(pf, it.off, &lastOff))
			it.n = n
		}
		cur, next, nb = next, cur, nnext
	}
	for k := range items {
		it := &items[k]
		clear(t.dst[it.it*d : (it.it+1)*d])
		if it.n > 0 {
			softmaxSIMD(it.sc[:it.n])
		}
		it.n = 0 // now the read position in the weights
	}
	// cur holds the first V block.
	for j0 := t.lo; j0 < t.hi; j0 += attnBlock {
		var pf *[attnBlock]unsafe.Pointer
		nnext := 0
		if j0+attnBlock < t.hi {
			nnext = t.rowPtrs(next, t.kv.V, j0+attnBlock)
			if attnPrefetch {
				pf = next
			}
		}
		lastOff := -1
		for k := range items {
			it := &items[k]
			vis := t.blockVis(it, j0, nb)
			if vis == 0 {
				continue
			}
			n := it.n + bits.OnesCount32(vis)
			w := it.sc[it.n:n]
			out := t.dst[it.it*d : (it.it+1)*d]
			attnAxpy16(&out[0], &w[0], cur, uintptr(it.off)*4, uintptr(d), vis, prefetchFor(pf, it.off, &lastOff))
			it.n = n
		}
		cur, next, nb = next, cur, nnext
	}
}

// prefetchFor is pf for the first item of a run of items on one KV head
// (the tile orders them so: a GQA group, the rows of a prefill chunk), nil
// for the others: one prefetch of the next block's rows per head is enough.
func prefetchFor(pf *[attnBlock]unsafe.Pointer, off int, lastOff *int) *[attnBlock]unsafe.Pointer {
	if off == *lastOff {
		return nil
	}
	*lastOff = off
	return pf
}

// rowPtrs points rows[k] at the KV row (in pages) of slot j0+k for the
// block's slots, at most attnBlock of them, and returns how many; the
// entries past them repeat rows[0] so that every entry is readable. Each
// row is bounds-checked in full here, once for all the tile's items: the
// assembly trusts it.
func (t *attnTile) rowPtrs(rows *[attnBlock]unsafe.Pointer, pages [][]float32, j0 int) int {
	nb := min(attnBlock, t.hi-j0)
	pt, kvDim := t.kv.PageTokens, t.kvDim
	if slot := j0 % pt; slot+nb <= pt {
		// One page: a single bounds check for the block.
		b := slot * kvDim
		p := unsafe.Pointer(&pages[j0/pt][b : b+nb*kvDim][0])
		for k := 0; k < nb; k++ {
			rows[k] = unsafe.Add(p, k*kvDim*4)
		}
		for k := nb; k < attnBlock; k++ {
			rows[k] = p
		}
		return nb
	}
	pg, slot := j0/pt, j0%pt
	for k := 0; k < nb; k++ {
		b := slot * kvDim
		rows[k] = unsafe.Pointer(&pages[pg][b : b+kvDim][0])
		if slot++; slot == pt {
			pg, slot = pg+1, 0
		}
	}
	for k := nb; k < attnBlock; k++ {
		rows[k] = rows[0]
	}
	return nb
}

// blockVis is the bit set of the block's slots (j0+k, k < nb) that it sees.
func (t *attnTile) blockVis(it *attnItem, j0, nb int) uint32 {
	a, b := max(it.jlo, j0)-j0, min(it.jhi, j0+nb)-j0
	if a >= b {
		return 0
	}
	return t.visible(it, j0, a, b)
}
