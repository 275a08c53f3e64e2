package kvcache

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/tensor"
)

func mustNew(t testing.TB, o Options) *Cache {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return c
}

// tagRow is the deterministic K (and, negated, V) row written for token tag at
// layer l: every element distinct and exact in float32 for tag < 2^16. Under
// tagF16 (the tests of F16 pages) the elements are binary16 values instead,
// distinct for tag < 3968, layers < 2 and rows of ≤ 8 values (the random op
// tests' shape), so the cache's rounding keeps them exactly.
func tagRow(dst []float32, tag, l int) {
	if tagF16 && tag >= 3968 {
		panic(fmt.Sprintf("tagRow: tag %d has no binary16 code (want < 3968)", tag))
	}
	for j := range dst {
		if tagF16 {
			dst[j] = tensor.F16ToF32(f16Code((tag*2+l%2)*8 + j%8))
			continue
		}
		dst[j] = float32(tag*256 + l*16 + j)
	}
}

// tagF16 makes tagRow write binary16 values (set by the F16 variants of the
// tests, which do not run in parallel).
var tagF16 bool

// f16Code is the n-th finite binary16 value: the positive ones, then the
// negative ones (n < 2·0x7c00).
func f16Code(n int) uint16 {
	if n < 0x7c00 {
		return uint16(n)
	}
	return 0x8000 | uint16(n-0x7c00)
}

// tagOf is the tag of a row written by tagRow.
func tagOf(k0 float32) int {
	if tagF16 {
		h := tensor.F32ToF16(k0)
		n := int(h)
		if h&0x8000 != 0 {
			n = 0x7c00 + int(h&0x7fff)
		}
		return n / 16
	}
	return int(k0) / 256
}

// withF16 runs f with tagRow writing binary16 values.
func withF16(f func()) {
	tagF16 = true
	defer func() { tagF16 = false }()
	f()
}

// putTags writes, for every layer, the rows of tags (one tag per batch row).
func putTags(t testing.TB, c *Cache, p *Pass, tags []int) {
	t.Helper()
	rowF := c.o.KVHeads * c.o.HeadDim
	k := make([]float32, len(tags)*rowF)
	v := make([]float32, len(tags)*rowF)
	for l := range c.o.Layers {
		for i, tag := range tags {
			tagRow(k[i*rowF:(i+1)*rowF], tag, l)
			for j := range rowF {
				v[i*rowF+j] = -k[i*rowF+j]
			}
		}
		p.Layer(l).Put(k, v)
	}
}

// readKV flattens the first kv.Len rows of a paged KV.
func readKV(kv kernels.KV, rowF int) (k, v [][]float32) {
	widen := func(h []uint16) []float32 {
		r := make([]float32, len(h))
		for i, x := range h {
			r[i] = tensor.F16ToF32(x)
		}
		return r
	}
	for j := range kv.Len {
		pg, off := j/kv.PageTokens, (j%kv.PageTokens)*rowF
		if kv.F16() {
			k = append(k, widen(kv.K16[pg][off:off+rowF]))
			v = append(v, widen(kv.V16[pg][off:off+rowF]))
			continue
		}
		k = append(k, slices.Clone(kv.K[pg][off:off+rowF]))
		v = append(v, slices.Clone(kv.V[pg][off:off+rowF]))
	}
	return k, v
}

// decodeTags turns rows back into their tags, checking each row is exactly a
// tagRow of layer l (and V its negation).
func decodeTags(t testing.TB, k, v [][]float32, l int) []int {
	t.Helper()
	tags := make([]int, len(k))
	for i := range k {
		tag := tagOf(k[i][0])
		want := make([]float32, len(k[i]))
		tagRow(want, tag, l)
		if !slices.Equal(want, k[i]) {
			t.Fatalf("layer %d slot %d: K row %v is not a written row", l, i, k[i])
		}
		for j := range want {
			if v[i][j] != -want[j] {
				t.Fatalf("layer %d slot %d: V row %v does not match K", l, i, v[i])
			}
		}
		tags[i] = tag
	}
	return tags
}

// seqTags reads the committed history of seq directly from the cache's state
// (tests are in-package), checking every layer holds the same tags.
func seqTags(t testing.TB, c *Cache, seq int32) []int {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.seqs[seq]
	if s == nil {
		return nil
	}
	var first []int
	for l := range c.o.Layers {
		kv := kernels.KV{K: s.kp[l], V: s.vp[l], PageTokens: int(c.pt), Len: int(s.len)}
		if c.f16 {
			kv.K16, kv.V16 = s.kh[l], s.vh[l]
		}
		if c.res != nil {
			kv.K, kv.V = budgetPages(t, c, s, l)
			if c.f16 {
				kv.K16, kv.V16 = nil, nil
				for i := range kv.K {
					kv.K16, kv.V16 = append(kv.K16, c.halves(kv.K[i])), append(kv.V16, c.halves(kv.V[i]))
				}
			}
		}
		k, v := readKV(kv, c.rowF)
		tags := decodeTags(t, k, v, l)
		if l == 0 {
			first = tags
		} else if !slices.Equal(first, tags) {
			t.Fatalf("sequence %d: layer %d holds %v, layer 0 holds %v", seq, l, tags, first)
		}
	}
	if first == nil {
		first = []int{}
	}
	return first
}

