package grammar

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"unicode/utf8"
)

// node is one frame of a parse stack, a persistent linked list: the top
// frame's pos is a character element (with part, the UTF-8 bytes of that
// character read so far), the frames below hold the positions to continue at
// when the rule above them ends. Frames are never modified once made, so
// states share them freely.
type node struct {
	pos  int32
	part uint32 // 0, or a partial character: value | rem<<21 | len<<23
	up   *node
	hash uint64 // of pos, part and up's hash: the whole stack's identity
}

func mix(x, y uint64) uint64 {
	h := x*0x9E3779B97F4A7C15 ^ y
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	h ^= h >> 29
	return h
}

// same reports whether two stacks are equal frame by frame.
func same(a, b *node) bool {
	for a != b {
		if a == nil || b == nil || a.hash != b.hash || a.pos != b.pos || a.part != b.part {
			return false
		}
		a, b = a.up, b.up
	}
	return true
}

// arena hands out frames in chunks, so a mask walk that makes hundreds of
// thousands of short-lived frames costs a few allocations.
type arena struct {
	chunks [][]node
	cur    []node
	used   int // chunks fully handed out (reset reuses them)
}

const chunkNodes = 1024

func (a *arena) node(pos int32, part uint32, up *node) *node {
	if len(a.cur) == cap(a.cur) {
		if a.used < len(a.chunks) {
			a.cur = a.chunks[a.used][:0]
		} else {
			// Start small: Advance makes a handful of frames per token.
			n := chunkNodes
			if len(a.chunks) < 6 {
				n = 16 << len(a.chunks)
			}
			a.cur = make([]node, 0, n)
			a.chunks = append(a.chunks, a.cur)
		}
		a.used++
	}
	h := uint64(0x51ED27)
	if up != nil {
		h = up.hash
	}
	a.cur = append(a.cur, node{pos: pos, part: part, up: up, hash: mix(uint64(pos)<<32|uint64(part), h)})
	return &a.cur[len(a.cur)-1]
}

// reset makes the arena's memory reusable: only for arenas whose frames
// no longer escape (the mask walk's scratch).
func (a *arena) reset() {
	a.used = 0
	a.cur = nil
}

// set is the stacks reached after some input, without duplicates.
type set struct {
	st   []*node
	acc  bool // some stack completed the root rule: the input may end here
	sent bool // some stack popped into the unknown context below a frame window
	// seen holds the expansions made since the last clear, for grammars
	// whose rules can cycle without consuming: the same position over the
	// same frames expands to the same stacks.
	seen map[expansion]struct{}
}

type expansion struct {
	p  int32
	up *node
}

func (s *set) add(n *node) {
	for _, o := range s.st {
		if o.hash == n.hash && same(o, n) {
			return
		}
	}
	s.st = append(s.st, n)
}

func (s *set) clear() {
	s.st = s.st[:0]
	s.acc, s.sent = false, false
	clear(s.seen)
}

// alive reports whether the set can still be a prefix of the language
// (with sent: as far as the window shows).
func (s *set) alive() bool { return len(s.st) > 0 || s.acc || s.sent }

// sentinel stands for the frames below a window of a stack's top frames:
// popping into it means the rest depends on the context (see frameEntry).
var sentinel = &node{pos: -1, hash: 0x5E47F1E1D}

// State is where a matcher stands after some output: the set of parse
// stacks that are still alive. It is a small immutable value: copying it
// is a fork (beams and draft trees copy freely), and Advance never changes
// the State it is given.
type State struct {
	st  []*node
	acc bool
	end bool // end-of-generation was accepted: nothing may follow
	key uint64
}

// Ended reports whether an end-of-generation token was advanced over.
func (s State) Ended() bool { return s.end }

// Dead reports whether no continuation and no end is possible (the zero
// State, or one made by hand); states from Start and Advance are never
// dead before they end.
func (s State) Dead() bool { return len(s.st) == 0 && !s.acc }

