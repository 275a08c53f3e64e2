package grammar

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/tokenizer"
)

var negInf = float32(math.Inf(-1))

// ErrNoToken is wrapped by the error of a row whose mask allows no token:
// the grammar needs bytes no token of the vocabulary writes there.
var ErrNoToken = errors.New("no token of the vocabulary can continue the output")

// Processor constrains one request: a logits processor (package sample's
// Processor interface, met by its method set) that masks a row of logits to
// the tokens its matcher allows after the output so far. history[:prompt]
// is the prompt; everything after it is the constrained output. Decoding
// strategies call it along the accepted text, along draft-tree paths and
// along beams; it keeps the State after every prefix it has been asked
// about in a trie, so a call advances only over the tokens no earlier call
// went through (one Advance per new token, not a walk from the start).
//
// A Processor belongs to one request and is called from one goroutine at a
// time; its Matcher is shared.
type Processor struct {
	m      *Matcher
	prompt int
	ends   []int32 // more tokens allowed where the output may end
	stats  *Stats

	root     *pnode
	last     *pnode  // the node of the previous call
	lastPath []int32 // its tokens from the root
	nodes    int
	keepIDs  []int32   // tokens whose logits survive a row's masking
	saved    []float32 // their logits
}

// pnode is the State after one prefix of the output.
type pnode struct {
	tok   int32
	depth int
	s     State
	up    *pnode
	kids  []*pnode
}

// maxTrie bounds a processor's trie: past it (or twice the current path's
// length, for long outputs) every branch off the current path is dropped.
const maxTrie = 1 << 14

// ProcessorOptions configure a Processor.
type ProcessorOptions struct {
	// Prompt is the number of tokens of history before the output.
	Prompt int
	// Ends are tokens besides the vocabulary's end-of-generation ids that
	// end the request (a chat template's end of turn): allowed, like EOG,
	// exactly where the output may end.
	Ends []int32
	// Stats, when set, accumulates the time spent masking rows.
	Stats *Stats
}

// NewProcessor returns a processor over m for one request.
func NewProcessor(m *Matcher, o ProcessorOptions) *Processor {
	root := &pnode{tok: -1, s: m.Start()}
	var ends []int32
	for _, t := range o.Ends {
		if t >= 0 && int(t) < m.v.Len() && !m.v.IsEOG(t) {
			ends = append(ends, t)
		}
	}
	return &Processor{m: m, prompt: o.Prompt, ends: ends, stats: o.Stats, root: root, last: root, nodes: 1}
}

// Matcher returns the processor's matcher.
func (p *Processor) Matcher() *Matcher { return p.m }

// State returns the matcher's state after history (the prompt and the
// output); an error when history is shorter than the prompt or the output
// leaves the grammar.
func (p *Processor) State(history []int32) (State, error) {
	n, err := p.node(history)
	if err != nil {
		return State{}, err
	}
	return n.s, nil
}

func (p *Processor) node(history []int32) (*pnode, error) {
	if len(history) < p.prompt {
		return nil, fmt.Errorf("grammar: history of %d tokens is shorter than the prompt's %d", len(history), p.prompt)
	}
	gen := history[p.prompt:]
	k := 0
	for k < len(gen) && k < len(p.lastPath) && gen[k] == p.lastPath[k] {
		k++
	}
	n := p.last
	for n.depth > k {
		n = n.up
	}
	for i := k; i < len(gen); i++ {
		t := gen[i]
		var c *pnode
		for _, x := range n.kids {
			if x.tok == t {
				c = x
				break
			}
		}
		if c == nil && n.s.Ended() {
			// Past an end token (a draft tree grows past one): every row
			// there is after the end, left as it is (Process).
			c = &pnode{tok: t, depth: n.depth + 1, s: n.s, up: n}
			n.kids = append(n.kids, c)
			p.nodes++
		}
		if c == nil {
			s, ok := p.m.Advance(n.s, t)
			if !ok && p.isEnd(t) && p.m.CanEnd(n.s) {
				s, ok = State{end: true, key: 1}, true
			}
			if !ok {
				p.last, p.lastPath = n, append(p.lastPath[:0], gen[:i]...)
				return nil, fmt.Errorf("grammar: output token %d (id %d, %q) is outside the grammar: expected %s", i, t, p.m.v.Bytes(t), p.m.g.Expected(n.s))
			}
			c = &pnode{tok: t, depth: n.depth + 1, s: s, up: n}
			n.kids = append(n.kids, c)
			p.nodes++
		}
		n = c
	}
	p.last, p.lastPath = n, append(p.lastPath[:k], gen[k:]...)
	if p.nodes > max(maxTrie, 2*n.depth) {
		p.prune()
	}
	return n, nil
}

