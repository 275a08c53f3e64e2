package kvcache

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/tensor"
)

// model is the obvious reference for the cache: each sequence is a flat list
// of tags, an open draft tree is its first slot and a parent slot per tree
// slot, and a pass is a list of rows with parents.
type model struct {
	seqs   map[int32][]int
	last   map[int32]lastPass // commit records
	busy   map[int32]bool
	trees  map[int32]*refTree
	window int32
}

// refTree is an open draft tree: slots [start, start+len(par)) with parents.
type refTree struct {
	start int
	par   []int
}

func (rt *refTree) clone(n int) *refTree {
	if rt == nil || n <= rt.start {
		return nil
	}
	return &refTree{start: rt.start, par: slices.Clone(rt.par[:n-rt.start])}
}

type lastPass struct {
	base int
	rows []int32 // batch rows of the sequence, ascending
	tags map[int32]int
}

type flight struct {
	p    *Pass
	b    *input.Batch
	tags []int
	base map[int32]int
	plan *refPlan
}

// refPlan is the reference's reading of a batch: per row its slot and its
// parent slot if it is a tree node (else -1), per sequence its tree start
// after the pass (absent: no tree) and whether the pass opens it.
type refPlan struct {
	slot, pslot []int
	start       map[int32]int
	opened      map[int32]bool
}

// byteReader hands out fuzz bytes, then zeros.
type byteReader struct{ b []byte }

func (r *byteReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

// FuzzCacheOps runs a random program of Begin/Put/End/Abort/Truncate/Fork/
// Commit/CommitPath/Free against the cache and against the flat reference
// model, checking after every step that histories, views, masks, errors and
// page bookkeeping agree. Several passes may be in flight at once; batches mix
// plain rows, in-batch parents and parent slots of earlier passes, so draft
// trees grow over several passes.
func FuzzCacheOps(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 3, 0, 0, 0, 1, 0, 7})
	f.Add([]byte{1, 3, 0, 2, 5, 1, 0, 0, 0, 2, 1, 1, 0, 0, 3, 0, 4, 7, 0, 0, 9, 9, 1, 0, 5, 0, 1, 7})
	f.Add([]byte{2, 1, 0, 3, 4, 2, 1, 2, 3, 0, 0, 4, 0, 1, 6, 1, 0, 0, 1, 1, 4, 2, 1, 0, 5, 7, 0, 0, 3})
	f.Add([]byte{3, 4, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 1, 3, 7, 0, 1, 1, 0, 2, 5, 5, 2, 1, 7})
	// A prompt, then two passes of parent-slot children, then CommitPath.
	f.Add([]byte{0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 1, 0,
		0, 0, 0, 2, 4, 4, 4, 1, 1, 0,
		0, 0, 0, 3, 4, 5, 4, 7, 2, 2, 1, 2, 0,
		8, 0, 1, 1, 0, 7, 0})
	f.Fuzz(runCacheOps)
}

// TestCacheOpsRandom runs FuzzCacheOps's program on seeded random inputs, so
// a plain test run covers tree growth over passes, CommitPath and forks of
// open trees without a fuzzing session.
func TestCacheOpsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 17))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		data := make([]byte, 40+rng.IntN(200))
		for j := range data {
			data[j] = byte(rng.IntN(256))
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { runCacheOps(t, data) })
		if t.Failed() {
			t.Fatalf("input %q", data)
		}
		// Every fourth input again over F16 pages: the same history, the
		// rows rounded to binary16 (tagRow writes binary16 values).
		if i%4 == 0 {
			t.Run(fmt.Sprint(i, "/f16"), func(t *testing.T) { withF16(func() { runCacheOpsType(t, data, tensor.F16) }) })
			if t.Failed() {
				t.Fatalf("f16 input %q", data)
			}
		}
	}
}

func runCacheOps(t *testing.T, data []byte) { runCacheOpsType(t, data, tensor.F32) }

