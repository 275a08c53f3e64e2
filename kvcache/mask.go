// Masks: what each row of a pass sees. A tree row's slots and ancestor
// bits (planTree), the per-row visible ranges and bits of kernels.Mask
// (buildMask), and the runs of rows the attention kernels take together
// (buildRuns).

package kvcache

import (
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
)

// planTree decides which rows of e are draft-tree nodes (see Begin), checks
// their parents and sets e.tstart, e.opened and p.pslot. It changes nothing
// outside the pass. c.mu held.
func (p *Pass) planTree(b *input.Batch, e *entry) error {
	s := e.s
	rows := p.order[e.start : e.start+e.count]
	ts := s.tree.start
	lo := ts - 1 // lowest valid ParentSlot: the root
	if ts < 0 {
		lo = e.base - 1 // no tree yet: only the tail
	}
	first := -1 // first row (index into rows) that makes this pass a tree
	for k, r := range rows {
		ps := int32(-1)
		explicit := false
		if b.Parent != nil && b.Parent[r] >= 0 {
			ps = p.slots[b.Parent[r]]
		} else if b.ParentSlot != nil && b.ParentSlot[r] >= 0 {
			ps, explicit = b.ParentSlot[r], true
			if ps < lo || ps >= e.base {
				switch {
				case e.base == 0:
					return fmt.Errorf("%w: row %d: ParentSlot %d, but sequence %d has no slots yet", ErrBatch, r, ps, s.id)
				case ts < 0:
					return fmt.Errorf("%w: row %d: ParentSlot %d of sequence %d, want %d (its last slot: the sequence has no open draft tree)", ErrBatch, r, ps, s.id, lo)
				default:
					return fmt.Errorf("%w: row %d: ParentSlot %d of sequence %d, want %d..%d (the draft tree's root and its slots from earlier passes)", ErrBatch, r, ps, s.id, lo, e.base-1)
				}
			}
		}
		p.pslot[r] = ps
		if first < 0 && (explicit || (ps >= 0 && ps != p.slots[r]-1)) {
			first = k
		}
	}
	e.opened = false
	if ts < 0 {
		if first < 0 {
			e.tstart = -1
			for _, r := range rows {
				p.pslot[r] = -1 // linear: chained rows are causal rows
			}
			return nil
		}
		ts = p.slots[rows[first]]
		for _, r := range rows[first:] {
			if ps := p.pslot[r]; ps >= 0 {
				ts = min(ts, ps+1)
			}
		}
		e.opened = true
	}
	e.tstart = ts
	for _, r := range rows {
		switch {
		case p.slots[r] < ts:
			p.pslot[r] = -1 // linear history below the tree
		case p.pslot[r] < 0:
			return fmt.Errorf("%w: row %d (sequence %d, slot %d) has no parent, but the sequence's draft tree covers slots from %d: give it a parent row or a ParentSlot, or close the tree first (CommitPath, Commit, Truncate)", ErrBatch, r, s.id, p.slots[r], ts)
		}
	}
	return nil
}

