package kvcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Prefix caching (Options.PrefixCache). Many requests share the start of
// their prompt (a system prompt, instructions, few-shot examples; a chat's
// next turn repeats the last one), and in a causal model the keys and values
// of a token depend only on the tokens up to it. So a full page is named by
// what determines its contents: the tokens of every page up to and including
// it, and a salt the caller gives for everything else that does (the model,
// its LoRA adapter set, the KV element type). A new sequence maps the longest
// run of its leading pages that the cache holds (MapPrefix), sharing them
// copy-on-write as Fork does, and the caller computes only the rest.
//
// Keys. A page's key is SHA-256 over the previous page's key (the salt's
// root key for the first page) and the page's tokens, a hash chain as vLLM's
// automatic prefix caching keys its blocks. SHA-256 rather than a 64-bit
// hash with the tokens kept for verification: a collision would hand a
// request another prompt's keys and values (wrong text, and a leak across
// requests), and with requests from many users that must not depend on the
// prompts being benign; a page of 16 tokens hashes in 0.3 µs
// (BenchmarkChainKey, Sapphire Rapids), nothing next to computing it. The chain makes a key stand for
// the whole prefix, so equal keys mean equal prefixes, not only equal pages.
//
// Lifetime. Publish puts the full pages of a sequence's history in the index
// (the caller names their tokens); a published page is never written again:
// a pass, a Commit or a copy that would write into it copies it first, as
// for a page shared with a fork (shared reports it). When no sequence holds
// an indexed page any more it stays cached, idle: the cache offers it to a
// ristretto cache (cost its bytes, MaxCost Options.PrefixBytes) whose
// TinyLFU admission and sampled-LFU eviction decide which idle pages stay;
// MapPrefix's hits count as accesses. Pages a sequence holds are pinned
// outside it (they are not offered until released). When the pool has no
// free page left, the least recently idled page is taken back first:
// cached copies never make a pass fail for want of pages.
//
// An evicted cached page is dropped, never spilled: it is a copy of what a
// request computed, no request's data, and recomputing it costs less than
// a spill file grown by every prefix ever seen (under a KV budget, a frame
// of an idle page that the budget's ristretto evicts drops the whole page
// for the same reason, instead of writing it to the spill file).
//
// Ristretto works asynchronously and never owns a page: its callbacks only
// queue (page, generation) pairs, and the cache, under its own lock, drops
// a queued page only if it is still idle with that generation.

// PrefixKey names the contents of a full page: a hash chain over the salt
// and the tokens of every page up to it.
type PrefixKey [sha256.Size]byte

// PrefixStats counts the prefix cache's work.
type PrefixStats struct {
	Lookups     int64 // MapPrefix calls
	Hits        int64 // MapPrefix calls that mapped at least one page
	HitPages    int64 // pages mapped
	HitTokens   int64 // tokens mapped (pages × PageTokens)
	Published   int64 // pages put in the index
	Evictions   int64 // idle pages dropped (ristretto's policy, pool pressure or the KV budget)
	Indexed     int   // pages in the index now (in use or idle)
	Idle        int   // of which no sequence holds: cached copies
	CachedBytes int64 // bytes of the idle pages
	MaxBytes    int64 // ristretto's MaxCost (Options.PrefixBytes with its default)
}

// prefixIndex is the prefix cache's state; guarded by Cache.mu.
type prefixIndex struct {
	at    map[PrefixKey]int32
	key   []PrefixKey // per page: its key while keyed
	keyed []bool
	gen   []uint32 // per page: bumped whenever it goes idle or stops being
	// Idle pages in the order they went idle: a doubly linked list through
	// prev/next, with node len(prev)-1 the sentinel.
	prev, next []int32
	idle       int
	pageBytes  int64

	rc *genCache // nil when PrefixBytes holds no page

	lookups, hits, hitPages, published, evictions int64
}

// newPrefixIndex sets up prefix caching for c (c.o validated).
func newPrefixIndex(c *Cache, pages int) (*prefixIndex, error) {
	px := &prefixIndex{
		at:        make(map[PrefixKey]int32, pages), // never grows: a key per page at most
		key:       make([]PrefixKey, pages),
		keyed:     make([]bool, pages),
		gen:       make([]uint32, pages),
		prev:      make([]int32, pages+1),
		next:      make([]int32, pages+1),
		pageBytes: 8 * int64(c.pageW) * int64(c.o.Layers),
	}
	px.prev[pages], px.next[pages] = int32(pages), int32(pages)
	if c.o.PrefixBytes < px.pageBytes {
		// Too small for one page: nothing idle is kept (pool pressure and
		// the index still work for pages in use).
		return px, nil
	}
	rc, err := newGenCache(pages, c.o.PrefixBytes)
	if err != nil {
		return nil, fmt.Errorf("kvcache: prefix cache: %w", err)
	}
	px.rc = rc
	return px, nil
}