func runCacheOpsType(t *testing.T, data []byte, dt tensor.DType) {
	{
		r := &byteReader{data}
		window := []int32{0, 2, 3, 5}[r.next()%4]
		pt := 1 + r.next()%4
		c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: pt, MaxTokens: 24, MaxSeqLen: 14, Window: int(window), DType: dt})
		m := &model{seqs: map[int32][]int{}, last: map[int32]lastPass{}, busy: map[int32]bool{}, trees: map[int32]*refTree{}, window: window}
		var inflight []*flight
		tag := 0
		ctx := t.Context()
		for step := 0; len(r.b) > 0 && step < 200; step++ {
			op := r.next() % 9
			seq := int32(r.next() % 4)
			switch op {
			case 0: // Begin
				b := m.randomBatch(r)
				freeBefore := c.Stats().PagesFree
				st := c.Stats()
				p, err := c.Begin(ctx, b)
				plan, wantErr := m.beginErr(b, c)
				switch {
				case wantErr != nil:
					if !errors.Is(err, wantErr) {
						t.Fatalf("step %d: Begin(%v parents %v slots %v) = %v, want %v", step, b.Seq, b.Parent, b.ParentSlot, err, wantErr)
					}
				case errors.Is(err, ErrFull):
					if bound := m.pagesBound(b, pt); bound <= freeBefore {
						t.Fatalf("step %d: ErrFull with %d free pages, need at most %d: %v", step, freeBefore, bound, err)
					}
				case err != nil:
					t.Fatalf("step %d: Begin(%v parents %v slots %v): %v", step, b.Seq, b.Parent, b.ParentSlot, err)
				}
				if err != nil {
					if got := c.Stats(); got != st {
						t.Fatalf("step %d: failed Begin changed Stats %+v → %+v", step, st, got)
					}
					break
				}
				fl := &flight{p: p, b: b, tags: tagsRange(tag, b.Len()), base: map[int32]int{}, plan: plan}
				tag += b.Len()
				for _, s := range b.Seq {
					m.busy[s] = true
					fl.base[s] = len(m.seqs[s])
				}
				putTags(t, c, p, fl.tags)
				m.checkPass(t, c, fl)
				inflight = append(inflight, fl)
			case 1, 2: // End or Abort
				if len(inflight) == 0 {
					break
				}
				i := int(seq) % len(inflight)
				fl := inflight[i]
				inflight = slices.Delete(inflight, i, i+1)
				if op == 1 {
					must(t, fl.p.End())
				} else {
					fl.p.Abort()
				}
				m.end(fl, op == 1)
			case 3: // Truncate
				n := int32(r.next() % 16)
				err := c.Truncate(seq, n)
				switch {
				case m.busy[seq]:
					if !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: Truncate busy = %v", step, err)
					}
				case int(n) > len(m.seqs[seq]):
					if !errors.Is(err, ErrRange) {
						t.Fatalf("step %d: Truncate(%d, %d) of %d = %v", step, seq, n, len(m.seqs[seq]), err)
					}
				default:
					must(t, err)
					if _, ok := m.seqs[seq]; ok {
						m.seqs[seq] = m.seqs[seq][:n]
					}
					m.setTree(seq, m.trees[seq].clone(int(n)))
					delete(m.last, seq)
				}
			case 4: // Fork
				dst := int32(r.next() % 4)
				n := int32(r.next() % 16)
				err := c.Fork(seq, dst, n)
				switch {
				case seq == dst:
					if !errors.Is(err, ErrRange) {
						t.Fatalf("step %d: Fork(%d, %d, %d) = %v, want ErrRange", step, seq, dst, n, err)
					}
				case m.busy[seq]:
					if !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: Fork from busy = %v", step, err)
					}
				case int(n) > len(m.seqs[seq]):
					if !errors.Is(err, ErrRange) {
						t.Fatalf("step %d: Fork(%d, %d, %d) = %v, want ErrRange", step, seq, dst, n, err)
					}
				case m.busy[dst]:
					if !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: Fork into busy = %v", step, err)
					}
				default:
					must(t, err)
					m.seqs[dst] = slices.Clone(m.seqs[seq][:n])
					m.setTree(dst, m.trees[seq].clone(int(n)))
					delete(m.last, dst)
				}
			case 5: // Commit
				lp, ok := m.last[seq]
				var keep []int32
				if ok && len(lp.rows) > 0 {
					// Mostly valid: an ascending subset of the pass's rows.
					for _, row := range lp.rows {
						if r.next()%2 == 0 {
							keep = append(keep, row)
						}
					}
					if r.next()%5 == 0 && len(keep) > 1 {
						keep[0], keep[1] = keep[1], keep[0]
						ok = false
					}
				}
				if rt := m.trees[seq]; rt != nil && rt.start < lp.base {
					ok = false // a tree from an earlier pass is CommitPath's
				}
				st := c.Stats()
				err := c.Commit(seq, keep)
				switch {
				case m.busy[seq] && m.seqs[seq] != nil:
					if !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: Commit busy = %v", step, err)
					}
				case !ok:
					if !errors.Is(err, ErrCommit) && !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: Commit(%d, %v) = %v, want ErrCommit", step, seq, keep, err)
					}
				case errors.Is(err, ErrFull):
					// Allowed when destination pages are shared with a fork.
					if got := c.Stats(); got != st {
						t.Fatalf("step %d: Commit with ErrFull changed Stats %+v → %+v", step, st, got)
					}
				default:
					must(t, err)
					h := m.seqs[seq][:lp.base]
					for _, row := range keep {
						h = append(h, lp.tags[row])
					}
					m.seqs[seq] = h
					m.setTree(seq, nil)
					delete(m.last, seq)
				}
			case 6: // Free
				c.Free(seq)
				if m.busy[seq] {
					// Deferred: the in-flight pass drops it.
					for _, fl := range inflight {
						if slices.Contains(fl.b.Seq, seq) {
							fl.base[-1-seq] = 1 // marker: freed while busy
						}
					}
				} else {
					delete(m.seqs, seq)
					delete(m.last, seq)
					delete(m.trees, seq)
				}
			case 7:
				m.check(t, c, step)
			case 8: // CommitPath
				path, ok := m.randomPath(r, seq)
				st := c.Stats()
				err := c.CommitPath(seq, path)
				switch {
				case m.busy[seq]:
					if !errors.Is(err, ErrBusy) {
						t.Fatalf("step %d: CommitPath busy = %v", step, err)
					}
				case !ok:
					if !errors.Is(err, ErrCommit) {
						t.Fatalf("step %d: CommitPath(%d, %v) with tree %+v = %v, want ErrCommit", step, seq, path, m.trees[seq], err)
					}
				case errors.Is(err, ErrFull):
					if got := c.Stats(); got != st {
						t.Fatalf("step %d: CommitPath with ErrFull changed Stats %+v → %+v", step, st, got)
					}
				default:
					if err != nil {
						t.Fatalf("step %d: CommitPath(%d, %v) with tree %+v: %v", step, seq, path, m.trees[seq], err)
					}
					rt := m.trees[seq]
					h := m.seqs[seq][:rt.start:rt.start]
					for _, slot := range path {
						h = append(h, m.seqs[seq][slot])
					}
					m.seqs[seq] = h
					m.setTree(seq, nil)
					delete(m.last, seq)
				}
				if err != nil {
					m.check(t, c, step) // a failed commit changes nothing
				}
			}
			checkInvariants(t, c)
		}
		for _, fl := range inflight {
			fl.p.Abort()
			m.end(fl, false)
		}
		m.check(t, c, -1)
		checkInvariants(t, c)
		if st := c.Stats(); st.Passes != 0 {
			t.Fatalf("passes in flight after all ended: %+v", st)
		}
	}
}