func newState(s *set) State {
	st := slices.Clone(s.st)
	slices.SortFunc(st, func(a, b *node) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	k := uint64(len(st))
	if s.acc {
		k |= 1 << 40
	}
	for _, n := range st {
		k = mix(k, n.hash)
	}
	return State{st: st, acc: s.acc, key: k}
}

func (s State) equal(o State) bool {
	if s.key != o.key || s.acc != o.acc || s.end != o.end || len(s.st) != len(o.st) {
		return false
	}
	for i := range s.st {
		if !same(s.st[i], o.st[i]) {
			return false
		}
	}
	return true
}

// expand adds to out the stacks that begin at position p of an
// alternative, with up below: a character element is a top; a rule
// reference pushes where to continue and expands each alternative of the
// rule; the end of an alternative pops to up (or accepts at the bottom).
// Left recursion that pushes frames is refused when a grammar is built,
// and cycles that do not are cut by out.seen, so this terminates.
func (g *Grammar) expand(p int32, up *node, out *set, a *arena) {
	for {
		e := g.elems[p]
		if g.cyclic && e.kind != elChar {
			k := expansion{p, up}
			if _, done := out.seen[k]; done {
				return
			}
			if out.seen == nil {
				out.seen = map[expansion]struct{}{}
			}
			out.seen[k] = struct{}{}
		}
		switch e.kind {
		case elChar:
			out.add(a.node(p, 0, up))
			return
		case elEnd:
			if up == nil {
				out.acc = true
				return
			}
			if up == sentinel {
				out.sent = true
				return
			}
			p, up = up.pos, up.up
		case elRef:
			cont := up
			if g.elems[p+1].kind != elEnd {
				cont = a.node(p+1, 0, up)
			}
			// A rule called last in an alternative returns straight to up:
			// repetitions (right recursion) keep stacks short.
			alts := g.alts[e.arg]
			for _, s := range alts[:len(alts)-1] {
				g.expand(s, cont, out, a)
			}
			p, up = alts[len(alts)-1], cont
		}
	}
}

// UTF-8 partial-character encoding in node.part.
const (
	partRemShift = 21
	partLenShift = 23
)

var minForLen = [5]rune{0, 0, 0x80, 0x800, 0x10000}

// stepByte feeds byte c to the character element of stack n. It returns
// the new partial state (done false), or done true when c completed a
// character of the class, or ok false when no character of the class can
// begin with the bytes read.
func (g *Grammar) stepByte(n *node, c byte) (part uint32, done, ok bool) {
	cls := &g.classes[g.elems[n.pos].arg]
	var v rune
	var rem, ln uint32
	if n.part == 0 {
		switch {
		case c < 0x80:
			return 0, true, cls.has(rune(c))
		case c >= 0xC2 && c <= 0xDF:
			v, rem, ln = rune(c&0x1F), 1, 2
		case c >= 0xE0 && c <= 0xEF:
			v, rem, ln = rune(c&0x0F), 2, 3
		case c >= 0xF0 && c <= 0xF4:
			v, rem, ln = rune(c&0x07), 3, 4
		default:
			return 0, false, false
		}
	} else {
		if c&0xC0 != 0x80 {
			return 0, false, false
		}
		v = rune(n.part&(1<<partRemShift-1))<<6 | rune(c&0x3F)
		rem = (n.part>>partRemShift)&3 - 1
		ln = n.part >> partLenShift
	}
	shift := 6 * rem
	lo := v << shift
	hi := lo | (1<<shift - 1)
	lo = max(lo, minForLen[ln])
	hi = min(hi, utf8.MaxRune)
	if lo > hi {
		return 0, false, false
	}
	if rem == 0 {
		if v >= 0xD800 && v <= 0xDFFF {
			return 0, false, false
		}
		return 0, true, cls.has(v)
	}
	// Some character of the class must still be reachable (the class holds
	// no surrogates, so ranges that fall in them never meet it).
	if !cls.meets(lo, hi) {
		return 0, false, false
	}
	return uint32(v) | rem<<partRemShift | ln<<partLenShift, false, true
}

// step feeds byte c to every stack of in and collects the survivors in
// out (cleared first).
func (g *Grammar) step(in []*node, c byte, out *set, a *arena) {
	out.clear()
	for _, n := range in {
		part, done, ok := g.stepByte(n, c)
		switch {
		case !ok:
		case done:
			g.expand(n.pos+1, n.up, out, a)
		default:
			out.add(a.node(n.pos, part, n.up))
		}
	}
}

// start is the state before any output.
func (g *Grammar) start() State {
	var s set
	var a arena
	for _, p := range g.alts[g.root] {
		g.expand(p, nil, &s, &a)
	}
	return newState(&s)
}

// advanceBytes feeds b to s; ok is false when b leaves the language's
// prefixes.
func (g *Grammar) advanceBytes(s State, b []byte) (State, bool) {
	if s.end {
		return s, false
	}
	if len(b) == 0 {
		return s, true
	}
	var a arena
	var x, y set
	cur := s.st
	for _, c := range b {
		g.step(cur, c, &x, &a)
		if len(x.st) == 0 && !x.acc {
			return s, false
		}
		x, y = y, x
		cur = y.st
	}
	return newState(&y), true
}

// Matcher applies one grammar to one vocabulary. It is safe for concurrent
// use and meant to be shared by every sequence constrained by the grammar:
// it caches the mask of every state it has computed (keyed by the state's
// stacks), so sequences that pass through the same states — every string
// body, every object key position — pay for a mask walk once.
type Matcher struct {
	g *Grammar
	v *Vocab

	mu       sync.RWMutex
	cache    map[uint64][]*maskEntry
	cached   int // entries
	frames   map[uint64][]*frameEntry
	nframes  int
	maxCache int // entries of each map
	// deep is the repetition depth from which bounded-repetition chains
	// look alike to every token (see canonPos).
	deep int32

	scratch sync.Pool // *walker
}

type maskEntry struct {
	s       State
	mask    []uint64
	forced  int32 // the only allowed token, or -1
	mustEnd bool  // only end-of-generation tokens are allowed
}

// maxCacheBytes bounds one matcher's mask cache; past it the cache is
// dropped and refilled (the states of the moment come back fast).
const maxCacheBytes = 64 << 20

// NewMatcher prepares g for vocabulary v.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	words := (v.Len() + 63) / 64
	return &Matcher{g: g, v: v, cache: map[uint64][]*maskEntry{}, frames: map[uint64][]*frameEntry{}, maxCache: max(64, maxCacheBytes/(16*max(words, 1))),
		deep: int32(v.maxStarts) + 1}
}

