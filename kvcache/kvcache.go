// Package kvcache is the paged key/value cache of the transformer layers.
//
// Keys and values of past tokens never change in a causal model, so each step
// stores the new token's K and V and attends over everything stored (the seed's
// "KV cache" section). The cache is a pool of fixed-size pages shared by all
// sequences; a sequence is a list of page ids, so growing, rewinding and sharing
// prefixes move ids around instead of copying rows.
//
// One forward pass over a batch is a Pass: Begin reserves a slot for every row
// of the batch (and every page those slots need, in all layers, up front), the
// layer stages Put their new K/V rows and read a View of each sequence through
// Layer, and End makes the rows part of the sequences' history. Several passes
// over different sequences may be in flight at once from different goroutines,
// as micro-batches move through pipelined layer stages: Put and View touch only
// the pass's own sequences and take no cache-wide lock.
//
// Speculative decoding and beam search use the other operations: Truncate
// rewinds rejected drafts, CommitPath and Commit compact the accepted path of a
// draft tree onto the linear history, and Fork shares a prefix copy-on-write
// (pages are refcounted; a page is copied before a shared page would be
// written).
//
// Draft trees. A batch row may extend its sequence's tail, an earlier row of
// the batch (Batch.Parent), or a slot reserved by an earlier ended pass of the
// same sequence (Batch.ParentSlot), so a tree can be verified in one pass or
// grown over several (SpecExec's draft model expands its best leaves pass
// after pass). A sequence with an open tree has a first tree slot: the slots
// below it are linear history, the one just below it is the root, and every
// slot from it on is a node with a parent slot and an ancestor set, kept
// across passes. A node's mask row sees the linear history and its ancestor
// chain only (kernels.Mask with TreeBase = the first tree slot), and its
// sliding window is measured along the chain. Slots are storage, not
// positions: the caller gives each row its RoPE position (root + depth for a
// tree node). CommitPath keeps one root-to-leaf chain, from whichever passes
// its nodes came, and closes the tree; Truncate at or below the first tree
// slot closes it too, and Fork copies it. While a tree is open, a row without
// a parent is an error: it would see sibling branches as its history.
//
// Memory. Without Options.Budget every page stays in memory. With one, the
// unit is a frame, one layer of one page: a pass reserves one layer of its
// sequences' pages at Begin and pins them layer by layer as the model moves
// through the layers (the first Put or View of a layer); unpinned frames sit
// in a ristretto cache, and those it rejects or evicts live in a spill file
// until a pass or a copy pins them again. See budget.go.
//
// Prefix caching (Options.PrefixCache). Full pages published under a key
// of their tokens (a SHA-256 chain, with a salt for the model, adapter and
// KV type) stay cached when their sequences end, held by a ristretto cache,
// and MapPrefix starts a new sequence with the longest run of them its
// tokens begin with, shared copy-on-write like a fork; an indexed page is
// never written in place. See prefix.go.
//
// Storage. Pages hold float32 values (Options.DType tensor.F32) or IEEE
// binary16 halves (tensor.F16: half the bytes per page, per frame and in the
// spill file). Put rounds F16 rows to nearest even (tensor.F32ToF16), and
// View hands the kernels the halves as they are (kernels.KV.K16/V16); the
// attention kernels widen each one exactly.
package kvcache

import (
	"errors"
	"fmt"
	"sync"

	"github.com/sluicehq/sluice/tensor"
)

// Errors. Wrapped errors name the sequence, row or option involved.
var (
	ErrFull    = errors.New("kvcache: no free page")
	ErrOptions = errors.New("kvcache: invalid options")
	ErrBatch   = errors.New("kvcache: invalid batch")
	ErrBusy    = errors.New("kvcache: sequence has a pass in flight")
	ErrSeqLen  = errors.New("kvcache: sequence limit exceeded")
	ErrRange   = errors.New("kvcache: out of range")
	ErrCommit  = errors.New("kvcache: invalid commit")
)

// DefaultPageTokens is small enough that a short sequence wastes little and a
// page still holds a useful run of contiguous rows for the attention kernel.
const DefaultPageTokens = 16