func (m *model) setTree(s int32, rt *refTree) {
	if rt == nil {
		delete(m.trees, s)
		return
	}
	m.trees[s] = rt
}

// randomBatch builds a batch of one or two sequences whose rows are plain,
// children of earlier rows, or children of earlier passes' slots (mostly
// valid ones: the root or a tree slot, or the tail when no tree is open).
func (m *model) randomBatch(r *byteReader) *input.Batch {
	b := &input.Batch{}
	nseq := 1 + r.next()%2
	var rows []int32 // sequence per row, before interleaving
	for range nseq {
		s := int32(r.next() % 4)
		for range 1 + r.next()%5 {
			rows = append(rows, s)
		}
	}
	for i, s := range rows {
		parent, slot := int32(-1), int32(-1)
		switch mode := r.next() % 6; {
		case mode >= 4: // a parent slot
			n := len(m.seqs[s])
			lo := n - 1
			if rt := m.trees[s]; rt != nil {
				lo = rt.start - 1
			}
			slot = int32(lo + r.next()%max(1, n-lo))
			if r.next()%8 == 0 {
				slot = int32(r.next()%16 - 1) // anything, often invalid
			}
		case mode >= 1: // the mode-th earlier row of the same sequence
			pick := mode
			for k := i - 1; k >= 0; k-- {
				if rows[k] == s {
					if pick--; pick == 0 {
						parent = int32(k)
						break
					}
				}
			}
		}
		b.AddChild(0, int32(i), s, parent, slot, false)
	}
	return b
}