// budgetPages copies layer l of the history pages of s under a budget,
// pinning each frame for the copy. c.mu held.
func budgetPages(t testing.TB, c *Cache, s *seqState, l int) (k, v [][]float32) {
	t.Helper()
	for _, p := range s.pages[:c.pagesFor(s.len)] {
		if err := c.pin(l, p, false); err != nil {
			t.Fatalf("sequence %d layer %d page %d: %v", s.id, l, p, err)
		}
		k = append(k, slices.Clone(c.k[l][p]))
		v = append(v, slices.Clone(c.v[l][p]))
		c.unpin(l, p)
	}
	return k, v
}

// checkBudget verifies the KV budget's bookkeeping: at most Frames frames in
// memory and at most PassFrames of them pinned; every frame of a page in
// use by an idle sequence is in memory or in the spill file (none lost);
// freed pages hold nothing; the counts of frames in memory and in the file
// match the states. c.mu held.
func checkBudget(t testing.TB, c *Cache) {
	t.Helper()
	r := c.res
	busy := make([]bool, len(c.ref))
	for _, s := range c.seqs {
		if s.busy != nil {
			for _, p := range s.pages {
				busy[p] = true
			}
		}
	}
	inMem, inFile, pinned := 0, 0, 0
	for p := range c.ref {
		for l := range c.o.Layers {
			id := r.id(l, int32(p))
			st := r.state[id]
			switch st {
			case framePinned, frameCached:
				inMem++
				if st == framePinned {
					pinned++
				}
				if r.buf[id] == nil || &c.k[l][p][0] != &r.buf[id][0] {
					t.Fatalf("layer %d page %d is in memory without its buffer", l, p)
				}
			case frameSpilled:
				inFile++
				if !r.sp.has(int32(l), int32(p)) {
					t.Fatalf("layer %d page %d is spilled but the file does not hold it: lost", l, p)
				}
			case frameEmpty:
				if c.ref[p] > 0 && !busy[p] {
					t.Fatalf("layer %d page %d of an idle sequence holds no data: lost", l, p)
				}
			}
			if st != framePinned && r.pins[id] != 0 {
				t.Fatalf("layer %d page %d: %d pins in state %d", l, p, r.pins[id], st)
			}
			if c.isIdle(int32(p)) {
				if st == frameEmpty || st == framePinned {
					t.Fatalf("idle cached page %d: layer %d in state %d: lost or pinned", p, l, st)
				}
			} else if c.ref[p] == 0 && (st != frameEmpty || r.sp.has(int32(l), int32(p))) {
				t.Fatalf("free page %d: layer %d in state %d (in file %v)", p, l, st, r.sp.has(int32(l), int32(p)))
			}
		}
	}
	if inMem != r.inMem || inFile != r.inFile {
		t.Fatalf("counted %d frames in memory and %d in the file, bookkeeping says %d and %d", inMem, inFile, r.inMem, r.inFile)
	}
	if inMem > r.frames || pinned > r.passCap || r.allocated > r.frames {
		t.Fatalf("%d frames in memory (%d pinned, %d buffers made) over a budget of %d (%d for passes)", inMem, pinned, r.allocated, r.frames, r.passCap)
	}
	if r.reserved > r.passCap-copyFrames {
		t.Fatalf("passes reserved %d frames, budget lets them %d", r.reserved, r.passCap-copyFrames)
	}
}