// close stops ristretto. Its Close reports every item it held as evicted;
// those are not evictions of the cache's policy, so they are discarded, and
// pages idled afterwards are dropped at once (the cache is done with).
// c.mu held.
func (px *prefixIndex) close() {
	if px.rc == nil {
		return
	}
	px.rc.close()
	px.rc = nil
}

// rootKey is the key before a sequence's first page: the salt's.
func rootKey(salt []byte) PrefixKey {
	var buf [256]byte
	b := append(buf[:0], "sluice kv prefix\x00"...)
	return sha256.Sum256(append(b, salt...))
}

// chainKey is the key of a page holding tokens after a page keyed prev.
func chainKey(prev PrefixKey, tokens []int32) PrefixKey {
	var buf [sha256.Size + 4*64]byte
	b := append(buf[:0], prev[:]...)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return sha256.Sum256(b)
}

// linkIdle appends page p to the idle list. c.mu held.
func (px *prefixIndex) linkIdle(p int32) {
	s := int32(len(px.prev) - 1)
	last := px.prev[s]
	px.prev[p], px.next[p] = last, s
	px.next[last], px.prev[s] = p, p
	px.idle++
}

// unlinkIdle removes page p from the idle list. c.mu held.
func (px *prefixIndex) unlinkIdle(p int32) {
	a, b := px.prev[p], px.next[p]
	px.next[a], px.prev[b] = b, a
	px.prev[p], px.next[p] = -1, -1
	px.idle--
}

// isIdle reports whether page p is a cached copy no sequence holds. c.mu held.
func (c *Cache) isIdle(p int32) bool {
	return c.px != nil && c.ref[p] == 0 && c.px.keyed[p]
}

// hold adds a reference to page p, taking it out of the idle set if it was
// there. c.mu held.
func (c *Cache) hold(p int32) {
	if c.isIdle(p) {
		px := c.px
		px.unlinkIdle(p)
		if px.rc != nil {
			px.rc.take(int(p), px.gen[p])
		}
		px.gen[p]++ // a queued eviction of it is stale
	}
	c.ref[p]++
}

// idle makes page p, keyed and released by its last sequence, a cached
// copy: offered to ristretto, dropped at once if it will not take it.
// c.mu held.
func (c *Cache) idle(p int32) {
	px := c.px
	px.linkIdle(p)
	px.gen[p]++
	if px.rc == nil || !px.rc.offer(int(p), px.gen[p], px.pageBytes) {
		c.forget(p)
	}
}

// forget drops idle page p from the index and frees it. c.mu held.
func (c *Cache) forget(p int32) {
	px := c.px
	px.unlinkIdle(p)
	delete(px.at, px.key[p])
	px.keyed[p] = false
	if px.rc != nil {
		px.rc.take(int(p), px.gen[p])
	}
	px.gen[p]++
	px.evictions++
	c.free = append(c.free, p)
	if c.res != nil {
		c.dropFrames(p)
	}
}

// reclaim frees the least recently idled page (the pool has no free page).
// false when none is idle. c.mu held.
func (c *Cache) reclaim() bool {
	px := c.px
	if px == nil || px.idle == 0 {
		return false
	}
	c.forget(px.next[len(px.next)-1])
	return true
}

// avail is how many pages takePage can hand out: the free ones and the
// idle cached copies it would take back. c.mu held.
func (c *Cache) avail() int {
	if c.px == nil {
		return len(c.free)
	}
	return len(c.free) + c.px.idle
}

// drainPrefix drops the idle pages ristretto rejected or evicted that are
// still idle with the generation it saw. c.mu held.
func (c *Cache) drainPrefix() {
	px := c.px
	if px == nil || px.rc == nil {
		return
	}
	for _, v := range px.rc.drain() {
		p := int32(v.id)
		if p >= 0 && int(p) < len(c.ref) && c.isIdle(p) && px.gen[p] == v.gen {
			c.forget(p)
		}
	}
}