// randomPath walks the reference tree of seq from the root, mostly along
// parent links, and reports whether CommitPath should accept the result.
func (m *model) randomPath(r *byteReader, seq int32) ([]int32, bool) {
	rt := m.trees[seq]
	if rt == nil {
		if r.next()%2 == 0 {
			return nil, false
		}
		return []int32{int32(r.next() % 16)}, false
	}
	var path []int32
	prev := rt.start - 1
	for r.next()%4 != 0 {
		var kids []int
		for k, p := range rt.par {
			if p == prev {
				kids = append(kids, rt.start+k)
			}
		}
		if len(kids) == 0 {
			break
		}
		prev = kids[r.next()%len(kids)]
		path = append(path, int32(prev))
	}
	switch r.next() % 6 {
	case 0: // a slot that is no child of the path's last
		path = append(path, int32(r.next()%16-1))
		return path, m.validPath(rt, len(m.seqs[seq]), path)
	case 1:
		if len(path) > 1 {
			path[0], path[1] = path[1], path[0]
			return path, false
		}
	}
	return path, true
}

func (m *model) validPath(rt *refTree, n int, path []int32) bool {
	prev := rt.start - 1
	for _, s := range path {
		if int(s) < rt.start || int(s) >= n || rt.par[int(s)-rt.start] != prev {
			return false
		}
		prev = int(s)
	}
	return true
}

// plan reads b the way Begin documents it, or returns ErrBatch: a sequence
// without an open tree opens one when a row has a parent slot or a parent row
// that is not the row just before it, at the highest slot t at or below that
// row such that every tree row's parent is at least t-1; every row at or
// above the tree's first slot needs a parent.
func (m *model) plan(b *input.Batch) (*refPlan, error) {
	pl := &refPlan{slot: make([]int, b.Len()), pslot: make([]int, b.Len()), start: map[int32]int{}, opened: map[int32]bool{}}
	count := map[int32]int{}
	for i, s := range b.Seq {
		pl.slot[i] = len(m.seqs[s]) + count[s]
		count[s]++
	}
	for s := range count {
		base := len(m.seqs[s])
		rt := m.trees[s]
		var rows []int
		for i, q := range b.Seq {
			if q == s {
				rows = append(rows, i)
			}
		}
		first := -1
		for _, i := range rows {
			pl.pslot[i] = -1
			explicit := false
			if b.Parent[i] >= 0 {
				pl.pslot[i] = pl.slot[b.Parent[i]]
			} else if b.ParentSlot != nil && b.ParentSlot[i] >= 0 {
				ps := int(b.ParentSlot[i])
				lo := base - 1
				if rt != nil {
					lo = rt.start - 1
				}
				if ps < lo || ps >= base {
					return nil, ErrBatch
				}
				pl.pslot[i], explicit = ps, true
			}
			if first < 0 && (explicit || (pl.pslot[i] >= 0 && pl.pslot[i] != pl.slot[i]-1)) {
				first = i
			}
		}
		start := -1
		switch {
		case rt != nil:
			start = rt.start
		case first >= 0:
			pl.opened[s] = true
		search:
			for t := pl.slot[first]; t >= base; t-- {
				for _, i := range rows {
					if pl.slot[i] >= t && pl.pslot[i] >= 0 && pl.pslot[i] < t-1 {
						continue search
					}
				}
				start = t
				break
			}
		}
		for _, i := range rows {
			if start < 0 || pl.slot[i] < start {
				pl.pslot[i] = -1
			} else if pl.pslot[i] < 0 {
				return nil, ErrBatch
			}
		}
		if start >= 0 {
			pl.start[s] = start
		}
	}
	return pl, nil
}

