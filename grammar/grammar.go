package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrEmpty is wrapped by the error for a grammar (or schema) whose language
// has no string at all: nothing could ever be generated under it.
var ErrEmpty = errors.New("the language is empty")

// rng is an inclusive range of code points.
type rng struct{ lo, hi rune }

func classOf(lo, hi rune) []rng { return []rng{{lo, hi}} }

// class is a set of code points: sorted, disjoint, non-adjacent ranges
// (negation is applied when the class is built).
type class struct{ r []rng }

func (c *class) has(cp rune) bool {
	for _, x := range c.r {
		if cp < x.lo {
			return false
		}
		if cp <= x.hi {
			return true
		}
	}
	return false
}

// meets reports whether some code point of [lo, hi] is in c.
func (c *class) meets(lo, hi rune) bool {
	for _, x := range c.r {
		if x.hi >= lo && x.lo <= hi {
			return true
		}
		if x.lo > hi {
			return false
		}
	}
	return false
}

// normalize sorts and merges ranges, negates them when neg is set, and
// removes the surrogates, which UTF-8 cannot encode.
func normalize(rs []rng, neg bool) []rng {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b rng) int { return int(a.lo - b.lo) })
	var m []rng
	for _, x := range rs {
		if n := len(m); n > 0 && x.lo <= m[n-1].hi+1 {
			m[n-1].hi = max(m[n-1].hi, x.hi)
			continue
		}
		m = append(m, x)
	}
	if neg {
		var inv []rng
		next := rune(0)
		for _, x := range m {
			if x.lo > next {
				inv = append(inv, rng{next, x.lo - 1})
			}
			next = x.hi + 1
		}
		if next <= utf8.MaxRune {
			inv = append(inv, rng{next, utf8.MaxRune})
		}
		m = inv
	}
	var out []rng
	for _, x := range m {
		if x.lo < 0xD800 && x.hi >= 0xD800 {
			out = append(out, rng{x.lo, 0xD7FF})
			x.lo = 0xE000
		}
		if x.lo >= 0xD800 && x.lo <= 0xDFFF {
			x.lo = 0xE000
		}
		if x.lo <= x.hi {
			out = append(out, x)
		}
	}
	return out
}

// Element kinds of the flat grammar.
const (
	elChar uint8 = iota // match one character of class arg
	elRef               // expand rule arg
	elEnd               // end of an alternative: return to the caller
)

type elem struct {
	kind uint8
	arg  int32
}

// Grammar is a compiled grammar: rules flattened into one element array,
// as llama.cpp lays them out. A position is an index into elems; every
// alternative is a run of elChar/elRef elements ended by elEnd. A Grammar
// is immutable and safe for concurrent use.
type Grammar struct {
	elems   []elem
	classes []class
	alts    [][]int32 // rule -> start positions of its alternatives
	names   []string  // rule names (generated helper rules included)
	root    int32
	src     string // the GBNF text, for String
	cyclic  bool   // rules can call each other in a cycle without consuming (see leftRecursion)
	// chains are the bounded repetitions x{m,n} of a non-nullable x, by x:
	// chains[c][k-1] is the rule opt_k ::= x opt_(k-1) | ε (up to k more
	// x). rep[pos] places a position of opt_k's first alternative in its
	// chain (depth k, 0 for positions in no chain); nil when there are no
	// chains. A matcher uses them to treat opt_k and opt_j alike when no
	// token can tell them apart.
	chains [][]int32
	rep    []repPos
	// alike[pos] is the first position whose elements up to the end of
	// its alternative are the same as pos's: the two behave alike in any
	// stack (matching and expansion read only elems[pos:]), so the
	// matcher's frame windows treat them as one.
	alike []int32
}

// repPos is a position's place in a bounded-repetition chain.
type repPos struct {
	chain, depth, off int32 // off: the position's offset in opt_depth's first alternative
}

// String returns the grammar's GBNF source (for a schema, the generated
// grammar).
func (g *Grammar) String() string { return g.src }

// builder turns parsed rule bodies into the flat form, adding helper rules
// for groups and repetitions.
type builder struct {
	g        *Grammar
	ruleID   map[string]int32
	body     [][][]elem // rule -> alternatives -> elements (without elEnd)
	classIDs map[string]int32
	aux      map[string]int32 // canonical helper rules, shared
	// chains: the opt_k rules of bounded repetitions by the repeated
	// element, [k-1] = opt_k (helper rules are shared, so one x has one
	// chain whatever the bounds of its repetitions).
	chains map[elem][]int32
}