// prune keeps only the path to the last node.
func (p *Processor) prune() {
	for n := p.last; n.up != nil; n = n.up {
		n.up.kids = append(n.up.kids[:0], n)
	}
	p.last.kids = nil
	p.nodes = p.last.depth + 1
}

func (p *Processor) isEnd(t int32) bool {
	for _, e := range p.ends {
		if e == t {
			return true
		}
	}
	return false
}

// Process sets to -Inf the logit of every token the grammar does not allow
// after history, and of the ids past the vocabulary (a model's padded
// rows). A row at or past an end token is left as it is (see above). A row where no token is allowed is an error wrapping ErrNoToken,
// never a row of -Inf for the sampler to turn into NaN.
func (p *Processor) Process(logits []float32, history []int32) error {
	var t0 time.Time
	if p.stats != nil {
		t0 = time.Now()
	}
	n, err := p.node(history)
	if err != nil {
		return err
	}
	if n.s.Ended() {
		// The output has ended: no session samples here, but a draft tree
		// may grow past an end token. Its rows are left as they are, so
		// they keep the low weight the model gives them.
		return nil
	}
	v := p.m.v.Len()
	if len(logits) < v {
		return fmt.Errorf("grammar: a row of %d logits, the grammar's vocabulary has %d tokens", len(logits), v)
	}
	mask := p.m.MaskView(n.s)
	// The request's own end tokens keep their logits where the output may
	// end; every allowed token keeps its own.
	p.keepIDs, p.saved = p.keepIDs[:0], p.saved[:0]
	if len(p.ends) > 0 && p.m.CanEnd(n.s) {
		for _, t := range p.ends {
			p.keepIDs, p.saved = append(p.keepIDs, t), append(p.saved, logits[t])
		}
	}
	allowed := 0
	for _, w := range mask {
		allowed += bits.OnesCount64(w)
	}
	if allowed+len(p.keepIDs) == 0 {
		return fmt.Errorf("grammar: after %d output tokens: %w: the grammar expects %s", n.depth, ErrNoToken, p.m.g.Expected(n.s))
	}
	if allowed < v/8 {
		// Few tokens allowed (most of a JSON value outside strings): keep
		// them, fill the row with -Inf by doubling copies, put them back.
		for i, w := range mask {
			for w != 0 {
				t := int32(i*64 + bits.TrailingZeros64(w))
				p.keepIDs, p.saved = append(p.keepIDs, t), append(p.saved, logits[t])
				w &= w - 1
			}
		}
		logits[0] = negInf
		for k := 1; k < len(logits); k *= 2 {
			copy(logits[k:], logits[:k])
		}
	} else {
		for i, w := range mask {
			base := i * 64
			for c := ^w; c != 0; c &= c - 1 {
				if j := base + bits.TrailingZeros64(c); j < v {
					logits[j] = negInf
				}
			}
		}
		for j := v; j < len(logits); j++ {
			logits[j] = negInf
		}
	}
	for i, t := range p.keepIDs {
		logits[t] = p.saved[i]
	}
	if p.stats != nil {
		p.stats.add(time.Since(t0))
	}
	return nil
}

// Forced returns the only token the grammar allows after history, when
// there is one and the request has no end tokens of its own allowed there:
// it needs no draw (jump-forward). ok is false otherwise, or when history
// is off the grammar.
func (p *Processor) Forced(history []int32) (tok int32, ok bool) {
	if p.stats != nil {
		defer func(t0 time.Time) { p.stats.addForced(time.Since(t0)) }(time.Now())
	}
	n, err := p.node(history)
	if err != nil || n.s.Ended() || len(p.ends) > 0 && p.m.CanEnd(n.s) {
		return -1, false
	}
	return p.m.Forced(n.s)
}

// Allows reports whether tok may follow history: what a draft that was not
// drawn from a processed distribution (prompt lookup) is cut by.
func (p *Processor) Allows(history []int32, tok int32) (bool, error) {
	n, err := p.node(history)
	if err != nil {
		return false, err
	}
	if p.isEnd(tok) {
		return p.m.CanEnd(n.s), nil
	}
	_, ok := p.m.Advance(n.s, tok)
	return ok, nil
}