// beginErr predicts the error of Begin that does not depend on page counts.
func (m *model) beginErr(b *input.Batch, c *Cache) (*refPlan, error) {
	for _, s := range b.Seq {
		if m.busy[s] {
			return nil, ErrBusy
		}
	}
	pl, err := m.plan(b)
	if err != nil {
		return nil, err
	}
	count := map[int32]int{}
	for _, s := range b.Seq {
		count[s]++
	}
	for s, n := range count {
		if len(m.seqs[s])+n > c.o.MaxSeqLen {
			return nil, ErrSeqLen
		}
	}
	return pl, nil
}

// pagesBound is the most pages a Begin of b can need.
func (m *model) pagesBound(b *input.Batch, pt int) int {
	count := map[int32]int{}
	for _, s := range b.Seq {
		count[s]++
	}
	need := 0
	for s, n := range count {
		l := len(m.seqs[s])
		need += (l+n+pt-1)/pt - (l+pt-1)/pt + 1
	}
	return need
}

func (m *model) end(fl *flight, ok bool) {
	for s, base := range fl.base {
		if s < 0 {
			continue
		}
		m.busy[s] = false
		if _, freed := fl.base[-1-s]; freed {
			delete(m.seqs, s)
			delete(m.last, s)
			delete(m.trees, s)
			continue
		}
		if !ok {
			continue // Abort: history as before
		}
		lp := lastPass{base: base, tags: map[int32]int{}}
		h := m.seqs[s]
		if start, tree := fl.plan.start[s]; tree && fl.plan.opened[s] {
			m.trees[s] = &refTree{start: start}
		}
		rt := m.trees[s]
		for i, q := range fl.b.Seq {
			if q == s {
				lp.rows = append(lp.rows, int32(i))
				lp.tags[int32(i)] = fl.tags[i]
				h = append(h, fl.tags[i])
				if rt != nil && fl.plan.slot[i] >= rt.start {
					rt.par = append(rt.par, fl.plan.pslot[i])
				}
			}
		}
		m.seqs[s] = h
		m.last[s] = lp
	}
}

// check compares every non-busy sequence's history with the model.
func (m *model) check(t *testing.T, c *Cache, step int) {
	t.Helper()
	for s := range int32(4) {
		want := m.seqs[s]
		got := seqTags(t, c, s)
		if m.busy[s] {
			continue
		}
		if !slices.Equal(want, got) && !(len(want) == 0 && len(got) == 0) {
			t.Fatalf("step %d: sequence %d = %v, model %v", step, s, got, want)
		}
		if c.Len(s) != int32(len(want)) {
			t.Fatalf("step %d: Len(%d) = %d, model %d", step, s, c.Len(s), len(want))
		}
		c.mu.Lock()
		var gotTree *refTree
		if st := c.seqs[s]; st != nil && st.tree.open() {
			gotTree = &refTree{start: int(st.tree.start)}
			for _, p := range st.tree.par {
				gotTree.par = append(gotTree.par, int(p))
			}
		}
		c.mu.Unlock()
		if fmt.Sprint(gotTree) != fmt.Sprint(m.trees[s]) {
			t.Fatalf("step %d: sequence %d tree = %+v, model %+v", step, s, gotTree, m.trees[s])
		}
	}
}