// Options size a Cache. Layers, KVHeads, HeadDim and MaxTokens are required.
type Options struct {
	Layers, KVHeads, HeadDim int
	PageTokens               int // tokens per page; 0 → 16
	// MaxTokens is the total number of token slots across all sequences (per
	// layer); the pool holds ceil(MaxTokens/PageTokens) pages.
	MaxTokens int
	MaxSeqLen int // per-sequence limit (the model's context); 0 → MaxTokens
	// Window is the sliding-window size in tokens (Mistral); 0 = none. A row at
	// slot s sees slots from max(0, s-Window+1).
	Window int
	// DType is the page element type: tensor.F32 (the zero value) or
	// tensor.F16 (binary16 pages, rounded to nearest even by Put).
	DType tensor.DType
	// Budget bounds the bytes of KV pages resident in memory; 0 = none (every
	// page stays in memory). Under a budget the unit is a frame, one layer of
	// one page; frames beyond it live in a spill file and are read back when
	// a pass or a copy next needs them (see budget.go).
	Budget int64
	// PassFrames is the part of Budget, in frames, that passes in flight may
	// hold pinned (one layer of their sequences' pages each, see
	// Cache.PassNeed) plus two frames for copies; the rest holds unpinned
	// frames in a ristretto cache. 0 = half of the budget's frames.
	PassFrames int
	// SpillDir is where the spill file is made ("" = the system's temp
	// directory). The file is unlinked at once.
	SpillDir string
	// PrefixCache turns on prefix caching (see prefix.go): full pages
	// published under a key of their tokens stay cached when their
	// sequences end, and MapPrefix starts a new sequence with them.
	PrefixCache bool
	// PrefixBytes bounds the bytes of cached pages no sequence holds
	// (ristretto's MaxCost); 0 = Budget when one is set, else the whole
	// pool. Pages in use are not counted: they are pinned outside it.
	PrefixBytes int64
}

// Bytes is the cache size of the seed's formula 2·L·G·d·T·bytes: keys and
// values of tokens tokens, over layers layers of kvHeads heads of headDim.
func Bytes(layers, kvHeads, headDim, tokens, bytesPerValue int) int64 {
	return 2 * int64(layers) * int64(kvHeads) * int64(headDim) * int64(tokens) * int64(bytesPerValue)
}

// Stats is a snapshot of the page pool.
type Stats struct {
	Pages       int // pool size
	PagesInUse  int // referenced by at least one sequence
	PagesFree   int // Pages - PagesInUse - PagesCached
	PagesShared int // referenced by two or more sequences (Fork)
	Sequences   int // sequences with state (including empty forks)
	Tokens      int // sum of Len over sequences
	Passes      int // passes in flight
	// PagesCached are pages no sequence holds that the prefix cache keeps:
	// neither in use nor free, though a pass takes them back when no page
	// is free.
	PagesCached int
	Spill       SpillStats  // the KV budget's counters (zero without one)
	Prefix      PrefixStats // the prefix cache's counters (zero without one)
}

// Cache is a paged KV cache. All methods are safe for concurrent use; see the
// package doc for what may overlap.
type Cache struct {
	o     Options
	rowF  int // floats per token row: KVHeads*HeadDim
	pageF int // values per page: PageTokens*rowF
	// pageW is the float32 words of one page buffer: pageF for F32 pages,
	// ceil(pageF/2) for F16 ones (two halves a word, read through halves).
	pageW int
	f16   bool
	pt    int32

	mu      sync.Mutex
	k, v    [][][]float32 // [layer][page] → page buffer, allocated on first use
	ref     []int32       // per page: number of sequences holding it; 0 = free
	free    []int32       // free page ids (a stack)
	seqs    map[int32]*seqState
	pool    []*Pass      // ended passes for reuse
	spare   []*seqState  // dropped sequences, for reuse by newSeq
	passes  int          // in flight
	scratch []int32      // Commit's slots
	res     *resident    // the KV budget; nil = every page in memory
	px      *prefixIndex // prefix caching; nil = off
	final   SpillStats   // the budget's counters when Close released it
}

