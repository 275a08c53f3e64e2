package gemma

import (
	"math/bits"

	"github.com/sluicehq/sluice/kernels"
)

// LocalMask is a pass's attention mask narrowed to a sliding window, built
// from the full (unwindowed) mask the KV cache made. It gives every row the
// visibility a cache with that window gives (kvcache.Options.Window): a
// plain row at slot s sees slots from s-window+1; a draft-tree node at chain
// position P (its tree base plus its depth) sees the positions from
// P-window+1 along its ancestor chain, the linear history below the tree
// included. A tree node's ancestors, in ascending slot order, are at
// consecutive positions (a parent's slot is below its child's), so the
// window drops the lowest set bits of its row.
type LocalMask struct {
	m    kernels.Mask
	bits []uint64 // rows of Tree that differ from the full mask's
	run  kernels.Mask
}

// Build narrows full to window (> 0) for all its rows.
func (lm *LocalMask) Build(full *kernels.Mask, window int) {
	n := len(full.Hi)
	m := &lm.m
	m.Lo = grow(m.Lo, n)
	m.Hi = full.Hi
	m.TreeBase = full.TreeBase
	m.Tree = nil
	if full.Tree != nil {
		if cap(lm.m.Tree) < n {
			lm.m.Tree = make([][]uint64, n)
		}
		m.Tree = lm.m.Tree[:n]
	}
	lm.bits = lm.bits[:0]
	w := int64(window)
	for i := range n {
		lo := int64(full.Lo[i])
		if full.Tree == nil || full.Tree[i] == nil {
			// slot = Hi-1: visible from Hi-window.
			lo = max(lo, int64(full.Hi[i])-w)
			m.Lo[i] = int32(lo)
			if m.Tree != nil {
				m.Tree[i] = nil
			}
			continue
		}
		row := full.Tree[i]
		depth := 0
		for _, b := range row {
			depth += bits.OnesCount64(b)
		}
		base := int64(full.TreeBase[i])
		first := base + int64(depth) - 1 - w + 1 // first visible chain position
		lo = max(lo, first)
		m.Lo[i] = int32(lo)
		m.Tree[i] = row
		if drop := first - base; drop > 0 {
			// Copy the row and clear its drop lowest set bits.
			start := len(lm.bits)
			lm.bits = append(lm.bits, row...)
			r := lm.bits[start:]
			for j := 0; drop > 0 && j < len(r); j++ {
				for drop > 0 && r[j] != 0 {
					r[j] &= r[j] - 1
					drop--
				}
			}
		}
	}
	// Point the copied rows at lm.bits only now: append may have moved it.
	off := 0
	for i := range n {
		if full.Tree == nil || full.Tree[i] == nil {
			continue
		}
		base := int64(full.TreeBase[i])
		depth := 0
		for _, b := range full.Tree[i] {
			depth += bits.OnesCount64(b)
		}
		if base+int64(depth)-w > base {
			k := len(full.Tree[i])
			m.Tree[i] = lm.bits[off : off+k : off+k]
			off += k
		}
	}
}

// Rows is the mask of rows [lo, hi) (a run), valid until the next Rows or
// Build (it reuses one kernels.Mask, so the decode loop does not allocate).
func (lm *LocalMask) Rows(lo, hi int) *kernels.Mask {
	m := &lm.m
	lm.run = kernels.Mask{Lo: m.Lo[lo:hi:hi], Hi: m.Hi[lo:hi:hi]}
	if m.TreeBase != nil && len(m.TreeBase) >= hi {
		lm.run.TreeBase = m.TreeBase[lo:hi:hi]
	}
	if m.Tree != nil {
		lm.run.Tree = m.Tree[lo:hi:hi]
	}
	return &lm.run
}

func grow(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}
