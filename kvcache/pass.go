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
	// tstart is the first slot of the sequence's draft tree after this pass
	// (-1: none); opened says this pass opens it.
	tstart int32
	opened bool
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
	pslot   []int32 // per row: its parent's slot if it is a tree node, else -1
	mask    kernels.Mask
	anc     [][]uint64 // per tree row: its ancestor set (nil for other rows)
	ancBuf  []uint64
	treeBuf []uint64 // mask rows that differ from anc (sliding window)
	tree    [][]uint64
	runs    []Run
	runMask []kernels.Mask
	layers  []Layer

	// Under a budget: the frames reserved at Begin, the layer whose frames
	// are pinned (-1: none), per entry that layer's page buffers, the pages
	// pinned, and the first error pinning one (End then aborts).
	need     int
	cur      int
	bk, bv   [][][]float32
	bkh, bvh [][][]uint16 // bk, bv as halves, for F16 pages
	pinned   []int32
	err      error
	poison   []float32 // stands in for a frame that could not be read back
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
// and the same sequence as p. b.ParentSlot may be nil (all -1); a row with
// ParentSlot q ≥ 0 (and Parent -1) is a draft-tree node whose parent is slot q
// of its sequence, reserved by an earlier ended pass: q must be the root (the
// slot just below the open tree) or a tree slot, or, when the sequence has no
// open tree, its last slot, and the tree opens at this pass's first slot.
//
// Draft trees. A pass opens a tree over a sequence when one of its rows has a
// ParentSlot or an in-batch Parent other than the row just before it; the
// tree's first slot is the lowest slot whose parent is below the branch, so
// that the rows before it (plain or chained rows) stay linear history and the
// slot just below it is the root. Once a tree is open, in that pass or an
// earlier one, every row of the sequence at or above its first slot must have
// a parent (a Parent row or a ParentSlot): a row without one is ErrBatch,
// because seeing "everything before it" would include sibling branches. The
// tree stays open over later passes until CommitPath, Commit or a Truncate at
// or below its first slot closes it.
//
// The batch is only read during Begin.
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
	if b.ParentSlot != nil && len(b.ParentSlot) != n {
		return nil, fmt.Errorf("%w: %d rows in Seq but %d in ParentSlot", ErrBatch, n, len(b.ParentSlot))
	}
	if len(b.Tokens) != 0 && len(b.Tokens) != n {
		return nil, fmt.Errorf("%w: %d rows in Seq but %d in Tokens", ErrBatch, n, len(b.Tokens))
	}
	if len(b.Positions) != n {
		return nil, fmt.Errorf("%w: %d rows in Seq but %d in Positions", ErrBatch, n, len(b.Positions))
	}
	for i := range n {
		if b.Seq[i] < 0 {
			return nil, fmt.Errorf("%w: row %d has sequence %d, want >= 0", ErrBatch, i, b.Seq[i])
		}
		par := int32(-1)
		if b.Parent != nil {
			par = b.Parent[i]
		}
		if par < -1 || par >= int32(i) {
			return nil, fmt.Errorf("%w: row %d has parent %d, want -1 or an earlier row", ErrBatch, i, par)
		} else if par >= 0 && b.Seq[par] != b.Seq[i] {
			return nil, fmt.Errorf("%w: row %d (sequence %d) has parent row %d of sequence %d", ErrBatch, i, b.Seq[i], par, b.Seq[par])
		}
		if b.ParentSlot == nil {
			continue
		}
		if q := b.ParentSlot[i]; q < -1 {
			return nil, fmt.Errorf("%w: row %d has ParentSlot %d, want -1 or a slot", ErrBatch, i, q)
		} else if q >= 0 && par >= 0 {
			return nil, fmt.Errorf("%w: row %d has both parent row %d and ParentSlot %d, want at most one", ErrBatch, i, par, q)
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
	p.pslot = resize(p.pslot, n)
	p.mask.Lo = resize(p.mask.Lo, n)
	p.mask.Hi = resize(p.mask.Hi, n)
	p.mask.TreeBase = resize(p.mask.TreeBase, n)
	p.mask.Tree = nil
	p.need, p.cur, p.err = 0, -1, nil
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
	// Place rows (pass-local: nothing of the cache changes yet).
	var start int32
	for i := range p.entries {
		e := &p.entries[i]
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
	for i := range p.entries {
		if err := p.planTree(b, &p.entries[i]); err != nil {
			return fail(err)
		}
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
	c.drainPrefix()
	if need > c.avail() {
		return fail(fmt.Errorf("%w: batch of %d rows needs %d pages, %d of %d free", ErrFull, len(b.Seq), need, c.avail(), len(c.ref)))
	}
	if r := c.res; r != nil {
		frames := 0
		for _, e := range p.entries {
			frames += c.pagesFor(e.base + e.count)
		}
		if room := r.passCap - copyFrames - r.reserved; frames > room {
			return fail(fmt.Errorf("%w: batch of %d rows needs %d KV frames per layer (%d bytes) under the budget of %d bytes, which lets passes pin %d (%d reserved by passes in flight)",
				ErrFull, len(b.Seq), frames, int64(frames)*r.frameBytes(), c.o.Budget, r.passCap-copyFrames, r.reserved))
		}
		r.reserved += frames
		p.need = frames
	}

	// Commit point: nothing below fails.
	for i := range p.entries {
		e := &p.entries[i]
		e.s.entry = -1
		e.s.busy = p
		e.cow = -1
		if e.base%c.pt != 0 && c.shared(e.s, e.pages-1) {
			// Copy the shared tail page, but keep holding the original until
			// End so that Abort can put it back.
			old := e.s.pages[e.pages-1]
			c.hold(old)
			if err := c.unshare(e.s, e.pages-1); err != nil {
				// Under a budget a frame could not be read back: the
				// pass goes on sharing the page and fails at End.
				c.release(old)
				if p.err == nil {
					p.err = err
				}
			} else {
				e.cow = old
			}
		}
		for range c.pagesFor(e.base+e.count) - e.pages {
			c.appendPage(e.s, c.takePage())
		}
	}
	return nil
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
	if p.err != nil {
		err := p.err
		p.abort()
		return err
	}
	p.live = false
	p.unpinLayer()
	for i := range p.entries {
		e := &p.entries[i]
		s := e.s
		s.busy = nil
		if e.cow >= 0 {
			c.release(e.cow)
		}
		s.len = e.base + e.count
		if e.tstart >= 0 {
			t := &s.tree
			if e.opened {
				t.close()
				t.start = e.tstart
			}
			for _, r := range p.order[e.start : e.start+e.count] {
				if p.pslot[r] >= 0 {
					t.add(p.pslot[r], p.vpos[r], p.anc[r])
				}
			}
		}
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
	p.abort()
}

// abort is Abort with c.mu held and p live.
func (p *Pass) abort() {
	c := p.c
	p.live = false
	p.unpinLayer()
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
// cache-wide lock, except under a budget when it moves the pass to this
// layer (see Layer.pages). It panics if the lengths do not match the batch (a
// programming error, like a bad copy bound).
func (l *Layer) Put(k, v []float32) {
	p := l.p
	rowF := p.c.rowF
	if n := len(p.slots) * rowF; len(k) != n || len(v) != n {
		panic(fmt.Sprintf("kvcache: Layer(%d).Put: got %d keys and %d values, want %d rows × %d = %d", l.l, len(k), len(v), len(p.slots), rowF, n))
	}
	pt := p.c.pt
	if p.c.f16 {
		for i, slot := range p.slots {
			_, _, kh, vh := l.pages(int(p.rowEnt[i]))
			off := int(slot%pt) * rowF
			roundF16(kh[slot/pt][off:off+rowF], k[i*rowF:(i+1)*rowF])
			roundF16(vh[slot/pt][off:off+rowF], v[i*rowF:(i+1)*rowF])
		}
		return
	}
	for i, slot := range p.slots {
		kp, vp, _, _ := l.pages(int(p.rowEnt[i]))
		off := int(slot%pt) * rowF
		copy(kp[slot/pt][off:off+rowF], k[i*rowF:(i+1)*rowF])
		copy(vp[slot/pt][off:off+rowF], v[i*rowF:(i+1)*rowF])
	}
}

// roundF16 stores src rounded to binary16, to nearest even: the rounding
// model/ref applies to its cache (tensor.F32ToF16's bits; kernels.RoundF16
// gives them with F16C where the CPU has it), so the two stay bit-identical.
func roundF16(dst []uint16, src []float32) { kernels.RoundF16(dst, src) }

// pages is entry i's page buffers for this layer (and, for F16 pages, the
// same buffers as halves). Under a budget they are
// the pinned frames of the layer the pass is at; moving to another layer
// unpins the last one's and pins (reading back where needed) this one's.
// It takes the cache's lock only when the layer changes.
func (l *Layer) pages(i int) (k, v [][]float32, kh, vh [][]uint16) {
	p := l.p
	if p.c.res == nil {
		s := p.entries[i].s
		if p.c.f16 {
			return s.kp[l.l], s.vp[l.l], s.kh[l.l], s.vh[l.l]
		}
		return s.kp[l.l], s.vp[l.l], nil, nil
	}
	if p.cur != l.l {
		p.pinLayer(l.l)
	}
	if p.c.f16 {
		return p.bk[i], p.bv[i], p.bkh[i], p.bvh[i]
	}
	return p.bk[i], p.bv[i], nil, nil
}

// pinLayer unpins the frames of the layer the pass is at and pins layer l's
// for every page of its sequences. A frame that cannot be read back is
// replaced by zeros and fails the pass at End.
func (p *Pass) pinLayer(l int) {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	p.unpinLayer()
	p.cur = l
	if cap(p.bk) < len(p.entries) {
		p.bk = make([][][]float32, len(p.entries))
		p.bv = make([][][]float32, len(p.entries))
	}
	p.bk, p.bv = p.bk[:len(p.entries)], p.bv[:len(p.entries)]
	if c.f16 {
		if cap(p.bkh) < len(p.entries) {
			p.bkh = make([][][]uint16, len(p.entries))
			p.bvh = make([][][]uint16, len(p.entries))
		}
		p.bkh, p.bvh = p.bkh[:len(p.entries)], p.bvh[:len(p.entries)]
	}
	for i := range p.entries {
		e := &p.entries[i]
		n := c.pagesFor(e.base + e.count)
		bk, bv := p.bk[i][:0], p.bv[i][:0]
		for j, pg := range e.s.pages[:n] {
			// Pages from the one holding the first new row on are written.
			write := int32(j) >= e.base/c.pt
			err := p.err // after a failure nothing more is pinned: the pass only runs to End
			if err == nil {
				if err = c.pin(l, pg, write); err != nil {
					p.err = fmt.Errorf("kvcache: layer %d of sequence %d: %w", l, e.s.id, err)
				}
			}
			if err != nil {
				if p.poison == nil {
					p.poison = make([]float32, c.pageW)
				}
				clear(p.poison)
				bk, bv = append(bk, p.poison), append(bv, p.poison)
				continue
			}
			p.pinned = append(p.pinned, pg)
			bk, bv = append(bk, c.k[l][pg]), append(bv, c.v[l][pg])
		}
		p.bk[i], p.bv[i] = bk, bv
		if c.f16 {
			bh, vh := p.bkh[i][:0], p.bvh[i][:0]
			for j := range bk {
				bh, vh = append(bh, c.halves(bk[j])), append(vh, c.halves(bv[j]))
			}
			p.bkh[i], p.bvh[i] = bh, vh
		}
	}
}

// unpinLayer unpins what pinLayer pinned and gives back the reservation
// once the pass is over. c.mu held.
func (p *Pass) unpinLayer() {
	c := p.c
	if c.res == nil {
		return
	}
	for _, pg := range p.pinned {
		c.unpin(p.cur, pg)
	}
	p.pinned = p.pinned[:0]
	for i := range p.bk {
		clear(p.bk[i])
		clear(p.bv[i])
	}
	for i := range p.bkh {
		clear(p.bkh[i])
		clear(p.bvh[i])
	}
	p.cur = -1
	if !p.live {
		c.res.reserved -= p.need
		p.need = 0
	}
}

// View returns seq's pages for this layer, including this pass's rows; Len is
// the number of slots in use after the pass. A sequence that is not in the pass
// gives an empty KV. It takes no cache-wide lock, except under a budget when
// it moves the pass to this layer. Under a budget the pages are valid until
// the pass moves to another layer or ends.
func (l *Layer) View(seq int32) kernels.KV {
	for i := range l.p.entries {
		e := &l.p.entries[i]
		if e.s.id == seq {
			n := l.p.c.pagesFor(e.base + e.count)
			kp, vp, kh, vh := l.pages(i)
			if l.p.c.f16 {
				return kernels.KV{K16: kh[:n], V16: vh[:n], PageTokens: int(l.p.c.pt), Len: int(e.base + e.count)}
			}
			return kernels.KV{
				K:          kp[:n],
				V:          vp[:n],
				PageTokens: int(l.p.c.pt),
				Len:        int(e.base + e.count),
			}
		}
	}
	return kernels.KV{PageTokens: int(l.p.c.pt)}
}
