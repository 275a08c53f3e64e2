// Draft trees in the cache: a sequence's open tree (treeState: each tree
// slot's parent, position and ancestor bits), and the commits that move a
// verified path onto the linear history and close it (Commit, CommitPath).

package kvcache

import "fmt"

// treeState is a sequence's open draft tree: slots [start, len) are tree
// nodes, possibly reserved by several ended passes; slots below start are
// linear history, and slot start-1 is the root (the last accepted token).
// Tree node k (slot start+k) has parent slot par[k] (start-1 for a child of
// the root), position pos[k] along its ancestor chain (what the sliding
// window measures), and ancestor set bits[off[k] : off[k]+k/64+1]: bit j is
// slot start+j, itself included.
type treeState struct {
	start int32 // -1: no open tree
	par   []int32
	pos   []int32
	off   []int32
	bits  []uint64
}

// open reports whether a tree is open.
func (t *treeState) open() bool { return t.start >= 0 }

// nodes is the number of tree slots.
func (t *treeState) nodes() int32 { return int32(len(t.par)) }

// anc is the ancestor set of tree node k.
func (t *treeState) anc(k int32) []uint64 {
	o := t.off[k]
	return t.bits[o : o+k/64+1 : o+k/64+1]
}

// trim keeps the first n tree nodes.
func (t *treeState) trim(n int32) {
	if n < t.nodes() {
		t.bits = t.bits[:t.off[n]]
	}
	t.par, t.pos, t.off = t.par[:n], t.pos[:n], t.off[:n]
}

// add appends a tree node.
func (t *treeState) add(par, pos int32, anc []uint64) {
	t.par = append(t.par, par)
	t.pos = append(t.pos, pos)
	t.off = append(t.off, int32(len(t.bits)))
	t.bits = append(t.bits, anc...)
}

// copyFrom makes t the first n nodes of u's tree (n <= 0 closes t).
func (t *treeState) copyFrom(u *treeState, n int32) {
	t.close()
	if !u.open() || n <= 0 {
		return
	}
	n = min(n, u.nodes())
	t.start = u.start
	t.par = append(t.par, u.par[:n]...)
	t.pos = append(t.pos, u.pos[:n]...)
	t.off = append(t.off, u.off[:n]...)
	end := int32(len(u.bits))
	if n < u.nodes() {
		end = u.off[n]
	}
	t.bits = append(t.bits, u.bits[:end]...)
}

// Commit keeps the accepted path of a draft tree verified in one pass. keep
// lists batch rows of the last ended pass over seq, in ascending order (a
// root-to-leaf path is, because a parent row precedes its children); their
// K/V move onto the linear history right after the length seq had before that
// pass, and every other slot of that pass is dropped. Afterwards Len(seq) =
// base + len(keep) and no draft tree is open. An empty keep drops the whole
// pass. A tree that started in an earlier pass is CommitPath's (ErrCommit
// here). Commit needs a free page only if a destination page is shared with a
// fork, and then fails with ErrFull before changing anything.
func (c *Cache) Commit(seq int32, keep []int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[seq]
	if s == nil {
		return fmt.Errorf("%w: sequence %d has no state", ErrCommit, seq)
	}
	if s.busy != nil {
		return fmt.Errorf("%w: commit sequence %d", ErrBusy, seq)
	}
	if !s.lastValid {
		return fmt.Errorf("%w: sequence %d has no ended pass to commit (or it was truncated, forked into or committed since)", ErrCommit, seq)
	}
	base := s.lastBase
	if t := &s.tree; t.open() && t.start < base {
		return fmt.Errorf("%w: sequence %d has a draft tree from slot %d, before its last pass (slot %d on): commit it with CommitPath", ErrCommit, seq, t.start, base)
	}
	// Translate rows to slots, checking order and membership.
	src := c.scratch[:0]
	prev := int32(-1)
	for i, row := range keep {
		k := searchInt32(s.lastRows, row)
		if k < 0 {
			return fmt.Errorf("%w: keep[%d] = row %d is not a row of sequence %d in its last pass (rows %v)", ErrCommit, i, row, seq, s.lastRows)
		}
		if int32(k) <= prev {
			return fmt.Errorf("%w: keep[%d] = row %d is not after keep[%d] = row %d", ErrCommit, i, row, i-1, keep[i-1])
		}
		prev = int32(k)
		src = append(src, base+int32(k))
	}
	c.scratch = src
	return c.compact(s, base, src)
}