// canonPos maps a position of a bounded repetition's chain at depth k
// (room for the current x and k-1 more) to the same place at depth
// m.deep when k is deeper, for the frame-window cache. Telling the two
// apart takes a token that begins m.deep more characters after the current
// one (each x consumes at least one whole character), and no token of the
// vocabulary begins that many: so a string with maxLength 40 does not need
// a window walk of the whole vocabulary for each of its first 40-deep
// positions, one serves them all. Tokens that leave the window are checked
// against the real stack, which keeps its real depth.
//
// Then positions whose alternatives continue with the same elements are
// one (Grammar.alike): the closing quote of every string rule, say.
func (m *Matcher) canonPos(p int32) int32 {
	if m.g.rep != nil {
		if r := m.g.rep[p]; r.depth > m.deep {
			p = m.g.alts[m.g.chains[r.chain][m.deep-1]][0] + r.off
		}
	}
	return m.g.alike[p]
}

// Grammar returns the matcher's grammar.
func (m *Matcher) Grammar() *Grammar { return m.g }

// Vocab returns the matcher's vocabulary.
func (m *Matcher) Vocab() *Vocab { return m.v }

// Start returns the state before any output.
func (m *Matcher) Start() State { return m.g.start() }

// Advance returns the state after token tok, and whether tok was allowed
// in s (then Mask(s) has its bit set). An end-of-generation token is
// allowed exactly when CanEnd(s), and leads to an ended state in which
// nothing is allowed. s itself is unchanged.
func (m *Matcher) Advance(s State, tok int32) (State, bool) {
	if s.end || tok < 0 || int(tok) >= m.v.Len() {
		return s, false
	}
	if m.v.IsEOG(tok) {
		if !s.acc {
			return s, false
		}
		return State{end: true, key: 1}, true
	}
	b := m.v.tok[tok]
	if len(b) == 0 {
		return s, false // a control token that prints nothing
	}
	return m.g.advanceBytes(s, b)
}

// AdvanceBytes feeds raw output bytes (not tokens) to s: for text that did
// not come from the vocabulary. ok is false when b leaves the language.
func (m *Matcher) AdvanceBytes(s State, b []byte) (State, bool) { return m.g.advanceBytes(s, b) }

// CanEnd reports whether the output so far is a complete string of the
// language: whether end-of-generation is allowed.
func (m *Matcher) CanEnd(s State) bool { return s.acc && !s.end }

// Mask writes into allowed (at least (Vocab().Len()+63)/64 words) the set
// of tokens allowed in s: bit t of allowed[t/64] is set when Advance(s, t)
// would succeed.
func (m *Matcher) Mask(s State, allowed []uint64) {
	e := m.entry(s)
	copy(allowed, e.mask)
}

// Forced returns the only token allowed in s, for jump-forward decoding
// (no draw is needed), or ok false when zero or several tokens are allowed.
func (m *Matcher) Forced(s State) (tok int32, ok bool) {
	e := m.entry(s)
	return e.forced, e.forced >= 0
}

