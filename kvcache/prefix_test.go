package kvcache

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/tensor"
)

// prefixTag is what a causal model writes at the last slot of prefix under
// salt: a function of the salt and every token up to it, so two slots hold
// the same row only if their prefixes agree (up to the tag's modulus). The
// prefix tests write these rows, so a page whose contents do not belong to
// its key shows as a wrong tag.
func prefixTag(salt int, prefix []int32) int {
	h := fnv.New64a()
	fmt.Fprint(h, salt, prefix)
	mod := uint64(60000)
	if tagF16 {
		mod = 3900
	}
	return int(h.Sum64() % mod)
}

// prefixTags is every slot's tag of a history.
func prefixTags(salt int, tokens []int32) []int {
	tags := make([]int, len(tokens))
	for i := range tokens {
		tags[i] = prefixTag(salt, tokens[:i+1])
	}
	return tags
}

var prefixSalts = [][]byte{[]byte("model-a f32 adapter="), []byte("model-a f32 adapter=x")}

// prefixRef is the reference: each live sequence's salt and tokens, and for
// every key published what prefix it stands for.
type prefixRef struct {
	seqs map[int32]*refSeq
	keys map[PrefixKey]refKey
}

type refSeq struct {
	salt   int
	tokens []int32
}

type refKey struct {
	salt   int
	prefix []int32
}

// publish records the keys Publish gives the full pages of tokens.
func (m *prefixRef) publish(salt, pt int, tokens []int32) {
	prev := rootKey(prefixSalts[salt])
	for i := 0; (i+1)*pt <= len(tokens); i++ {
		k := chainKey(prev, tokens[i*pt:(i+1)*pt])
		m.keys[k] = refKey{salt, slices.Clone(tokens[:(i+1)*pt])}
		prev = k
	}
}

// checkPrefixIndex verifies the prefix index's bookkeeping: the index and
// the pages' keys agree, the idle list holds exactly the keyed pages no
// sequence holds, once each, and no sequence knows keys past its full
// pages. c.mu held.
func checkPrefixIndex(t testing.TB, c *Cache) {
	t.Helper()
	px := c.px
	keyed := 0
	for p := range c.ref {
		if px.keyed[p] {
			keyed++
			if q, ok := px.at[px.key[p]]; !ok || q != int32(p) {
				t.Fatalf("page %d is keyed but the index maps its key to page %d (present %v)", p, q, ok)
			}
		}
	}
	if keyed != len(px.at) {
		t.Fatalf("%d pages keyed, the index holds %d keys", keyed, len(px.at))
	}
	seen := make([]bool, len(c.ref))
	n := 0
	s := int32(len(px.next) - 1)
	for p := px.next[s]; p != s; p = px.next[p] {
		if seen[p] {
			t.Fatalf("page %d is twice in the idle list", p)
		}
		seen[p] = true
		n++
		if !px.keyed[p] || c.ref[p] != 0 {
			t.Fatalf("idle page %d: keyed %v, refcount %d", p, px.keyed[p], c.ref[p])
		}
	}
	if n != px.idle {
		t.Fatalf("idle list holds %d pages, count says %d", n, px.idle)
	}
	for p := range c.ref {
		if px.keyed[p] && c.ref[p] == 0 && !seen[p] {
			t.Fatalf("page %d is keyed and unreferenced but not in the idle list: leaked", p)
		}
	}
	for id, s := range c.seqs {
		if full := int(s.len / c.pt); len(s.keys) > full {
			t.Fatalf("sequence %d of %d tokens knows %d page keys, it has %d full pages", id, s.len, len(s.keys), full)
		}
	}
}

// pageTags reads the tags of the pt rows of page p, checking every layer
// holds the same. c.mu held.
func pageTags(t testing.TB, c *Cache, p int32) []int {
	t.Helper()
	var first []int
	for l := range c.o.Layers {
		var kp, vp []float32
		if r := c.res; r != nil {
			// Read the frame where it is, without pinning: a pin could
			// make room by dropping this very page if it is idle.
			id := r.id(l, p)
			buf := r.buf[id]
			if r.state[id] == frameSpilled {
				buf = make([]float32, r.frameF)
				if ok, err := r.sp.read(int32(l), p, buf); err != nil || !ok {
					t.Fatalf("layer %d page %d: spilled, read back: %v (held %v)", l, p, err, ok)
				}
			} else if buf == nil {
				t.Fatalf("layer %d page %d of the index holds no data (state %d)", l, p, r.state[id])
			}
			kp, vp = buf[:c.pageW], buf[c.pageW:]
		} else {
			kp, vp = c.k[l][p], c.v[l][p]
		}
		kv := kernels.KV{K: [][]float32{kp}, V: [][]float32{vp}, PageTokens: int(c.pt), Len: int(c.pt)}
		if c.f16 {
			kv.K16, kv.V16 = [][]uint16{c.halves(kp)}, [][]uint16{c.halves(vp)}
		}
		k, v := readKV(kv, c.rowF)
		tags := decodeTags(t, k, v, l)
		if l == 0 {
			first = tags
		} else if !slices.Equal(first, tags) {
			t.Fatalf("page %d: layer %d holds %v, layer 0 %v", p, l, tags, first)
		}
	}
	return first
}