// checkInvariants verifies the page bookkeeping: refcounts equal the number of
// sequences holding each page, the free list holds exactly the unreferenced
// pages once, every sequence holds pagesFor(len) pages (more only while a
// pass is in flight), and its per-layer views point at its pages' buffers.
func checkInvariants(t testing.TB, c *Cache) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	count := make([]int32, len(c.ref))
	for id, s := range c.seqs {
		if s.id != id {
			t.Fatalf("sequence map key %d holds state of %d", id, s.id)
		}
		want := c.pagesFor(s.len)
		if s.busy != nil {
			for _, e := range s.busy.entries {
				if e.s == s {
					want = c.pagesFor(e.base + e.count)
				}
			}
		}
		if len(s.pages) != want {
			t.Fatalf("sequence %d: len %d holds %d pages, want %d", id, s.len, len(s.pages), want)
		}
		for i, p := range s.pages {
			count[p]++
			if c.res != nil {
				continue
			}
			for l := range c.o.Layers {
				if &s.kp[l][i][0] != &c.k[l][p][0] || &s.vp[l][i][0] != &c.v[l][p][0] {
					t.Fatalf("sequence %d layer %d page %d: view does not point at page %d", id, l, i, p)
				}
			}
		}
	}
	for _, s := range c.seqs {
		if s.busy == nil {
			continue
		}
		for _, e := range s.busy.entries {
			if e.s == s && e.cow >= 0 {
				count[e.cow]++ // held by the pass until End or Abort
			}
		}
	}
	for id, s := range c.seqs {
		checkTree(t, id, s)
	}
	if c.res != nil {
		checkBudget(t, c)
	}
	if len(c.free) > len(c.ref) {
		t.Fatalf("%d free pages in a pool of %d", len(c.free), len(c.ref))
	}
	st := Stats{Pages: len(c.ref), PagesFree: len(c.free)}
	for p := range c.ref {
		if count[p] > 0 || c.isIdle(int32(p)) {
			st.PagesInUse++
		}
	}
	if c.px != nil {
		checkPrefixIndex(t, c)
	}
	if st.PagesInUse+st.PagesFree != st.Pages {
		t.Fatalf("pages lost: %d in use + %d free != %d", st.PagesInUse, st.PagesFree, st.Pages)
	}
	inFree := make([]bool, len(c.ref))
	for _, p := range c.free {
		if inFree[p] {
			t.Fatalf("page %d is twice in the free list", p)
		}
		inFree[p] = true
	}
	for p := range c.ref {
		if c.ref[p] != count[p] {
			t.Fatalf("page %d: refcount %d, held by %d sequences", p, c.ref[p], count[p])
		}
		if inFree[p] != (count[p] == 0 && !c.isIdle(int32(p))) {
			t.Fatalf("page %d: in free list %v, held by %d sequences, idle cached %v", p, inFree[p], count[p], c.isIdle(int32(p)))
		}
	}
}

// linear builds a batch of n linear rows for seq starting at position pos.
func linear(seq int32, pos, n int) *input.Batch {
	b := &input.Batch{}
	for i := range n {
		b.Add(int32(i), int32(pos+i), seq, true)
	}
	return b
}

// visibility renders a mask as rows of 'x' (visible) and '.' over slots
// [0, width), one string per row, for literal comparison.
func visibility(m *kernels.Mask, rows, width int) []string {
	out := make([]string, rows)
	for i := range rows {
		b := make([]byte, width)
		for j := range width {
			b[j] = '.'
			if m.Visible(i, int32(j)) {
				b[j] = 'x'
			}
		}
		out[i] = string(b)
	}
	return out
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func tagsRange(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func (r Run) String() string { return fmt.Sprintf("{seq %d rows %d+%d}", r.Seq, r.Start, r.Rows) }

// checkTree verifies a sequence's draft-tree state: one node per slot from
// its first slot to Len, parents below their children and at or above the
// root, each ancestor set its parent's plus itself, each chain position its
// parent's plus one. c.mu held.
func checkTree(t testing.TB, id int32, s *seqState) {
	t.Helper()
	tr := &s.tree
	if !tr.open() {
		if tr.nodes() != 0 || len(tr.bits) != 0 {
			t.Fatalf("sequence %d: closed tree holds %d nodes, %d words", id, tr.nodes(), len(tr.bits))
		}
		return
	}
	if tr.start < 1 || tr.start >= s.len || tr.nodes() != s.len-tr.start {
		t.Fatalf("sequence %d: tree from slot %d with %d nodes, Len %d", id, tr.start, tr.nodes(), s.len)
	}
	if len(tr.pos) != len(tr.par) || len(tr.off) != len(tr.par) {
		t.Fatalf("sequence %d: tree arrays %d par, %d pos, %d off", id, len(tr.par), len(tr.pos), len(tr.off))
	}
	words := 0
	for k := range tr.nodes() {
		slot, par := tr.start+k, tr.par[k]
		if par < tr.start-1 || par >= slot {
			t.Fatalf("sequence %d: tree slot %d has parent %d", id, slot, par)
		}
		want := make([]uint64, k/64+1)
		wantPos := tr.start
		if par >= tr.start {
			copy(want, tr.anc(par-tr.start))
			wantPos = tr.pos[par-tr.start] + 1
		}
		want[k/64] |= 1 << (uint(k) % 64)
		if !slices.Equal(tr.anc(k), want) || tr.pos[k] != wantPos {
			t.Fatalf("sequence %d: tree slot %d ancestors %b pos %d, want %b pos %d", id, slot, tr.anc(k), tr.pos[k], want, wantPos)
		}
		words += int(k/64 + 1)
	}
	if len(tr.bits) != words {
		t.Fatalf("sequence %d: tree holds %d words, want %d", id, len(tr.bits), words)
	}
}