// Apply sets logits[t] to -Inf for every token t not allowed in s: what a
// logits processor does before the sampler draws. Logits past the
// vocabulary (models whose output rows are padded beyond the tokenizer's
// size) are never allowed. Whole words of allowed tokens are skipped.
func (m *Matcher) Apply(s State, logits []float32) {
	mask := m.MaskView(s)
	inf := float32(math.Inf(-1))
	for w, x := range mask {
		if x == ^uint64(0) {
			continue
		}
		base := w * 64
		for b := 0; b < 64 && base+b < len(logits); b++ {
			if x>>b&1 == 0 {
				logits[base+b] = inf
			}
		}
	}
	for i := len(mask) * 64; i < len(logits); i++ {
		logits[i] = inf
	}
}

// MustEnd reports whether the output is complete and nothing may follow
// but end of generation (every end-of-generation id is allowed, no other
// token): a decoder can stop without a draw, whatever the number of
// end-of-generation ids the vocabulary has.
func (m *Matcher) MustEnd(s State) bool { return m.entry(s).mustEnd }

// MaskView returns the cached mask of s without copying. The slice is
// shared: the caller must not modify it.
func (m *Matcher) MaskView(s State) []uint64 { return m.entry(s).mask }

func (m *Matcher) entry(s State) *maskEntry {
	m.mu.RLock()
	for _, e := range m.cache[s.key] {
		if e.s.equal(s) {
			m.mu.RUnlock()
			return e
		}
	}
	m.mu.RUnlock()
	e := m.compute(s)
	m.mu.Lock()
	if m.cached >= m.maxCache {
		m.cache = map[uint64][]*maskEntry{}
		m.cached = 0
	}
	m.cache[s.key] = append(m.cache[s.key], e)
	m.cached++
	m.mu.Unlock()
	return e
}

// walker is the scratch of one mask computation.
type walker struct {
	a      arena
	levels []*canon
	unc    []bool // unc[d]: the prefix of d bytes passed through the context
	intern map[uint64][]*canon
	one    [1]*node
	x, y   set
}

func (m *Matcher) compute(s State) *maskEntry {
	n := m.v.Len()
	mask := make([]uint64, (n+63)/64)
	if !s.end {
		w, _ := m.scratch.Get().(*walker)
		if w == nil {
			w = &walker{}
		}
		for _, st := range s.st {
			fe := m.frameEntry(st, w)
			for i, x := range fe.acc {
				mask[i] |= x
			}
			for _, t := range fe.unc {
				if mask[t/64]>>(t%64)&1 == 0 && m.checkStack(st, m.v.tok[t], w) {
					mask[t/64] |= 1 << (t % 64)
				}
			}
		}
		w.a.reset()
		m.scratch.Put(w)
		if s.acc {
			for _, t := range m.v.eog {
				mask[t/64] |= 1 << (t % 64)
			}
		}
	}
	forced, cnt := int32(-1), 0
	for i, x := range mask {
		if x != 0 {
			cnt += bits.OnesCount64(x)
			forced = int32(i*64 + bits.TrailingZeros64(x))
		}
	}
	if cnt != 1 {
		forced = -1
	}
	// Only end-of-generation left: the output is complete.
	mustEnd := s.acc && !s.end && cnt == len(m.v.eog)
	return &maskEntry{s: s, mask: mask, forced: forced, mustEnd: mustEnd}
}

// checkStack reports whether stack n can consume b: the exact test for a
// token whose fate depends on the frames below the window.
func (m *Matcher) checkStack(n *node, b []byte, w *walker) bool {
	w.one[0] = n
	cur := w.one[:]
	x, y := &w.x, &w.y
	for _, c := range b {
		m.g.step(cur, c, x, &w.a)
		if len(x.st) == 0 && !x.acc {
			return false
		}
		x, y = y, x
		cur = y.st
	}
	return true
}

// frameWindow is how many top frames of a stack a frame entry sees. Three
// frames hold a JSON string's body (the character, the repetition, the
// string rule), so the entry for "inside a string" is one entry whatever
// the string belongs to.
const frameWindow = 3

// frameEntry is the context-independent part of a stack's mask (xgrammar's
// adaptive token mask cache, computed lazily): the tokens the stack's top
// frames accept whatever lies below them (acc), and the tokens that would
// pop below the window before their last byte, which only the whole stack
// can decide (unc, checked one by one). Every other token is rejected by
// the window alone.
type frameEntry struct {
	key    [frameWindow]uint64
	n      int
	bottom bool // the stack ends within the window
	acc    []uint64
	unc    []int32
}

func (m *Matcher) windowOf(n *node) (key [frameWindow]uint64, cnt int, bottom bool, h uint64) {
	h = 0x3A7
	for n != nil && cnt < frameWindow {
		key[cnt] = uint64(uint32(m.canonPos(n.pos)))<<32 | uint64(n.part)
		h = mix(h, key[cnt])
		cnt++
		n = n.up
	}
	bottom = n == nil
	if bottom {
		h = mix(h, 1)
	}
	return key, cnt, bottom, h
}