// seqState is one sequence. Its fields change only under Cache.mu, and never
// while a pass over the sequence is in flight (except busy/freeing), which is
// what lets Put and View read kp/vp without the lock.
type seqState struct {
	id     int32
	len    int32         // tokens of cached history
	pages  []int32       // page ids in order
	kp, vp [][][]float32 // [layer] → page buffers of pages, for kernels.KV; unused under a budget
	kh, vh [][][]uint16  // the same buffers as halves, for F16 pages (nil for F32)

	busy    *Pass // the pass in flight over this sequence, if any
	freeing bool  // Free was called while busy: drop when the pass ends

	// The last ended pass over this sequence, for Commit.
	lastBase  int32
	lastRows  []int32 // its batch rows for this sequence, ascending
	lastValid bool

	tree treeState

	// Prefix caching: salt is what the sequence was last published or
	// mapped under (when rooted), root its key, keys[i] the key of its
	// page i (the full pages whose contents are known, from the first on).
	rooted bool
	salt   []byte
	root   PrefixKey
	keys   []PrefixKey

	entry int // index into the current Begin's entries (valid while marked)
}

// New validates o and returns an empty cache. Page memory is allocated when a
// page is first used and kept for reuse.
func New(o Options) (*Cache, error) {
	bad := func(field string, v int, want string) error {
		return fmt.Errorf("%w: %s = %d, want %s", ErrOptions, field, v, want)
	}
	switch {
	case o.Layers <= 0:
		return nil, bad("Layers", o.Layers, "> 0")
	case o.KVHeads <= 0:
		return nil, bad("KVHeads", o.KVHeads, "> 0")
	case o.HeadDim <= 0:
		return nil, bad("HeadDim", o.HeadDim, "> 0")
	case o.PageTokens < 0:
		return nil, bad("PageTokens", o.PageTokens, ">= 0")
	case o.MaxTokens <= 0:
		return nil, bad("MaxTokens", o.MaxTokens, "> 0")
	case o.MaxSeqLen < 0:
		return nil, bad("MaxSeqLen", o.MaxSeqLen, ">= 0")
	case o.Window < 0:
		return nil, bad("Window", o.Window, ">= 0")
	case o.DType != tensor.F32 && o.DType != tensor.F16:
		return nil, fmt.Errorf("%w: DType = %v, want f32 or f16 pages", ErrOptions, o.DType)
	case o.Budget < 0:
		return nil, fmt.Errorf("%w: Budget = %d, want >= 0 (0 = none)", ErrOptions, o.Budget)
	case o.PassFrames < 0:
		return nil, bad("PassFrames", o.PassFrames, ">= 0")
	case o.PrefixBytes < 0:
		return nil, fmt.Errorf("%w: PrefixBytes = %d, want >= 0 (0 = the budget, or the pool)", ErrOptions, o.PrefixBytes)
	}
	if o.PageTokens == 0 {
		o.PageTokens = DefaultPageTokens
	}
	if o.MaxSeqLen == 0 || o.MaxSeqLen > o.MaxTokens {
		o.MaxSeqLen = o.MaxTokens
	}
	const maxInt32 = 1<<31 - 1
	if o.MaxTokens > maxInt32-o.PageTokens {
		return nil, bad("MaxTokens", o.MaxTokens, "< 2^31")
	}
	rowF := o.KVHeads * o.HeadDim
	if rowF > maxInt32/o.PageTokens {
		return nil, fmt.Errorf("%w: page of %d tokens × %d floats is too large", ErrOptions, o.PageTokens, rowF)
	}
	pages := (o.MaxTokens + o.PageTokens - 1) / o.PageTokens
	c := &Cache{
		o:     o,
		rowF:  rowF,
		pageF: o.PageTokens * rowF,
		pageW: o.PageTokens * rowF,
		f16:   o.DType == tensor.F16,
		pt:    int32(o.PageTokens),
		k:     make([][][]float32, o.Layers),
		v:     make([][][]float32, o.Layers),
		ref:   make([]int32, pages),
		free:  make([]int32, pages),
		seqs:  make(map[int32]*seqState),
	}
	if c.f16 {
		c.pageW = (c.pageF + 1) / 2
	}
	for l := range c.k {
		c.k[l] = make([][]float32, pages)
		c.v[l] = make([][]float32, pages)
	}
	// Pop order 0, 1, 2, … makes tests and traces easy to read.
	for i := range c.free {
		c.free[i] = int32(pages - 1 - i)
	}
	if o.Budget > 0 {
		r, err := newResident(c, pages)
		if err != nil {
			return nil, err
		}
		c.res = r
	}
	if o.PrefixCache {
		if c.o.PrefixBytes == 0 {
			c.o.PrefixBytes = o.Budget
			if c.o.PrefixBytes == 0 {
				c.o.PrefixBytes = int64(pages) * 8 * int64(c.pageW) * int64(o.Layers)
			}
		}
		px, err := newPrefixIndex(c, pages)
		if err != nil {
			if c.res != nil {
				c.res.close()
			}
			return nil, err
		}
		c.px = px
	}
	return c, nil
}