func newBuilder() *builder {
	return &builder{g: &Grammar{}, ruleID: map[string]int32{}, classIDs: map[string]int32{}, aux: map[string]int32{}, chains: map[elem][]int32{}}
}

func (b *builder) class(rs []rng, neg bool) int32 {
	n := normalize(rs, neg)
	var sb strings.Builder
	for _, x := range n {
		fmt.Fprintf(&sb, "%x-%x,", x.lo, x.hi)
	}
	k := sb.String()
	if id, ok := b.classIDs[k]; ok {
		return id
	}
	id := int32(len(b.g.classes))
	b.g.classes = append(b.g.classes, class{n})
	b.classIDs[k] = id
	return id
}

func (b *builder) rule(name string) int32 {
	if id, ok := b.ruleID[name]; ok {
		return id
	}
	id := int32(len(b.body))
	b.ruleID[name] = id
	b.body = append(b.body, nil)
	b.g.names = append(b.g.names, name)
	return id
}

func (b *builder) define(name string, e *expr) {
	id := b.rule(name)
	b.body[id] = b.alternatives(e)
}

func (b *builder) alternatives(e *expr) [][]elem {
	if e.kind != exAlt {
		return [][]elem{b.sequence(e)}
	}
	var alts [][]elem
	for _, k := range e.kids {
		alts = append(alts, b.sequence(k))
	}
	return alts
}

func (b *builder) sequence(e *expr) []elem {
	var out []elem
	var add func(e *expr)
	add = func(e *expr) {
		switch e.kind {
		case exSeq:
			for _, k := range e.kids {
				add(k)
			}
		case exChar:
			out = append(out, elem{elChar, e.cls})
		case exRef:
			out = append(out, elem{elRef, b.rule(e.name)})
		case exAlt:
			if len(e.kids) == 1 {
				add(e.kids[0])
				return
			}
			out = append(out, elem{elRef, b.helper(b.alternatives(e))})
		case exRep:
			x := b.one(e.kids[0])
			for range e.min {
				out = append(out, x)
			}
			switch {
			case e.max < 0:
				// x* as right recursion: star ::= x star | ε.
				id := b.helperRule()
				b.body[id] = [][]elem{{x, {elRef, id}}, {}}
				out = append(out, elem{elRef, b.shareAux(id)})
			case e.max > e.min:
				// Up to k more: opt_k ::= x opt_{k-1} | ε, opt_1 ::= x | ε.
				prev := int32(-1)
				for k := range e.max - e.min {
					id := b.helperRule()
					if prev < 0 {
						b.body[id] = [][]elem{{x}, {}}
					} else {
						b.body[id] = [][]elem{{x, {elRef, prev}}, {}}
					}
					prev = b.shareAux(id)
					if c := b.chains[x]; len(c) == k {
						b.chains[x] = append(c, prev)
					}
				}
				out = append(out, elem{elRef, prev})
			}
		}
	}
	add(e)
	return out
}

// one returns a single element for e: a character, a rule reference, or a
// helper rule holding e.
func (b *builder) one(e *expr) elem {
	switch e.kind {
	case exChar:
		return elem{elChar, e.cls}
	case exRef:
		return elem{elRef, b.rule(e.name)}
	case exSeq:
		if len(e.kids) == 1 {
			return b.one(e.kids[0])
		}
	case exAlt:
		if len(e.kids) == 1 {
			return b.one(e.kids[0])
		}
	}
	return elem{elRef, b.helper(b.alternatives(e))}
}

func (b *builder) helperRule() int32 {
	return b.rule(fmt.Sprintf("_%d", len(b.body)))
}

func (b *builder) helper(alts [][]elem) int32 {
	id := b.helperRule()
	b.body[id] = alts
	return b.shareAux(id)
}

// shareAux returns an existing helper rule with the same body as id, if
// any (schemas repeat the same groups many times), else id.
func (b *builder) shareAux(id int32) int32 {
	var sb strings.Builder
	for _, a := range b.body[id] {
		for _, e := range a {
			r := e.arg
			if e.kind == elRef && r == id {
				r = -1 // self reference
			}
			fmt.Fprintf(&sb, "%d.%d ", e.kind, r)
		}
		sb.WriteByte('|')
	}
	k := sb.String()
	if old, ok := b.aux[k]; ok {
		b.body[id] = nil // unreachable now; pruned in finish
		return old
	}
	b.aux[k] = id
	return id
}