// check compares every sequence's history with the reference and every
// indexed page with what its key stands for.
func (m *prefixRef) check(t *testing.T, c *Cache, step int, what string) {
	t.Helper()
	checkInvariants(t, c)
	for id, rs := range m.seqs {
		if got, want := seqTags(t, c, id), prefixTags(rs.salt, rs.tokens); !slices.Equal(got, want) {
			t.Fatalf("step %d (%s): sequence %d holds %v, want %v (tokens %v)", step, what, id, got, want, rs.tokens)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pt := int(c.pt)
	for k, p := range c.px.at {
		rk, ok := m.keys[k]
		if !ok {
			t.Fatalf("step %d (%s): page %d is indexed under a key nobody published", step, what, p)
		}
		want := prefixTags(rk.salt, rk.prefix)[len(rk.prefix)-pt:]
		if got := pageTags(t, c, p); !slices.Equal(got, want) {
			t.Fatalf("step %d (%s): page %d indexed for salt %d prefix %v holds %v, want %v", step, what, p, rk.salt, rk.prefix, got, want)
		}
	}
}

// writeRows puts the rows of batch b, whose row r has tag tags[r].
func writeRows(t testing.TB, c *Cache, b *input.Batch, tags []int) error {
	p, err := c.Begin(t.Context(), b)
	if err != nil {
		return err
	}
	putTags(t, c, p, tags)
	return p.End()
}

// FuzzPrefixOps runs a random program of prefix-cache operations (map a
// prompt's cached prefix and prefill the rest, decode, draft trees
// committed, publish, truncate, fork, free, ristretto's evictions applied)
// over a small pool, with and without a KV budget and a small prefix-cache
// size, writing the rows a causal model would (a function of the salt and
// the tokens up to each slot). After every operation it checks the page
// bookkeeping (no page leaked, none twice in the free list, refcounts equal
// holders, idle pages exactly the unreferenced keyed ones), every
// sequence's history, and that every indexed page holds what its key
// stands for.
func FuzzPrefixOps(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{1, 3, 0, 2, 2, 0, 12, 0, 1, 1, 0, 1, 0, 1, 0, 1, 2, 0, 0, 2, 3, 0, 2, 1, 0, 4, 1, 5, 0, 0, 0, 0, 2, 11, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0})
	f.Add([]byte{2, 1, 1, 0, 3, 1, 8, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 3, 3, 1, 7, 1, 6, 1, 5, 0, 0, 3, 0, 12, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 8})
	f.Fuzz(func(t *testing.T, data []byte) { runPrefixOps(t, data, tensor.F32) })
}

// TestPrefixOpsRandom runs FuzzPrefixOps's program on seeded random inputs,
// every fourth over F16 pages too.
func TestPrefixOpsRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 7))
	n := 1500
	if testing.Short() {
		n = 200
	}
	var total PrefixStats
	for i := range n {
		data := make([]byte, 60+rng.IntN(300))
		for j := range data {
			data[j] = byte(rng.IntN(256))
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			st := runPrefixOps(t, data, tensor.F32)
			total.HitPages += st.HitPages
			total.Evictions += st.Evictions
			total.Published += st.Published
		})
		if t.Failed() {
			t.Fatalf("input %q", data)
		}
		if i%4 == 0 {
			t.Run(fmt.Sprint(i, "/f16"), func(t *testing.T) { withF16(func() { runPrefixOps(t, data, tensor.F16) }) })
			if t.Failed() {
				t.Fatalf("f16 input %q", data)
			}
		}
	}
	// The programs must exercise the cache, not only its misses.
	if total.HitPages < int64(n/2) || total.Evictions < int64(n/10) || total.Published < int64(n) {
		t.Fatalf("over %d programs: %d pages mapped, %d evicted, %d published: the random programs no longer reach the cache", n, total.HitPages, total.Evictions, total.Published)
	}
	t.Logf("over %d programs: %d pages mapped, %d evicted, %d published", n, total.HitPages, total.Evictions, total.Published)
}