// Close releases the spill file and the frame cache of a budget; Stats goes
// on reporting the budget's counters. The cache must not be used for passes
// afterwards. Without a budget it does nothing.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.px != nil {
		c.px.close()
	}
	if c.res == nil {
		return nil
	}
	c.final = c.spillStats()
	c.final.Resident = 0
	err := c.res.close()
	c.res = nil
	return err
}

// FrameBytes is the size of one frame, the budget's unit: keys and values
// of one page of one layer.
func (c *Cache) FrameBytes() int64 { return 8 * int64(c.pageW) }

// PassNeed is how many frames per layer a pass needs for sequences that
// will hold the given numbers of tokens after it: under a budget, a pass
// pins one layer of every page of its sequences at a time.
func (c *Cache) PassNeed(tokens ...int) int {
	n := 0
	for _, t := range tokens {
		n += c.pagesFor(int32(t))
	}
	return n
}

// PassRoom is how many frames a new pass may still reserve under the budget
// (see Options.PassFrames); -1 without a budget.
func (c *Cache) PassRoom() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res == nil {
		return -1
	}
	return c.res.passCap - copyFrames - c.res.reserved
}

// MaxPassFrames is the most frames one pass may reserve (PassFrames less
// the two kept for copies); -1 without a budget.
func (c *Cache) MaxPassFrames() int {
	if c.res == nil {
		return -1
	}
	return c.res.passCap - copyFrames
}

// Options returns the options with defaults filled in.
func (c *Cache) Options() Options { return c.o }

// BytesPerToken is the storage of one token's keys and values across all
// layers: 4 bytes a value for F32 pages, 2 for F16 ones.
func (c *Cache) BytesPerToken() int64 {
	return Bytes(c.o.Layers, c.o.KVHeads, c.o.HeadDim, 1, c.elemBytes())
}

// elemBytes is the bytes of one stored value.
func (c *Cache) elemBytes() int {
	if c.f16 {
		return 2
	}
	return 4
}

// Len is the number of cached tokens of seq (0 for an unknown sequence). Rows of
// a pass in flight are not counted until End.
func (c *Cache) Len(seq int32) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s := c.seqs[seq]; s != nil {
		return s.len
	}
	return 0
}

// Stats returns a snapshot of the pool.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drainPrefix()
	st := Stats{Pages: len(c.ref), PagesFree: len(c.free), Sequences: len(c.seqs), Passes: c.passes}
	st.PagesCached = c.avail() - len(c.free)
	st.PagesInUse = st.Pages - st.PagesFree - st.PagesCached
	for _, r := range c.ref {
		if r > 1 {
			st.PagesShared++
		}
	}
	for _, s := range c.seqs {
		st.Tokens += int(s.len)
	}
	st.Spill = c.spillStats()
	st.Prefix = c.prefixStats()
	return st
}

// pagesFor is how many pages n tokens occupy.
func (c *Cache) pagesFor(n int32) int { return int((n + c.pt - 1) / c.pt) }

// takePage pops a free page, allocating its buffers on first use; with none
// free it takes back the least recently idled cached page (the caller has
// checked avail). c.mu held.
func (c *Cache) takePage() int32 {
	if len(c.free) == 0 {
		c.reclaim()
	}
	p := c.free[len(c.free)-1]
	c.free = c.free[:len(c.free)-1]
	c.ref[p] = 1
	if c.k[0][p] == nil && c.res == nil {
		c.setBuffers(p, make([]float32, 2*c.o.Layers*c.pageW))
	}
	return p
}

// setBuffers makes buf (2·Layers·pageW floats) page p's keys and values in
// every layer.
func (c *Cache) setBuffers(p int32, buf []float32) {
	w := c.pageW
	for l := range c.k {
		c.k[l][p] = buf[:w:w]
		c.v[l][p] = buf[w : 2*w : 2*w]
		buf = buf[2*w:]
	}
}