// finish checks the rules (left recursion, empty language), drops the
// alternatives that can never complete, and lays the grammar out flat.
func (b *builder) finish(root string) (*Grammar, error) {
	g := b.g
	n := len(b.body)
	// Productive rules: some alternative whose every element can match.
	prod := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r, alts := range b.body {
			if prod[r] {
				continue
			}
			for _, a := range alts {
				if b.altProductive(a, prod) {
					prod[r], changed = true, true
					break
				}
			}
		}
	}
	rootID := b.ruleID[root]
	if !prod[rootID] {
		return nil, fmt.Errorf("grammar: rule %q derives no finite string: %w", root, ErrEmpty)
	}
	for r := range b.body {
		b.body[r] = slices.DeleteFunc(b.body[r], func(a []elem) bool { return !b.altProductive(a, prod) })
	}
	cyclic, nullable, err := b.leftRecursion()
	if err != nil {
		return nil, err
	}
	g.cyclic = cyclic
	g.alts = make([][]int32, n)
	for r, alts := range b.body {
		for _, a := range alts {
			g.alts[r] = append(g.alts[r], int32(len(g.elems)))
			g.elems = append(g.elems, a...)
			g.elems = append(g.elems, elem{kind: elEnd})
		}
	}
	b.layChains(nullable)
	g.alike = make([]int32, len(g.elems))
	first := map[string]int32{}
	var key []byte
	for p := range g.elems {
		key = key[:0]
		for q := p; ; q++ {
			e := g.elems[q]
			key = fmt.Appendf(key, "%d.%d ", e.kind, e.arg)
			if e.kind == elEnd {
				break
			}
		}
		if f, ok := first[string(key)]; ok {
			g.alike[p] = f
		} else {
			first[string(key)] = int32(p)
			g.alike[p] = int32(p)
		}
	}
	g.root = rootID
	g.src = b.source()
	return g, nil
}

// layChains records the bounded-repetition chains whose rules still have
// their built shape after pruning (opt_1 ::= x | ε, opt_k ::= x opt_(k-1)
// | ε) and whose x cannot match the empty string: each x then consumes at
// least one whole character.
func (b *builder) layChains(nullable []bool) {
	g := b.g
	for x, rules := range b.chains {
		if x.kind == elRef && nullable[x.arg] || len(rules) < 2 {
			continue
		}
		n := 0
		for k, r := range rules {
			alts := b.body[r]
			want := []elem{x}
			if k > 0 {
				want = append(want, elem{elRef, rules[k-1]})
			}
			if len(alts) != 2 || !slices.Equal(alts[0], want) || len(alts[1]) != 0 {
				break
			}
			n++
		}
		if n < 2 {
			continue
		}
		if g.rep == nil {
			g.rep = make([]repPos, len(g.elems))
		}
		c := int32(len(g.chains))
		g.chains = append(g.chains, rules[:n])
		for k, r := range rules[:n] {
			start := g.alts[r][0]
			for off := int32(0); g.elems[start+off].kind != elEnd; off++ {
				g.rep[start+off] = repPos{chain: c, depth: int32(k + 1), off: off}
			}
		}
	}
}

func (b *builder) altProductive(a []elem, prod []bool) bool {
	for _, e := range a {
		switch e.kind {
		case elChar:
			if len(b.g.classes[e.arg].r) == 0 {
				return false
			}
		case elRef:
			if !prod[e.arg] {
				return false
			}
		}
	}
	return true
}