// runPrefixOps runs one program and returns the cache's counters at its end.
func runPrefixOps(t *testing.T, data []byte, dt tensor.DType) PrefixStats {
	r := &byteReader{data}
	pt := 1 + r.next()%4
	const maxSeqLen = 12
	pagesPerSeq := (maxSeqLen + pt - 1) / pt
	o := Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: pt, MaxSeqLen: maxSeqLen, DType: dt, PrefixCache: true,
		MaxTokens: pt * (pagesPerSeq + 1 + r.next()%(4*pagesPerSeq))}
	pageBytes := int64(2 * 2 * pt * 4 * o.Layers) // F32 pages: 2 values a row, K and V, per layer
	if dt == tensor.F16 {
		pageBytes /= 2
	}
	switch r.next() % 4 {
	case 1: // ristretto holds one to three idle pages
		o.PrefixBytes = pageBytes * int64(1+r.next()%3)
	case 2: // under a KV budget: one sequence's pass, a few frames for ristretto
		fb := pageBytes / int64(o.Layers)
		pass := pagesPerSeq + 2 + r.next()%4
		o.PassFrames = pass
		o.Budget = fb * int64(pass+r.next()%6)
	}
	c := mustNew(t, o)
	defer c.Close()
	m := &prefixRef{seqs: map[int32]*refSeq{}, keys: map[PrefixKey]refKey{}}
	const nSeqs = 5
	var prompts [][]int32
	token := func() int32 { return int32(r.next() % 3) } // few tokens: prefixes repeat
	for step := 0; len(r.b) > 0 && step < 120; step++ {
		op := r.next() % 9
		seq := int32(r.next() % nSeqs)
		rs := m.seqs[seq]
		what := ""
		switch op {
		case 0, 1: // a new prompt: map its cached prefix, prefill the rest
			what = "map"
			if rs != nil { // the sequence there ends, as the scheduler releases one
				c.Publish(seq, prefixSalts[rs.salt], rs.tokens)
				m.publish(rs.salt, pt, rs.tokens)
				c.Free(seq)
				delete(m.seqs, seq)
			}
			salt := r.next() % 2
			toks := make([]int32, 1+r.next()%maxSeqLen)
			for i := range toks {
				toks[i] = token()
			}
			if len(prompts) > 0 && r.next()%3 != 0 {
				// Usually a prompt seen before with another ending, as a
				// shared system prompt is.
				old := prompts[r.next()%len(prompts)]
				n := len(old)
				if r.next()%2 == 0 {
					n = r.next() % (n + 1)
				}
				copy(toks, old[:n])
			}
			prompts = append(prompts, toks)
			got, err := c.MapPrefix(seq, prefixSalts[salt], toks)
			if err != nil {
				t.Fatalf("step %d: MapPrefix(%d, %v): %v", step, seq, toks, err)
			}
			if got%int32(pt) != 0 || int(got) > (len(toks)-1)/pt*pt {
				t.Fatalf("step %d: mapped %d of %d tokens at %d a page", step, got, len(toks), pt)
			}
			rs = &refSeq{salt: salt, tokens: slices.Clone(toks[:got])}
			m.seqs[seq] = rs
			rest := toks[got:]
			b := linear(seq, int(got), len(rest))
			tags := make([]int, len(rest))
			for i := range rest {
				tags[i] = prefixTag(salt, toks[:int(got)+i+1])
			}
			err = writeRows(t, c, b, tags)
			switch {
			case err == nil:
				rs.tokens = toks
			case errors.Is(err, ErrFull):
			default:
				t.Fatalf("step %d: prefill: %v", step, err)
			}
		case 2: // decode a few tokens
			what = "decode"
			if rs == nil {
				continue
			}
			n := 1 + r.next()%3
			if len(rs.tokens)+n > maxSeqLen {
				continue
			}
			b := linear(seq, len(rs.tokens), n)
			toks := slices.Clone(rs.tokens)
			tags := make([]int, n)
			for i := range n {
				toks = append(toks, token())
				tags[i] = prefixTag(rs.salt, toks)
			}
			if err := writeRows(t, c, b, tags); err == nil {
				rs.tokens = toks
			} else if !errors.Is(err, ErrFull) {
				t.Fatalf("step %d: decode: %v", step, err)
			}
		case 3: // a draft tree in one pass, its accepted path committed
			what = "tree"
			if rs == nil || len(rs.tokens) == 0 {
				continue
			}
			n := 2 + r.next()%4
			base := len(rs.tokens)
			if base+n > maxSeqLen {
				continue
			}
			b := &input.Batch{}
			par := make([]int32, n)
			paths := make([][]int32, n)
			tags := make([]int, n)
			for i := range n {
				par[i] = -1
				tok := token()
				paths[i] = append(slices.Clone(rs.tokens), tok)
				if i > 0 {
					par[i] = int32(r.next() % i)
					paths[i] = append(slices.Clone(paths[par[i]]), tok)
				}
				b.Add(tok, int32(len(paths[i])-1), seq, false)
				tags[i] = prefixTag(rs.salt, paths[i])
			}
			b.Parent = par
			if err := writeRows(t, c, b, tags); err != nil {
				if errors.Is(err, ErrFull) {
					continue
				}
				t.Fatalf("step %d: tree pass: %v", step, err)
			}
			// Keep a root-to-node chain.
			leaf := r.next() % n
			var keep []int32
			for i := int32(leaf); i >= 0; i = par[i] {
				keep = append(keep, i)
			}
			slices.Reverse(keep)
			if err := c.Commit(seq, keep); err != nil {
				if !errors.Is(err, ErrFull) {
					t.Fatalf("step %d: commit %v: %v", step, keep, err)
				}
				must(t, c.Truncate(seq, int32(base)))
				continue
			}
			rs.tokens = paths[leaf]
		case 4: // publish
			what = "publish"
			if rs == nil {
				continue
			}
			c.Publish(seq, prefixSalts[rs.salt], rs.tokens)
			m.publish(rs.salt, pt, rs.tokens)
		case 5: // truncate
			what = "truncate"
			if rs == nil {
				continue
			}
			n := r.next() % (len(rs.tokens) + 1)
			must(t, c.Truncate(seq, int32(n)))
			rs.tokens = rs.tokens[:n]
		case 6: // fork
			what = "fork"
			dst := int32(r.next() % nSeqs)
			if rs == nil || dst == seq {
				continue
			}
			n := r.next() % (len(rs.tokens) + 1)
			must(t, c.Fork(seq, dst, int32(n)))
			m.seqs[dst] = &refSeq{salt: rs.salt, tokens: slices.Clone(rs.tokens[:n])}
		case 7: // the sequence ends: publish (usually) and free
			what = "free"
			if rs == nil {
				continue
			}
			if r.next()%4 != 0 {
				c.Publish(seq, prefixSalts[rs.salt], rs.tokens)
				m.publish(rs.salt, pt, rs.tokens)
			}
			c.Free(seq)
			delete(m.seqs, seq)
		case 8: // ristretto applies its pending sets (and evictions)
			what = "wait"
			if c.px.rc != nil {
				c.px.rc.wait()
			}
		}
		m.check(t, c, step, what)
	}
	for id := range m.seqs {
		c.Free(id)
	}
	checkInvariants(t, c)
	st := c.Stats()
	if st.PagesFree+st.PagesCached != st.Pages {
		t.Fatalf("all sequences freed: %d free + %d cached of %d pages", st.PagesFree, st.PagesCached, st.Pages)
	}
	return st.Prefix
}