func (m *Matcher) frameEntry(n *node, w *walker) *frameEntry {
	key, cnt, bottom, h := m.windowOf(n)
	m.mu.RLock()
	for _, e := range m.frames[h] {
		if e.key == key && e.n == cnt && e.bottom == bottom {
			m.mu.RUnlock()
			return e
		}
	}
	m.mu.RUnlock()
	e := &frameEntry{key: key, n: cnt, bottom: bottom, acc: make([]uint64, (m.v.Len()+63)/64)}
	// The window as a stack of its own, the sentinel below it.
	up := sentinel
	if bottom {
		up = nil
	}
	for i := cnt - 1; i >= 0; i-- {
		up = w.a.node(int32(key[i]>>32), uint32(key[i]), up)
	}
	m.walkWindow(up, e, w)
	m.mu.Lock()
	if m.nframes >= m.maxCache {
		m.frames = map[uint64][]*frameEntry{}
		m.nframes = 0
	}
	m.frames[h] = append(m.frames[h], e)
	m.nframes++
	m.mu.Unlock()
	return e
}

// walkWindow classifies every non-empty, non-EOG token for the window
// stack top. Tokens are visited in byte order, so a token shares the states
// of its common prefix with the one before (a trie walked depth first
// without building it); when a prefix dies, every token that starts with it
// shares its fate and is skipped.
func (m *Matcher) walkWindow(top *node, e *frameEntry, w *walker) {
	v := m.v
	if len(w.levels) < v.maxLen+1 {
		w.levels = make([]*canon, v.maxLen+1)
		w.unc = make([]bool, v.maxLen+1)
	}
	if w.intern == nil {
		w.intern = map[uint64][]*canon{}
	}
	clear(w.intern)
	lv, unc := w.levels, w.unc
	w.x.clear()
	w.x.st = append(w.x.st, top)
	lv[0] = w.canonical(&w.x)
	unc[0] = false
	valid := 0 // lv[0..valid] hold the states of the previous token's prefix
	ids, lcp := v.sorted, v.lcp
	for i := 0; i < len(ids); {
		t := v.tok[ids[i]]
		d := min(int(lcp[i]), valid)
		died := false
		for d < len(t) {
			lv[d+1] = m.next(lv[d], t[d], w)
			unc[d+1] = unc[d] || lv[d].sent
			if !lv[d+1].alive() {
				died = true
				break
			}
			d++
		}
		valid = d
		if !died {
			id := ids[i]
			e.acc[id/64] |= 1 << (id % 64)
			i++
			continue
		}
		// t[:d+1] dies in the window: every token that begins with it is
		// rejected, or undecided when the prefix reached below the window.
		next := int(v.skip[int(v.skipAt[i])+d])
		if unc[d+1] {
			e.unc = append(e.unc, ids[i:next]...)
		}
		i = next
	}
}

// canon is an interned set of stacks: within one window walk, equal sets
// are one canon, so a transition computed once is a map lookup after (the
// body of a string returns to the same set after every ordinary
// character).
type canon struct {
	set
	h    uint64
	next *[256]*canon // transitions computed so far
}

func (w *walker) canonical(s *set) *canon {
	h := uint64(len(s.st))
	for _, n := range s.st {
		h += mix(n.hash, 0x7F4A7C15) // order-independent
	}
	if s.acc {
		h ^= 0xACC
	}
	if s.sent {
		h ^= 0x5E47 << 16
	}
	for _, c := range w.intern[h] {
		if c.acc == s.acc && c.sent == s.sent && sameSet(c.st, s.st) {
			return c
		}
	}
	c := &canon{set: set{st: slices.Clone(s.st), acc: s.acc, sent: s.sent}, h: h}
	w.intern[h] = append(w.intern[h], c)
	return c
}

func sameSet(a, b []*node) bool {
	if len(a) != len(b) {
		return false
	}
outer:
	for _, x := range a {
		for _, y := range b {
			if x.hash == y.hash && same(x, y) {
				continue outer
			}
		}
		return false
	}
	return true
}

// next is the set after byte b from c, memoized.
func (m *Matcher) next(c *canon, b byte, w *walker) *canon {
	if c.next == nil {
		c.next = new([256]*canon)
	} else if r := c.next[b]; r != nil {
		return r
	}
	m.g.step(c.st, b, &w.x, &w.a)
	r := w.canonical(&w.x)
	c.next[b] = r
	return r
}