// leftRecursion refuses a rule that can call itself, before matching a
// character, from a position that is not the last of its alternative
// (A ::= A "x"): each round would push another frame, so the matcher's
// eager expansion would never end. A cycle through last positions only
// (a repetition of something that can match the empty string, such as
// ("a"?)*) pushes nothing: the matcher expands it with a visited set, and
// cyclic reports that it must.
func (b *builder) leftRecursion() (cyclic bool, nullable []bool, err error) {
	n := len(b.body)
	nullable = make([]bool, n)
	for changed := true; changed; {
		changed = false
		for r, alts := range b.body {
			if nullable[r] {
				continue
			}
			for _, a := range alts {
				ok := true
				for _, e := range a {
					if e.kind == elChar || !nullable[e.arg] {
						ok = false
						break
					}
				}
				if ok {
					nullable[r], changed = true, true
					break
				}
			}
		}
	}
	// The left graph: r calls to before consuming a character; push when
	// elements follow the call in the alternative.
	type edge struct {
		to   int32
		push bool
	}
	left := make([][]edge, n)
	for r, alts := range b.body {
		for _, a := range alts {
			for j, e := range a {
				if e.kind == elChar {
					break
				}
				left[r] = append(left[r], edge{e.arg, j < len(a)-1})
				if !nullable[e.arg] {
					break
				}
			}
		}
	}
	// Strongly connected components (Tarjan).
	index, low, comp := make([]int32, n), make([]int32, n), make([]int32, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int32
	onStack := make([]bool, n)
	next, ncomp := int32(0), int32(0)
	var strong func(v int32)
	strong = func(v int32) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, e := range left[v] {
			switch {
			case index[e.to] < 0:
				strong(e.to)
				low[v] = min(low[v], low[e.to])
			case onStack[e.to]:
				low[v] = min(low[v], index[e.to])
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range int32(n) {
		if index[v] < 0 {
			strong(v)
		}
	}
	size := make([]int, ncomp)
	for _, c := range comp {
		size[c]++
	}
	for r, es := range left {
		for _, e := range es {
			if comp[r] != comp[e.to] {
				continue
			}
			cyclic = true
			if !e.push {
				continue
			}
			// Name the cycle by a user-named rule in it.
			for x := range n {
				if comp[x] == comp[r] && !strings.HasPrefix(b.g.names[x], "_") {
					return false, nil, fmt.Errorf("grammar: rule %q is left-recursive (it can reach itself before matching a character)", b.g.names[x])
				}
			}
			return false, nil, errors.New("grammar: a group is left-recursive (it can reach itself before matching a character)")
		}
	}
	return cyclic, nullable, nil
}

// source writes the flattened grammar back out as GBNF that llama.cpp's
// parser reads too. Helper rules (groups, repetitions) are named with a
// prefix no rule of the grammar's own starts with.
func (b *builder) source() string {
	prefix := "x"
	for taken := true; taken; {
		taken = false
		for _, n := range b.g.names {
			if strings.HasPrefix(n, prefix+"-") {
				taken = true
				prefix += "x"
				break
			}
		}
	}
	name := func(r int32) string {
		if n := b.g.names[r]; !strings.HasPrefix(n, "_") {
			return n
		}
		return prefix + "-" + b.g.names[r][1:]
	}
	var sb strings.Builder
	for r, alts := range b.body {
		if len(alts) == 0 {
			continue // unproductive or merged away: nothing refers to it any more
		}
		fmt.Fprintf(&sb, "%s ::= ", name(int32(r)))
		for i, a := range alts {
			if i > 0 {
				sb.WriteString(" | ")
			}
			for j, e := range a {
				if j > 0 {
					sb.WriteByte(' ')
				}
				if e.kind == elRef {
					sb.WriteString(name(e.arg))
				} else {
					sb.WriteString(classString(b.g.classes[e.arg].r))
				}
			}
			if len(a) == 0 {
				sb.WriteString(`""`)
			}
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

func classString(r []rng) string {
	if len(r) == 1 && r[0].lo == r[0].hi {
		return `"` + escRune(r[0].lo, false) + `"`
	}
	var sb strings.Builder
	sb.WriteByte('[')
	for _, x := range r {
		sb.WriteString(escRune(x.lo, true))
		if x.hi != x.lo {
			sb.WriteByte('-')
			sb.WriteString(escRune(x.hi, true))
		}
	}
	sb.WriteByte(']')
	return sb.String()
}

// escRune writes r for a GBNF literal or class using only the escapes
// llama.cpp's parser knows; in a class, '-' and '^' are written as hex
// escapes so they are never read as a range or a negation.
func escRune(r rune, inClass bool) string {
	switch {
	case r == '\\' || r == '"' && !inClass || (r == '[' || r == ']') && inClass:
		return `\` + string(r)
	case inClass && (r == '-' || r == '^'):
		return fmt.Sprintf(`\x%02X`, r)
	case r == '\n':
		return `\n`
	case r == '\t':
		return `\t`
	case r == '\r':
		return `\r`
	case r < 0x20 || r == 0x7f:
		return fmt.Sprintf(`\x%02X`, r)
	case r > 0xFFFF:
		return fmt.Sprintf(`\U%08X`, r)
	case r >= 0x80 && r <= 0xA0 || r >= 0xD800 && r <= 0xDFFF:
		return fmt.Sprintf(`\u%04X`, r)
	}
	return string(r)
}