// TestPrefixMapsPublished walks the life of a shared prefix: a prompt is
// computed and freed, a second prompt with the same first pages maps them
// (never its last token), a third with another salt maps nothing, and a
// write after a truncation into a mapped page copies it first.
func TestPrefixMapsPublished(t *testing.T) {
	c := mustNew(t, Options{Layers: 2, KVHeads: 1, HeadDim: 2, PageTokens: 4, MaxTokens: 64, PrefixCache: true})
	defer c.Close()
	a := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	must(t, writeRows(t, c, linear(0, 0, len(a)), prefixTags(0, a)))
	if n := c.Publish(0, prefixSalts[0], a); n != 2 {
		t.Fatalf("Publish indexed %d pages, want 2 (10 tokens, 4 a page)", n)
	}
	c.Free(0)
	if st := c.Stats(); st.PagesCached != 2 || st.Prefix.Indexed != 2 {
		t.Fatalf("after Free: %d pages cached, %d indexed; want 2 and 2", st.PagesCached, st.Prefix.Indexed)
	}
	// The same 8 tokens and one more: both pages. Exactly 8 tokens: one
	// page, so that the last token is computed.
	for _, tc := range []struct {
		toks []int32
		salt int
		want int32
	}{
		{a[:9], 0, 8}, {a[:8], 0, 4}, {a[:3], 0, 0}, {a[:9], 1, 0},
		{[]int32{1, 2, 3, 4, 0, 6, 7, 8, 9}, 0, 4},
	} {
		got, err := c.MapPrefix(1, prefixSalts[tc.salt], tc.toks)
		must(t, err)
		if got != tc.want {
			t.Fatalf("MapPrefix(%v, salt %d) = %d, want %d", tc.toks, tc.salt, got, tc.want)
		}
		if tags := seqTags(t, c, 1); !slices.Equal(tags, prefixTags(tc.salt, tc.toks[:got])) {
			t.Fatalf("mapped %v, want the tags of %v", tags, tc.toks[:got])
		}
		c.Free(1)
	}
	st := c.Stats().Prefix
	if st.Lookups != 5 || st.Hits != 3 || st.HitPages != 4 || st.HitTokens != 16 {
		t.Fatalf("stats %+v: want 5 lookups, 3 hits, 4 pages, 16 tokens", st)
	}
	// A mapped page written after a truncation is copied, not changed.
	got, err := c.MapPrefix(2, prefixSalts[0], a[:9])
	must(t, err)
	if got != 8 {
		t.Fatalf("mapped %d, want 8", got)
	}
	must(t, c.Truncate(2, 6))
	must(t, writeRows(t, c, linear(2, 6, 1), []int{prefixTag(0, []int32{1, 2, 3, 4, 5, 6, 99})}))
	func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		orig := c.px.at[chainKey(chainKey(rootKey(prefixSalts[0]), a[:4]), a[4:8])]
		if c.seqs[2].pages[1] == orig {
			t.Error("a write into an indexed page did not copy it")
		}
		if tags := pageTags(t, c, orig); !slices.Equal(tags, prefixTags(0, a[:8])[4:]) {
			t.Errorf("the indexed page now holds %v", tags)
		}
	}()
	checkInvariants(t, c)
}