// MapPrefix starts sequence seq with the longest run of leading pages of
// tokens that the cache holds under salt, shared copy-on-write, and returns
// how many tokens it mapped (a multiple of PageTokens): the caller computes
// tokens from there on. It maps at most (len(tokens)-1)/PageTokens pages, so
// that at least the last token is computed, whose logits the caller needs.
// seq must be empty (unknown, or truncated to 0) and have no pass in flight.
// Without Options.PrefixCache it maps nothing.
func (c *Cache) MapPrefix(seq int32, salt []byte, tokens []int32) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	px := c.px
	if px == nil {
		return 0, nil
	}
	s := c.seqs[seq]
	if s != nil && (s.busy != nil || s.len > 0) {
		return 0, fmt.Errorf("%w: map a prefix into sequence %d: it holds %d tokens (want an empty sequence)", ErrRange, seq, s.len)
	}
	c.drainPrefix()
	px.lookups++
	pt := int(c.pt)
	most := min((len(tokens)-1)/pt, c.o.MaxSeqLen/pt)
	root := rootKey(salt)
	prev := root
	var pages []int32
	var keys []PrefixKey
	for i := range most {
		k := chainKey(prev, tokens[i*pt:(i+1)*pt])
		p, ok := px.at[k]
		if !ok {
			break
		}
		pages, keys = append(pages, p), append(keys, k)
		prev = k
		if px.rc != nil {
			px.rc.touch(int(p)) // an access, for ristretto's frequency estimate
		}
	}
	if len(pages) == 0 {
		return 0, nil
	}
	if s == nil {
		s = c.newSeq(seq)
	}
	s.rooted, s.salt, s.root, s.keys = true, append(s.salt[:0], salt...), root, append(s.keys[:0], keys...)
	for _, p := range pages {
		c.hold(p)
		c.appendPage(s, p)
	}
	s.len = int32(len(pages) * pt)
	s.lastValid = false
	px.hits++
	px.hitPages += int64(len(pages))
	return s.len, nil
}

// Publish puts the full pages of seq's history in the prefix index under
// salt: tokens are the tokens of its slots from the first on (a caller may
// give more or fewer; pages past either end, and pages of an open draft
// tree, are left out). Pages published earlier are not hashed again. A page
// whose key the index already holds (another sequence computed the same
// prefix) stays the sequence's own and is freed with it. It returns the
// number of pages newly indexed. Without Options.PrefixCache it does
// nothing. A sequence with a pass in flight publishes what it held before.
func (c *Cache) Publish(seq int32, salt []byte, tokens []int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	px := c.px
	s := c.seqs[seq]
	if px == nil || s == nil {
		return 0
	}
	c.drainPrefix()
	n := min(int32(min(len(tokens), 1<<31-1)), s.len)
	if s.tree.open() {
		n = min(n, s.tree.start)
	}
	full := int(n / c.pt)
	if !s.rooted || !bytes.Equal(s.salt, salt) {
		// Compared as bytes so that a decode step's publish hashes and
		// allocates nothing until a page fills.
		s.rooted, s.salt, s.root, s.keys = true, append(s.salt[:0], salt...), rootKey(salt), s.keys[:0]
	}
	pt := int(c.pt)
	added := 0
	for i := len(s.keys); i < full; i++ {
		prev := s.root
		if i > 0 {
			prev = s.keys[i-1]
		}
		k := chainKey(prev, tokens[i*pt:(i+1)*pt])
		s.keys = append(s.keys, k)
		p := s.pages[i]
		if px.keyed[p] {
			continue // mapped from the index, or shared with a fork that published it
		}
		if _, ok := px.at[k]; ok {
			continue
		}
		px.at[k], px.key[p], px.keyed[p] = p, k, true
		px.published++
		added++
	}
	return added
}

// trimKeys forgets the keys of s past its first n tokens' full pages (its
// history from slot n on changes). c.mu held.
func (c *Cache) trimKeys(s *seqState, n int32) {
	if full := int(n / c.pt); full < len(s.keys) {
		s.keys = s.keys[:full]
	}
}

// prefixStats fills the prefix cache's counters. c.mu held.
func (c *Cache) prefixStats() PrefixStats {
	px := c.px
	if px == nil {
		return PrefixStats{}
	}
	st := PrefixStats{
		Lookups: px.lookups, Hits: px.hits, HitPages: px.hitPages, HitTokens: px.hitPages * int64(c.pt),
		Published: px.published, Evictions: px.evictions, Indexed: len(px.at), Idle: px.idle,
		CachedBytes: int64(px.idle) * px.pageBytes,
	}
	st.MaxBytes = c.o.PrefixBytes
	return st
}

// PrefixKeys is the keys MapPrefix looks up for tokens under salt in a
// cache of pageTokens-token pages: one per full page it may map, the first
// (len(tokens)-1)/pageTokens. A scheduler compares them to see which
// requests share a prefix before any of it is cached.
func PrefixKeys(salt []byte, tokens []int32, pageTokens int) []PrefixKey {
	if pageTokens <= 0 || len(tokens) == 0 {
		return nil
	}
	keys := make([]PrefixKey, (len(tokens)-1)/pageTokens)
	prev := rootKey(salt)
	for i := range keys {
		keys[i] = chainKey(prev, tokens[i*pageTokens:(i+1)*pageTokens])
		prev = keys[i]
	}
	return keys
}
