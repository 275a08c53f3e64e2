package kvcache

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
)

// entry is one sequence of a pass.
type entry struct {
	s       *seqState
	base    int32 // Len(seq) at Begin: the slot of the sequence's first row
	count   int32 // rows of the sequence in the batch
	start   int32 // its rows are order[start : start+count]
	words   int32 // uint64 words per tree-mask row
	pages   int   // pages the sequence held before Begin
	created bool  // the sequence did not exist before this Begin
	cow     int32 // the shared tail page copied by Begin, held until End; -1 = none
}

// Pass is one batch's reservation in the cache, from Begin to End or Abort.
// Layer, Mask, Slots and Runs are valid until then. Exactly one of End or Abort
// must be called, once: the Pass is then recycled by a later Begin, so it must
// not be touched again (in particular, no `defer p.Abort()` next to End).
type Pass struct {
	c       *Cache
	live    bool
	entries []entry
	rowEnt  []int32 // batch row → index into entries
	order   []int32 // batch rows grouped by sequence, batch order within one
	slots   []int32
	vpos    []int32 // per row: position in its sequence along its ancestor chain
	mask    kernels.Mask
	treeBuf []uint64
	tree    [][]uint64
	runs    []Run
	runMask []kernels.Mask
	layers  []Layer
}

// Run is a maximal block of consecutive batch rows of one sequence: the unit of
// one kernels.Attention call (which attends over a single sequence's KV).
type Run struct {
	Seq         int32
	Start, Rows int           // batch rows [Start, Start+Rows)
	Mask        *kernels.Mask // those rows of Pass.Mask (slices of it, no copy)
}

// Layer is one layer's view of a pass.
type Layer struct {
	p *Pass
	l int
}