// Reserve allocates the memory of the next n pages the cache hands out (at
// most every page) and writes it once, so that the first passes neither
// allocate nor fault those pages in: llama.cpp allocates and clears its
// whole KV buffer when a context is created, and this is that for the pages
// a first step needs (sched reserves one step's worth), not for the whole
// pool, which stays allocated on first use. Pages that already have memory
// are skipped. Under a budget pages are frames of the resident set and it
// does nothing.
func (c *Cache) Reserve(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.res != nil {
		return
	}
	var want []int32
	for i := len(c.free) - 1; i >= 0 && len(want) < n; i-- {
		if p := c.free[i]; c.k[0][p] == nil {
			want = append(want, p)
		}
	}
	if len(want) == 0 {
		return
	}
	per := 2 * c.o.Layers * c.pageW
	slab := make([]float32, len(want)*per)
	// A fresh span from the OS is not written by make; clearing it faults
	// its pages in now rather than in the first pass's Put.
	clear(slab)
	for i, p := range want {
		c.setBuffers(p, slab[i*per:(i+1)*per:(i+1)*per])
	}
}

// release drops one reference to page p; the last one frees it, or keeps
// it as an idle cached copy if it is in the prefix index. c.mu held.
func (c *Cache) release(p int32) {
	c.ref[p]--
	if c.ref[p] == 0 {
		if c.px != nil && c.px.keyed[p] {
			c.idle(p)
			return
		}
		c.free = append(c.free, p)
		if c.res != nil {
			c.dropFrames(p)
		}
	}
}

// appendPage adds page p at the end of s. c.mu held.
func (c *Cache) appendPage(s *seqState, p int32) {
	s.pages = append(s.pages, p)
	if c.res != nil {
		return
	}
	for l := range s.kp {
		s.kp[l] = append(s.kp[l], c.k[l][p])
		s.vp[l] = append(s.vp[l], c.v[l][p])
		if c.f16 {
			s.kh[l] = append(s.kh[l], c.halves(c.k[l][p]))
			s.vh[l] = append(s.vh[l], c.halves(c.v[l][p]))
		}
	}
}

// setPage replaces the i-th page of s by p. c.mu held.
func (c *Cache) setPage(s *seqState, i int, p int32) {
	s.pages[i] = p
	if c.res != nil {
		return
	}
	for l := range s.kp {
		s.kp[l][i] = c.k[l][p]
		s.vp[l][i] = c.v[l][p]
		if c.f16 {
			s.kh[l][i] = c.halves(c.k[l][p])
			s.vh[l][i] = c.halves(c.v[l][p])
		}
	}
}

// shrink releases the pages of s past the first n. c.mu held.
func (c *Cache) shrink(s *seqState, n int) {
	for i := n; i < len(s.pages); i++ {
		c.release(s.pages[i])
	}
	s.pages = s.pages[:n]
	if c.res != nil {
		return
	}
	for l := range s.kp {
		clear(s.kp[l][n:])
		clear(s.vp[l][n:])
		s.kp[l] = s.kp[l][:n]
		s.vp[l] = s.vp[l][:n]
		if c.f16 {
			clear(s.kh[l][n:])
			clear(s.vh[l][n:])
			s.kh[l] = s.kh[l][:n]
			s.vh[l] = s.vh[l][:n]
		}
	}
}

// unshare makes page i of s private, copying it if another sequence holds it.
// The caller has checked that a free page exists. Under a budget the copy
// goes layer by layer through pinned frames and may fail reading one back;
// then page i is left shared as it was. c.mu held.
func (c *Cache) unshare(s *seqState, i int) error {
	old := s.pages[i]
	if !c.shared(s, i) {
		return nil
	}
	p := c.takePage()
	for l := range c.k {
		if c.res == nil {
			copy(c.k[l][p], c.k[l][old])
			copy(c.v[l][p], c.v[l][old])
		} else if err := c.copyFrame(l, old, p); err != nil {
			c.release(p)
			return fmt.Errorf("kvcache: copy-on-write of page %d of sequence %d: %w", i, s.id, err)
		}
	}
	c.setPage(s, i, p)
	c.release(old)
	return nil
}

// shared reports whether page i of s must be copied before it is written:
// another sequence holds it, or it is in the prefix index, whose pages are
// never written (their key names their contents). c.mu held.
func (c *Cache) shared(s *seqState, i int) bool {
	p := s.pages[i]
	return c.ref[p] > 1 || (c.px != nil && c.px.keyed[p])
}