// CommitPath keeps one root-to-leaf path of seq's open draft tree, grown over
// any number of ended passes. slots lists tree slots, the first a child of the
// root (its parent is the slot just below the tree), each the parent of the
// next. Their K/V move onto the linear history from the tree's first slot on,
// every other tree slot is dropped and the tree closes: afterwards Len(seq) =
// start + len(slots), where start is the tree's first slot. An empty path
// drops the whole tree. A sequence without an open tree is ErrCommit. Like
// Commit, CommitPath needs a free page only to copy a destination page shared
// with a fork, and fails with ErrFull before changing anything.
func (c *Cache) CommitPath(seq int32, slots []int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[seq]
	if s == nil {
		return fmt.Errorf("%w: sequence %d has no state", ErrCommit, seq)
	}
	if s.busy != nil {
		return fmt.Errorf("%w: commit path of sequence %d", ErrBusy, seq)
	}
	t := &s.tree
	if !t.open() {
		return fmt.Errorf("%w: sequence %d has no open draft tree (no pass with tree rows since it was last committed or truncated)", ErrCommit, seq)
	}
	want := t.start - 1 // the parent the next path slot must have
	for i, slot := range slots {
		if slot < t.start || slot >= s.len {
			return fmt.Errorf("%w: path[%d] = slot %d is not a tree slot of sequence %d (tree slots %d..%d)", ErrCommit, i, slot, seq, t.start, s.len-1)
		}
		if par := t.par[slot-t.start]; par != want {
			if i == 0 {
				return fmt.Errorf("%w: path[0] = slot %d has parent slot %d, want the root, slot %d", ErrCommit, slot, par, want)
			}
			return fmt.Errorf("%w: path[%d] = slot %d has parent slot %d, want path[%d] = slot %d", ErrCommit, i, slot, par, i-1, want)
		}
		want = slot
	}
	return c.compact(s, t.start, slots)
}

// compact moves the K/V of the ascending slots src onto slots base, base+1,
// …, drops everything after them and closes the tree. src[i] >= base+i, so
// moving in order never overwrites a row still to be read. c.mu held.
func (c *Cache) compact(s *seqState, base int32, src []int32) error {
	newLen := base + int32(len(src))
	// Destination slots [base, newLen) are written only where a row moves.
	first := -1 // first index that moves
	for i, slot := range src {
		if slot != base+int32(i) {
			first = i
			break
		}
	}
	if first >= 0 {
		lo, hi := int(base+int32(first))/int(c.pt), c.pagesFor(newLen)
		need := 0
		for i := lo; i < hi; i++ {
			if c.shared(s, i) {
				need++
			}
		}
		if need > c.avail() {
			return fmt.Errorf("%w: commit sequence %d needs %d pages to unshare, %d free", ErrFull, s.id, need, c.avail())
		}
		for i := lo; i < hi; i++ {
			if err := c.unshare(s, i); err != nil {
				return err
			}
		}
		if c.res != nil {
			if err := c.moveRows(s, base, src[first:], first); err != nil {
				return err
			}
		} else {
			rowF := c.rowF
			for i := first; i < len(src); i++ {
				from, dst := src[i], base+int32(i)
				sp, so := from/c.pt, int(from%c.pt)*rowF
				dp, do := dst/c.pt, int(dst%c.pt)*rowF
				for l := range s.kp {
					c.copyRow(s.kp[l][dp], do, s.kp[l][sp], so)
					c.copyRow(s.vp[l][dp], do, s.vp[l][sp], so)
				}
			}
		}
	}
	s.len = newLen
	s.lastValid = false
	c.trimKeys(s, base)
	s.tree.close()
	c.shrink(s, c.pagesFor(newLen))
	return nil
}

// moveRows is compact's copy under a budget: row src[j] moves to slot
// base+first+j, layer by layer, pinning at most a source and a destination
// frame at a time. A failed read back leaves the sequence as it was in the
// layers not yet moved, and the error is returned (the caller drops the
// sequence's request). c.mu held.
func (c *Cache) moveRows(s *seqState, base int32, src []int32, first int) error {
	rowF := c.rowF
	for l := range c.o.Layers {
		sp, dp := int32(-1), int32(-1) // pinned page indices of s
		unpin := func() {
			if dp >= 0 && dp != sp {
				c.unpin(l, s.pages[dp])
			}
			if sp >= 0 {
				c.unpin(l, s.pages[sp])
			}
			sp, dp = -1, -1
		}
		for j, from := range src {
			to := base + int32(first+j)
			fp, tp := from/c.pt, to/c.pt
			if fp != sp || tp != dp {
				unpin()
				if err := c.pin(l, s.pages[fp], fp == tp); err != nil {
					return fmt.Errorf("kvcache: commit sequence %d: %w", s.id, err)
				}
				sp = fp
				if tp != fp {
					if err := c.pin(l, s.pages[tp], true); err != nil {
						unpin()
						return fmt.Errorf("kvcache: commit sequence %d: %w", s.id, err)
					}
				}
				dp = tp
			}
			so, do := int(from%c.pt)*rowF, int(to%c.pt)*rowF
			kd, vd, ks, vs := c.k[l][s.pages[tp]], c.v[l][s.pages[tp]], c.k[l][s.pages[fp]], c.v[l][s.pages[fp]]
			c.copyRow(kd, do, ks, so)
			c.copyRow(vd, do, vs, so)
		}
		unpin()
	}
	return nil
}

// searchInt32 returns the index of x in the ascending slice a, or -1.
func searchInt32(a []int32, x int32) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(a) && a[lo] == x {
		return lo
	}
	return -1
}

// close forgets the tree, keeping capacity.
func (t *treeState) close() {
	t.start = -1
	t.trim(0)
}