// Begin reserves slots for every row of b: the k-th row of sequence s (in batch
// order) gets slot Len(s)+k. It takes, up front and for all layers, every page
// those slots need, copying a shared tail page first (copy-on-write); if the
// pool cannot supply them it fails with ErrFull and changes nothing. A sequence
// may be in only one pass at a time (ErrBusy).
//
// b.Parent may be nil (all rows -1). A row with Parent p ≥ 0 must have p < row
// and the same sequence as p. The batch is only read during Begin.
func (c *Cache) Begin(ctx context.Context, b *input.Batch) (*Pass, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("kvcache: begin: %w", err)
	}
	n := len(b.Seq)
	if n == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrBatch)
	}
	if b.Parent != nil && len(b.Parent) != n {
		return nil, fmt.Errorf("%w: %d rows in Seq but %d in Parent", ErrBatch, n, len(b.Parent))
	}
	if len(b.Tokens) != 0 && len(b.Tokens) != n {
		return nil, fmt.Errorf("%w: %d rows in Seq but %d in Tokens", ErrBatch, n, len(b.Tokens))
	}
	for i := range n {
		if b.Seq[i] < 0 {
			return nil, fmt.Errorf("%w: row %d has sequence %d, want >= 0", ErrBatch, i, b.Seq[i])
		}
		if b.Parent == nil {
			continue
		}
		if p := b.Parent[i]; p < -1 || p >= int32(i) {
			return nil, fmt.Errorf("%w: row %d has parent %d, want -1 or an earlier row", ErrBatch, i, p)
		} else if p >= 0 && b.Seq[p] != b.Seq[i] {
			return nil, fmt.Errorf("%w: row %d (sequence %d) has parent row %d of sequence %d", ErrBatch, i, b.Seq[i], p, b.Seq[p])
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.getPass(n)
	if err := c.reserve(p, b); err != nil {
		c.putPass(p)
		return nil, err
	}
	p.buildMask(b, c.o.Window)
	p.buildRuns(b)
	p.live = true
	c.passes++
	return p, nil
}

// getPass takes a recycled pass sized for n rows. c.mu held.
func (c *Cache) getPass(n int) *Pass {
	var p *Pass
	if k := len(c.pool); k > 0 {
		p = c.pool[k-1]
		c.pool = c.pool[:k-1]
	} else {
		p = &Pass{c: c, layers: make([]Layer, c.o.Layers)}
		for i := range p.layers {
			p.layers[i] = Layer{p: p, l: i}
		}
	}
	p.entries = p.entries[:0]
	p.rowEnt = resize(p.rowEnt, n)
	p.order = resize(p.order, n)
	p.slots = resize(p.slots, n)
	p.vpos = resize(p.vpos, n)
	p.mask.Lo = resize(p.mask.Lo, n)
	p.mask.Hi = resize(p.mask.Hi, n)
	p.mask.TreeBase = resize(p.mask.TreeBase, n)
	p.mask.Tree = nil
	return p
}

// putPass recycles p. c.mu held.
func (c *Cache) putPass(p *Pass) {
	for i := range p.entries {
		p.entries[i].s = nil
	}
	p.entries = p.entries[:0]
	c.pool = append(c.pool, p)
}

func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// reserve groups the rows of b by sequence, checks limits and takes pages, all
// or nothing. c.mu held.
func (c *Cache) reserve(p *Pass, b *input.Batch) error {
	fail := func(err error) error {
		for _, e := range p.entries {
			e.s.entry = -1
			if e.created {
				delete(c.seqs, e.s.id)
			}
		}
		return err
	}
	for i, seq := range b.Seq {
		s := c.seqs[seq]
		created := false
		if s == nil {
			s = c.newSeq(seq)
			created = true
		}
		if s.busy != nil {
			return fail(fmt.Errorf("%w: row %d: sequence %d", ErrBusy, i, seq))
		}
		if s.entry < 0 {
			s.entry = len(p.entries)
			p.entries = append(p.entries, entry{s: s, base: s.len, pages: len(s.pages), created: created})
		}
		p.entries[s.entry].count++
		p.rowEnt[i] = int32(s.entry)
	}
	need := 0
	for _, e := range p.entries {
		if int(e.base)+int(e.count) > c.o.MaxSeqLen {
			return fail(fmt.Errorf("%w: sequence %d would hold %d tokens, limit %d", ErrSeqLen, e.s.id, int(e.base)+int(e.count), c.o.MaxSeqLen))
		}
		need += c.pagesFor(e.base+e.count) - e.pages
		if e.base%c.pt != 0 && c.shared(e.s, e.pages-1) {
			need++ // the tail page is written, so it must be copied first
		}
	}
	if need > len(c.free) {
		return fail(fmt.Errorf("%w: batch of %d rows needs %d pages, %d of %d free", ErrFull, len(b.Seq), need, len(c.free), len(c.ref)))
	}

	// Commit point: nothing below fails.
	var start int32
	for i := range p.entries {
		e := &p.entries[i]
		e.s.entry = -1
		e.s.busy = p
		e.cow = -1
		if e.base%c.pt != 0 && c.shared(e.s, e.pages-1) {
			// Copy the shared tail page, but keep holding the original until
			// End so that Abort can put it back.
			e.cow = e.s.pages[e.pages-1]
			c.unshare(e.s, e.pages-1)
			c.ref[e.cow]++
		}
		for range c.pagesFor(e.base+e.count) - e.pages {
			c.appendPage(e.s, c.takePage())
		}
		e.start = start
		start += e.count
		e.count = 0 // recounted while placing rows
	}
	for i := range b.Seq {
		e := &p.entries[p.rowEnt[i]]
		p.order[e.start+e.count] = int32(i)
		p.slots[i] = e.base + e.count
		e.count++
	}
	return nil
}

// buildMask fills p.mask for the rows of b. See kernels.Mask.
//
// A row with Parent -1 is a causal chunk row: it sees its sequence's history
// and every earlier row of its sequence in the batch, Lo = max(0, slot-Window+1),
// Hi = slot+1. A row with Parent ≥ 0 is a draft-tree node: it sees the history
// before its sequence's first batch slot (TreeBase) and, above it, only its
// ancestor chain and itself — Tree[i] = Tree[parent] | bit(self). Its window is
// measured along that chain (its position is its parent's plus one), so a deep
// tree in a windowed model also drops ancestors that fall out of the window.
//
// A batch whose Parent links only ever point to the previous row of the same
// sequence (a linear chunk spelled with parents) is causal, and gets Tree = nil
// like a batch with no parents at all: kernels then take the cheaper path.
func (p *Pass) buildMask(b *input.Batch, window int) {
	m := &p.mask
	tree := false
	for i, par := range b.Parent {
		if par >= 0 && p.slots[par] != p.slots[i]-1 {
			tree = true
			break
		}
	}
	w := int32(window)
	lo := func(pos int32) int32 {
		if w > 0 && pos-w+1 > 0 {
			return pos - w + 1
		}
		return 0
	}
	for i := range b.Seq {
		slot := p.slots[i]
		e := &p.entries[p.rowEnt[i]]
		m.Hi[i] = slot + 1
		m.TreeBase[i] = e.base
		p.vpos[i] = slot
		if b.Parent != nil && b.Parent[i] >= 0 {
			p.vpos[i] = p.vpos[b.Parent[i]] + 1
		}
		m.Lo[i] = lo(p.vpos[i])
	}
	if !tree {
		return
	}

	words := 0
	for i := range p.entries {
		e := &p.entries[i]
		e.words = (e.count + 63) / 64
		words += int(e.words) * int(e.count)
	}
	if cap(p.treeBuf) < words {
		p.treeBuf = make([]uint64, words)
	}
	buf := p.treeBuf[:words]
	clear(buf)
	if cap(p.tree) < len(b.Seq) {
		p.tree = make([][]uint64, len(b.Seq))
	}
	m.Tree = p.tree[:len(b.Seq)]
	for i := range b.Seq {
		e := &p.entries[p.rowEnt[i]]
		row := buf[:e.words:e.words]
		buf = buf[e.words:]
		m.Tree[i] = row
		k := p.slots[i] - e.base // index of the row within its sequence
		par := int32(-1)
		if b.Parent != nil {
			par = b.Parent[i]
		}
		if par < 0 {
			// Causal: every earlier row of the sequence, and itself.
			for j := int32(0); j <= k; j++ {
				row[j/64] |= 1 << (uint(j) % 64)
			}
		} else {
			copy(row, m.Tree[par])
			row[k/64] |= 1 << (uint(k) % 64)
		}
		if m.Lo[i] > e.base {
			// Window shorter than the tree: drop batch rows whose chain
			// position fell out of it (rare: only trees deeper than Window).
			for j := range k {
				r := p.order[e.start+j]
				if p.vpos[r] < m.Lo[i] {
					row[j/64] &^= 1 << (uint(j) % 64)
				}
			}
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

// Runs lists the batch as blocks of consecutive rows of one sequence, in batch
// order, each with its slice of the mask. A model calls kernels.Attention once
// per run with Layer.View(run.Seq). A sequence whose rows are not contiguous
// in the batch appears in several runs; each sees the whole sequence's KV.
func (p *Pass) Runs() []Run { return p.runs }

// Layer returns layer i's view of the pass.
func (p *Pass) Layer(i int) *Layer { return &p.layers[i] }

// Mask is the attention mask of the batch: one row per batch row, slots per
// sequence (see kernels.Mask). Shared by all layers.
func (p *Pass) Mask() *kernels.Mask { return &p.mask }

// Slots is the slot each batch row was given.
func (p *Pass) Slots() []int32 { return p.slots }

// ErrEnded is returned by End on a pass that already ended or aborted.
var ErrEnded = errors.New("kvcache: pass already ended")

// End makes the rows the sequences' cached history and recycles p.
func (p *Pass) End() error {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.live {
		return ErrEnded
	}
	p.live = false
	for i := range p.entries {
		e := &p.entries[i]
		s := e.s
		s.busy = nil
		if e.cow >= 0 {
			c.release(e.cow)
		}
		s.len = e.base + e.count
		s.lastBase = e.base
		s.lastRows = append(s.lastRows[:0], p.order[e.start:e.start+e.count]...)
		s.lastValid = true
		if s.freeing {
			c.drop(s)
		}
	}
	c.passes--
	c.putPass(p)
	return nil
}

// Abort undoes the reservation: the sequences keep the history they had before
// Begin and the pages taken for the batch go back to the pool. Use it on the
// error path instead of End.
func (p *Pass) Abort() {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if !p.live {
		return
	}
	p.live = false
	for i := range p.entries {
		e := &p.entries[i]
		s := e.s
		s.busy = nil
		if e.cow >= 0 {
			// Back to the shared original (still held by the pass).
			i := e.pages - 1
			c.release(s.pages[i])
			c.setPage(s, i, e.cow)
		}
		c.shrink(s, c.pagesFor(s.len))
		switch {
		case s.freeing:
			c.drop(s)
		case e.created:
			delete(c.seqs, s.id)
		}
	}
	c.passes--
	c.putPass(p)
}

// Put stores the keys and values of all rows of the batch for this layer: k and
// v hold, in batch order, KVHeads*HeadDim floats per row. It takes no
// cache-wide lock. It panics if the lengths do not match the batch (a
// programming error, like a bad copy bound).
func (l *Layer) Put(k, v []float32) {
	p := l.p
	rowF := p.c.rowF
	if n := len(p.slots) * rowF; len(k) != n || len(v) != n {
		panic(fmt.Sprintf("kvcache: Layer(%d).Put: got %d keys and %d values, want %d rows × %d = %d", l.l, len(k), len(v), len(p.slots), rowF, n))
	}
	pt := p.c.pt
	for i, slot := range p.slots {
		s := p.entries[p.rowEnt[i]].s
		off := int(slot%pt) * rowF
		copy(s.kp[l.l][slot/pt][off:off+rowF], k[i*rowF:(i+1)*rowF])
		copy(s.vp[l.l][slot/pt][off:off+rowF], v[i*rowF:(i+1)*rowF])
	}
}

// View returns seq's pages for this layer, including this pass's rows; Len is
// the number of slots in use after the pass. A sequence that is not in the pass
// gives an empty KV. It takes no cache-wide lock.
func (l *Layer) View(seq int32) kernels.KV {
	for i := range l.p.entries {
		e := &l.p.entries[i]
		if e.s.id == seq {
			n := l.p.c.pagesFor(e.base + e.count)
			return kernels.KV{
				K:          e.s.kp[l.l][:n],
				V:          e.s.vp[l.l][:n],
				PageTokens: int(l.p.c.pt),
				Len:        int(e.base + e.count),
			}
		}
	}
	return kernels.KV{PageTokens: int(l.p.c.pt)}
}