// Stats accumulates the time processors spent masking rows (for bench's
// mask time per token). Safe for concurrent use.
type Stats struct {
	rows, nanos atomic.Int64
}

// addForced counts the time of a Forced call (no row is masked, but the
// mask of a new state is computed there, which a later row then finds
// cached).
func (s *Stats) addForced(d time.Duration) { s.nanos.Add(int64(d)) }

func (s *Stats) add(d time.Duration) {
	s.rows.Add(1)
	s.nanos.Add(int64(d))
}

// Rows is the number of rows masked so far.
func (s *Stats) Rows() int64 { return s.rows.Load() }

// Time is the time spent masking them, and computing masks for Forced.
func (s *Stats) Time() time.Duration { return time.Duration(s.nanos.Load()) }

// Spec is a constraint as a request carries it: a JSON Schema or a GBNF
// grammar (exactly one).
type Spec struct {
	// Schema is a JSON Schema; `{"type":"object"}` is OpenAI's json_object.
	Schema []byte
	// GBNF is a grammar in llama.cpp's syntax (root rule "root").
	GBNF string
}

// Compile parses the spec's grammar (a schema compiles to one).
func (s Spec) Compile() (*Grammar, error) {
	switch {
	case len(s.Schema) > 0 && s.GBNF != "":
		return nil, errors.New("grammar: both a JSON Schema and a GBNF grammar are set; give one")
	case len(s.Schema) > 0:
		return FromJSONSchema(s.Schema)
	case s.GBNF != "":
		return ParseGBNF(s.GBNF)
	}
	return nil, errors.New("grammar: neither a JSON Schema nor a GBNF grammar is set")
}

func (s Spec) key() string {
	if len(s.Schema) > 0 {
		return "s" + string(s.Schema)
	}
	return "g" + s.GBNF
}

// Cache is one engine's matchers: the model's Vocab, built on first use,
// and a Matcher per grammar (keyed by the schema's or grammar's bytes), so
// every request with the same constraint shares one matcher and its mask
// caches. It holds at most maxMatchers, dropping the least recently used
// (each may hold up to a few hundred MiB of masks on a large vocabulary, so
// a server that sees many distinct schemas stays bounded). Safe for
// concurrent use.
type Cache struct {
	tok  tokenizer.Tokenizer
	once sync.Once
	v    *Vocab

	mu   sync.Mutex
	m    map[string]*cached
	tick uint64

	// Stats is what every processor made from this cache spent masking.
	Stats Stats
}

type cached struct {
	m    *Matcher
	used uint64
}

// maxMatchers bounds a cache.
const maxMatchers = 8

// NewCache returns an empty cache over tok's vocabulary.
func NewCache(tok tokenizer.Tokenizer) *Cache {
	return &Cache{tok: tok, m: map[string]*cached{}}
}

// Vocab returns the vocabulary, built on the first call.
func (c *Cache) Vocab() *Vocab {
	c.once.Do(func() { c.v = FromTokenizer(c.tok) })
	return c.v
}

// Matcher returns the shared matcher of spec, compiling it on first use.
// The error names what is wrong with the schema or grammar.
func (c *Cache) Matcher(spec Spec) (*Matcher, error) {
	k := spec.key()
	c.mu.Lock()
	if e := c.m[k]; e != nil {
		c.tick++
		e.used = c.tick
		c.mu.Unlock()
		return e.m, nil
	}
	c.mu.Unlock()
	g, err := spec.Compile()
	if err != nil {
		return nil, err
	}
	m := NewMatcher(g, c.Vocab())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	if e := c.m[k]; e != nil {
		e.used = c.tick
		return e.m, nil
	}
	if len(c.m) >= maxMatchers {
		var oldest string
		var at uint64
		for key, e := range c.m {
			if oldest == "" || e.used < at {
				oldest, at = key, e.used
			}
		}
		delete(c.m, oldest)
	}
	c.m[k] = &cached{m: m, used: c.tick}
	return m, nil
}

// Processor returns a processor of spec for a request whose prompt has
// prompt tokens and whose other end tokens are ends.
func (c *Cache) Processor(spec Spec, prompt int, ends []int32) (*Processor, error) {
	m, err := c.Matcher(spec)
	if err != nil {
		return nil, err
	}
	return NewProcessor(m, ProcessorOptions{Prompt: prompt, Ends: ends, Stats: &c.Stats}), nil
}