// TestPrefixPoolPressure fills the pool with cached copies and checks that
// passes still get every page (the oldest idle pages are taken back) and
// that a page a live sequence holds is never taken.
func TestPrefixPoolPressure(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 16, PrefixCache: true})
	defer c.Close()
	for i := range 4 {
		toks := []int32{int32(i), 1, 2, 3}
		must(t, writeRows(t, c, linear(0, 0, 4), prefixTags(0, toks)))
		c.Publish(0, prefixSalts[0], toks)
		c.Free(0)
	}
	if st := c.Stats(); st.PagesCached != 8 || st.PagesFree != 0 {
		t.Fatalf("%d pages cached, %d free; want 8 and 0", st.PagesCached, st.PagesFree)
	}
	// Sequence 1 holds prompt 3's pages; a 12-token pass on sequence 2
	// needs 6 pages: the 6 idle ones of prompts 0..2 go.
	got, err := c.MapPrefix(1, prefixSalts[0], []int32{3, 1, 2, 3, 9})
	must(t, err)
	if got != 4 {
		t.Fatalf("mapped %d, want 4", got)
	}
	toks := make([]int32, 12)
	must(t, writeRows(t, c, linear(2, 0, 12), prefixTags(0, toks)))
	if tags := seqTags(t, c, 1); !slices.Equal(tags, prefixTags(0, []int32{3, 1, 2, 3})) {
		t.Fatalf("the live sequence's mapped pages now hold %v", tags)
	}
	if st := c.Stats(); st.Prefix.Evictions != 6 || st.PagesCached != 0 {
		t.Fatalf("stats %+v: want 6 evictions and nothing idle", st)
	}
	if _, err := c.Begin(t.Context(), linear(3, 0, 1)); !errors.Is(err, ErrFull) {
		t.Fatalf("a pass past the pool: %v, want ErrFull", err)
	}
	checkInvariants(t, c)
}

// Closing the cache stops ristretto, which reports what it held as evicted:
// the counters must not take that for the policy's evictions.
func TestPrefixCloseKeepsCounters(t *testing.T) {
	c := mustNew(t, Options{Layers: 1, KVHeads: 1, HeadDim: 2, PageTokens: 2, MaxTokens: 16, PrefixCache: true})
	toks := []int32{1, 2, 3, 4, 5}
	must(t, writeRows(t, c, linear(0, 0, len(toks)), prefixTags(0, toks)))
	c.Publish(0, prefixSalts[0], toks)
	c.Free(0)
	c.px.rc.wait()
	must(t, c.Close())
	st := c.Stats()
	if st.Prefix.Evictions != 0 || st.PagesCached != 2 || st.Prefix.CachedBytes != 2*c.px.pageBytes {
		t.Fatalf("after Close: %d evictions, %d pages cached (%d bytes); want 0, 2", st.Prefix.Evictions, st.PagesCached, st.Prefix.CachedBytes)
	}
	checkInvariants(t, c)
}
