package kvcache

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
)

// model is the obvious reference for the cache: each sequence is a flat list
// of tags, and a pass is a list of rows with parents.
type model struct {
	seqs   map[int32][]int
	last   map[int32]lastPass // commit records
	busy   map[int32]bool
	window int32
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
// Commit/Free against the cache and against the flat reference model, checking
// after every step that histories, views, masks, errors and page bookkeeping
// agree. Several passes may be in flight at once.
func FuzzCacheOps(f *testing.F) {
	f.Add([]byte{0, 2, 0, 1, 3, 0, 0, 0, 1, 0, 7})
	f.Add([]byte{1, 3, 0, 2, 5, 1, 0, 0, 0, 2, 1, 1, 0, 0, 3, 0, 4, 7, 0, 0, 9, 9, 1, 0, 5, 0, 1, 7})
	f.Add([]byte{2, 1, 0, 3, 4, 2, 1, 2, 3, 0, 0, 4, 0, 1, 6, 1, 0, 0, 1, 1, 4, 2, 1, 0, 5, 7, 0, 0, 3})
	f.Add([]byte{3, 4, 0, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 0, 1, 3, 7, 0, 1, 1, 0, 2, 5, 5, 2, 1, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &byteReader{data}
		window := []int32{0, 2, 3, 5}[r.next()%4]
		pt := 1 + r.next()%4
		c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: pt, MaxTokens: 24, MaxSeqLen: 14, Window: int(window)})
		m := &model{seqs: map[int32][]int{}, last: map[int32]lastPass{}, busy: map[int32]bool{}, window: window}
		var inflight []*flight
		tag := 0
		ctx := t.Context()
		for step := 0; len(r.b) > 0 && step < 200; step++ {
			op := r.next() % 8
			seq := int32(r.next() % 4)
			switch op {
			case 0: // Begin
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
					j := b.Add(0, 0, s, false)
					// Parent: -1, or an earlier row of the same sequence.
					if pick := r.next() % 4; pick > 0 {
						for k := i - 1; k >= 0; k-- {
							if rows[k] == s {
								pick--
								if pick == 0 {
									b.Parent[j] = int32(k)
									break
								}
							}
						}
					}
				}
				freeBefore := c.Stats().PagesFree
				st := c.Stats()
				p, err := c.Begin(ctx, b)
				wantErr := m.beginErr(b, c)
				switch {
				case wantErr != nil:
					if !errors.Is(err, wantErr) {
						t.Fatalf("step %d: Begin(%v parents %v) = %v, want %v", step, b.Seq, b.Parent, err, wantErr)
					}
				case errors.Is(err, ErrFull):
					if bound := m.pagesBound(b, pt); bound <= freeBefore {
						t.Fatalf("step %d: ErrFull with %d free pages, need at most %d: %v", step, freeBefore, bound, err)
					}
				case err != nil:
					t.Fatalf("step %d: Begin: %v", step, err)
				}
				if err != nil {
					if got := c.Stats(); got != st {
						t.Fatalf("step %d: failed Begin changed Stats %+v → %+v", step, st, got)
					}
					break
				}
				fl := &flight{p: p, b: b, tags: tagsRange(tag, b.Len()), base: map[int32]int{}}
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
				default:
					must(t, err)
					h := m.seqs[seq][:lp.base]
					for _, row := range keep {
						h = append(h, lp.tags[row])
					}
					m.seqs[seq] = h
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
				}
			case 7:
				m.check(t, c, step)
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
	})
}

// beginErr predicts the error of Begin that does not depend on page counts.
func (m *model) beginErr(b *input.Batch, c *Cache) error {
	for _, s := range b.Seq {
		if m.busy[s] {
			return ErrBusy
		}
	}
	count := map[int32]int{}
	for _, s := range b.Seq {
		count[s]++
	}
	for s, n := range count {
		if len(m.seqs[s])+n > c.o.MaxSeqLen {
			return ErrSeqLen
		}
	}
	return nil
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
			continue
		}
		if !ok {
			continue // Abort: history as before
		}
		lp := lastPass{base: base, tags: map[int32]int{}}
		h := m.seqs[s]
		for i, q := range fl.b.Seq {
			if q == s {
				lp.rows = append(lp.rows, int32(i))
				lp.tags[int32(i)] = fl.tags[i]
				h = append(h, fl.tags[i])
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
	}
}

// checkPass compares the pass's views, slots and mask with the model.
func (m *model) checkPass(t *testing.T, c *Cache, fl *flight) {
	t.Helper()
	b, p := fl.b, fl.p
	k := map[int32]int{}
	slotRow := map[[2]int32]int{}
	for i, s := range b.Seq {
		want := int32(fl.base[s] + k[s])
		if p.Slots()[i] != want {
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
	// Reference visibility.
	vpos := make([]int32, b.Len())
	for i := range b.Seq {
		vpos[i] = p.Slots()[i]
		if par := b.Parent[i]; par >= 0 {
			vpos[i] = vpos[par] + 1
		}
	}
	anc := func(i int) map[int]bool {
		set := map[int]bool{}
		var walk func(r int)
		walk = func(r int) {
			if set[r] {
				return
			}
			set[r] = true
			if par := b.Parent[r]; par >= 0 {
				walk(int(par))
				return
			}
			for e := r - 1; e >= 0; e-- {
				if b.Seq[e] == b.Seq[r] {
					walk(e)
				}
			}
		}
		walk(i)
		return set
	}
	mask := p.Mask()
	for i, s := range b.Seq {
		a := anc(i)
		lo := int32(0)
		if m.window > 0 {
			lo = max(0, vpos[i]-m.window+1)
		}
		base := int32(fl.base[s])
		for j := int32(0); j < base+int32(k[s]); j++ {
			want := j >= lo && j <= p.Slots()[i]
			if want && j >= base {
				r := slotRow[[2]int32{s, j}]
				want = a[r] && vpos[r] >= lo
			}
			if got := mask.Visible(i, j); got != want {
				t.Fatalf("batch %v parents %v window %d: row %d slot %d visible %v, want %v\n%s",
					b.Seq, b.Parent, m.window, i, j, got, want, maskString(mask, b.Len(), int(base)+k[s]))
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