// buildMask fills p.mask for the rows of b. See kernels.Mask.
//
// A row that is not a draft-tree node is a causal row: it sees its
// sequence's history and every earlier row of its sequence in the batch, Lo =
// max(0, slot-Window+1), Hi = slot+1 (and TreeBase = Hi: it has no tree bits).
// A tree node sees the linear history below its sequence's tree (TreeBase =
// the tree's first slot) and, above it, only its ancestor chain and itself:
// Tree[i] = ancestors(parent) | bit(self), where the parent's set comes from
// this pass or, for a ParentSlot, from the pass that reserved it. Its window
// is measured along that chain (its position is its parent's plus one), so a
// deep tree in a windowed model also drops ancestors that fell out of it.
//
// A batch without tree nodes (in particular one whose Parent links only ever
// point to the previous row of the same sequence, a linear chunk spelled with
// parents) is causal and gets Tree = nil: kernels then take the cheaper path.
func (p *Pass) buildMask(b *input.Batch, window int) {
	m := &p.mask
	w := int32(window)
	lo := func(pos int32) int32 {
		if w > 0 && pos-w+1 > 0 {
			return pos - w + 1
		}
		return 0
	}
	// rowOf is the batch row of a slot of this pass.
	rowOf := func(e *entry, slot int32) int32 { return p.order[e.start+slot-e.base] }
	// posOf is the chain position of tree node slot of e's sequence.
	posOf := func(e *entry, slot int32) int32 {
		if slot >= e.base {
			return p.vpos[rowOf(e, slot)]
		}
		return e.s.tree.pos[slot-e.tstart]
	}
	tree := false
	words, masked := 0, 0
	for i := range b.Seq {
		slot := p.slots[i]
		e := &p.entries[p.rowEnt[i]]
		m.Hi[i] = slot + 1
		m.TreeBase[i] = slot + 1
		p.vpos[i] = slot
		if ps := p.pslot[i]; ps >= 0 {
			tree = true
			m.TreeBase[i] = e.tstart
			if ps == e.tstart-1 {
				p.vpos[i] = ps + 1 // a child of the root
			} else {
				p.vpos[i] = posOf(e, ps) + 1
			}
			nw := int((slot-e.tstart)/64 + 1)
			words += nw
			if lo(p.vpos[i]) > e.tstart {
				masked += nw
			}
		}
		m.Lo[i] = lo(p.vpos[i])
	}
	if !tree {
		m.Tree = nil
		return
	}

	if cap(p.ancBuf) < words {
		p.ancBuf = make([]uint64, words)
	}
	if cap(p.treeBuf) < masked {
		p.treeBuf = make([]uint64, masked)
	}
	buf, mbuf := p.ancBuf[:words], p.treeBuf[:masked]
	clear(buf)
	n := len(b.Seq)
	if cap(p.tree) < n {
		p.tree = make([][]uint64, n)
		p.anc = make([][]uint64, n)
	}
	m.Tree, p.anc = p.tree[:n], p.anc[:n]
	for i := range b.Seq {
		ps := p.pslot[i]
		if ps < 0 {
			m.Tree[i], p.anc[i] = nil, nil
			continue
		}
		e := &p.entries[p.rowEnt[i]]
		k := p.slots[i] - e.tstart // index of the node in the tree
		nw := k/64 + 1
		row := buf[:nw:nw]
		buf = buf[nw:]
		switch {
		case ps < e.tstart: // the root: no tree ancestors
		case ps >= e.base:
			copy(row, p.anc[rowOf(e, ps)])
		default:
			copy(row, e.s.tree.anc(ps-e.tstart))
		}
		row[k/64] |= 1 << (uint(k) % 64)
		p.anc[i], m.Tree[i] = row, row
		if m.Lo[i] > e.tstart {
			// Window shorter than the chain: drop ancestors whose chain
			// position fell out of it (rare: only trees deeper than Window).
			mr := mbuf[:nw:nw]
			mbuf = mbuf[nw:]
			copy(mr, row)
			for j := range k {
				if mr[j/64]&(1<<(uint(j)%64)) != 0 && posOf(e, e.tstart+j) < m.Lo[i] {
					mr[j/64] &^= 1 << (uint(j) % 64)
				}
			}
			m.Tree[i] = mr
		}
	}
}

// buildRuns splits the batch into runs of consecutive rows of one sequence.
func (p *Pass) buildRuns(b *input.Batch) {
	p.runs = p.runs[:0]
	for i, seq := range b.Seq {
		if k := len(p.runs); k > 0 && p.runs[k-1].Seq == seq {
			p.runs[k-1].Rows++
			continue
		}
		p.runs = append(p.runs, Run{Seq: seq, Start: i, Rows: 1})
	}
	if cap(p.runMask) < len(p.runs) {
		p.runMask = make([]kernels.Mask, len(p.runs), cap(p.runs))
	}
	p.runMask = p.runMask[:len(p.runs)]
	m := &p.mask
	for i := range p.runs {
		r := &p.runs[i]
		a, z := r.Start, r.Start+r.Rows
		rm := &p.runMask[i]
		*rm = kernels.Mask{Lo: m.Lo[a:z:z], Hi: m.Hi[a:z:z], TreeBase: m.TreeBase[a:z:z]}
		if m.Tree != nil {
			rm.Tree = m.Tree[a:z:z]
		}
		r.Mask = rm
	}
}