// newSeq creates the state of seq. c.mu held.
func (c *Cache) newSeq(seq int32) *seqState {
	var s *seqState
	if k := len(c.spare) - 1; k >= 0 {
		// A dropped sequence's slices keep their capacity: a new sequence
		// as long as an earlier one allocates nothing.
		s, c.spare = c.spare[k], c.spare[:k]
		t := s.tree
		t.close()
		*s = seqState{id: seq, pages: s.pages[:0], kp: s.kp, vp: s.vp, kh: s.kh, vh: s.vh, lastRows: s.lastRows[:0], tree: t, salt: s.salt[:0], keys: s.keys[:0], entry: -1}
	} else {
		s = &seqState{id: seq, kp: make([][][]float32, c.o.Layers), vp: make([][][]float32, c.o.Layers), tree: treeState{start: -1}, entry: -1}
		if c.f16 {
			s.kh, s.vh = make([][][]uint16, c.o.Layers), make([][][]uint16, c.o.Layers)
		}
	}
	c.seqs[seq] = s
	return s
}

// drop releases every page of s and forgets it. c.mu held.
func (c *Cache) drop(s *seqState) {
	c.shrink(s, 0)
	delete(c.seqs, s.id)
	c.spare = append(c.spare, s)
}

// Truncate rewinds seq to its first n tokens (rejected drafts) and frees the
// whole pages past n. Truncating an unknown sequence to 0 is a no-op. A
// draft tree is trimmed to its slots below n, and closed when n is at or
// below its first slot.
func (c *Cache) Truncate(seq, n int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[seq]
	if s == nil {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("%w: truncate sequence %d to %d tokens: sequence is empty", ErrRange, seq, n)
	}
	if s.busy != nil {
		return fmt.Errorf("%w: truncate sequence %d", ErrBusy, seq)
	}
	if n < 0 || n > s.len {
		return fmt.Errorf("%w: truncate sequence %d to %d tokens, want 0..%d", ErrRange, seq, n, s.len)
	}
	s.len = n
	s.lastValid = false
	c.trimKeys(s, n)
	if t := &s.tree; t.open() {
		if n <= t.start {
			t.close()
		} else {
			t.trim(n - t.start)
		}
	}
	c.shrink(s, c.pagesFor(n))
	return nil
}

// Fork makes dst share the first n tokens of src copy-on-write: dst's pages are
// src's (refcounted) and whichever sequence later writes into a shared page
// copies it first. Whatever dst held before is dropped. Fork itself copies no
// K/V data and needs no free page. If src has an open draft tree, dst gets a
// copy of the part of it below n (its own, independent of src's), so a fork
// can go on growing or commit the tree.
func (c *Cache) Fork(src, dst, n int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if src == dst {
		return fmt.Errorf("%w: fork of sequence %d onto itself", ErrRange, src)
	}
	s := c.seqs[src]
	var srcLen int32
	if s != nil {
		srcLen = s.len
		if s.busy != nil {
			return fmt.Errorf("%w: fork from sequence %d", ErrBusy, src)
		}
	}
	if n < 0 || n > srcLen {
		return fmt.Errorf("%w: fork %d tokens of sequence %d, want 0..%d", ErrRange, n, src, srcLen)
	}
	d := c.seqs[dst]
	if d != nil && d.busy != nil {
		return fmt.Errorf("%w: fork into sequence %d", ErrBusy, dst)
	}
	if d == nil {
		d = c.newSeq(dst)
	} else {
		c.shrink(d, 0)
	}
	d.len = n
	d.lastValid = false
	if s != nil {
		d.tree.copyFrom(&s.tree, n-s.tree.start)
	} else {
		d.tree.close()
	}
	d.keys = d.keys[:0]
	if s != nil {
		d.rooted, d.salt, d.root = s.rooted, append(d.salt[:0], s.salt...), s.root
		d.keys = append(d.keys, s.keys[:min(len(s.keys), int(n/c.pt))]...)
	}
	for i := range c.pagesFor(n) {
		p := s.pages[i]
		c.hold(p)
		c.appendPage(d, p)
	}
	return nil
}

// Free drops a finished sequence and returns its pages to the pool. If a pass
// over seq is in flight, the drop happens when that pass ends or aborts.
func (c *Cache) Free(seq int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[seq]
	if s == nil {
		return
	}
	if s.busy != nil {
		s.freeing = true
		return
	}
	c.drop(s)
}