// checkPass compares the pass's views, slots and mask with the model.
func (m *model) checkPass(t *testing.T, c *Cache, fl *flight) {
	t.Helper()
	b, p, pl := fl.b, fl.p, fl.plan
	k := map[int32]int{}
	slotRow := map[[2]int32]int{}
	for i, s := range b.Seq {
		want := int32(fl.base[s] + k[s])
		if p.Slots()[i] != want || int(want) != pl.slot[i] {
			t.Fatalf("row %d of sequence %d: slot %d, want %d", i, s, p.Slots()[i], want)
		}
		slotRow[[2]int32{s, want}] = i
		k[s]++
	}
	for s := range k {
		want := slices.Clone(m.seqs[s])
		for i, q := range b.Seq {
			if q == s {
				want = append(want, fl.tags[i])
			}
		}
		for l := range c.o.Layers {
			kk, vv := readKV(p.Layer(l).View(s), c.rowF)
			if got := decodeTags(t, kk, vv, l); !slices.Equal(want, got) && len(want)+len(got) > 0 {
				t.Fatalf("pass view of sequence %d layer %d = %v, want %v", s, l, got, want)
			}
		}
	}
	// parentOf is the parent slot of a tree slot of s (earlier pass or this
	// one), -1 for linear slots.
	parentOf := func(s int32, slot int) int {
		start, ok := pl.start[s]
		if !ok || slot < start {
			return -1
		}
		if slot < fl.base[s] {
			return m.trees[s].par[slot-start]
		}
		return pl.pslot[slotRow[[2]int32{s, int32(slot)}]]
	}
	// chain is the ancestor set of a slot (itself included) and its position
	// along that chain: a linear slot's position is the slot.
	chain := func(s int32, slot int) (map[int]bool, int) {
		set := map[int]bool{}
		depth := 0
		for x := slot; parentOf(s, x) >= 0; x = parentOf(s, x) {
			set[x] = true
			depth++
		}
		if depth == 0 {
			return set, slot
		}
		return set, pl.start[s] - 1 + depth
	}
	mask := p.Mask()
	for i, s := range b.Seq {
		slot := pl.slot[i]
		anc, pos := chain(s, slot)
		lo := 0
		if m.window > 0 {
			lo = max(0, pos-int(m.window)+1)
		}
		start, tree := pl.start[s]
		for j := range fl.base[s] + k[s] {
			want := j >= lo && j <= slot
			if want && tree && j >= start && pl.pslot[i] >= 0 {
				_, jpos := chain(s, j)
				want = anc[j] && jpos >= lo
			}
			if got := mask.Visible(i, int32(j)); got != want {
				t.Fatalf("batch %v parents %v slots %v window %d tree %v: row %d slot %d visible %v, want %v\n%s",
					b.Seq, b.Parent, b.ParentSlot, m.window, m.trees[s], i, j, got, want, maskString(mask, b.Len(), fl.base[s]+k[s]))
			}
		}
	}
	// Each run's mask is the slice of the full mask.
	for _, run := range p.Runs() {
		for i := range run.Rows {
			if b.Seq[run.Start+i] != run.Seq {
				t.Fatalf("run %v contains row %d of sequence %d", run, run.Start+i, b.Seq[run.Start+i])
			}
			for j := range int32(24) {
				if run.Mask.Visible(i, j) != mask.Visible(run.Start+i, j) {
					t.Fatalf("run %v row %d differs from the pass mask", run, i)
				}
			}
		}
	}
}

func maskString(m *kernels.Mask, rows, width int) string {
	return fmt.Sprintf("%q", visibility(m, rows, width))
}
