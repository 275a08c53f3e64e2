package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// This file is the small regular-expression matcher the table-driven
// pre-tokenizer runs the patterns of tokenizer.ggml.pre values with (Go's
// regexp has neither lookahead nor leftmost-first backtracking over \s+(?!\S)).
//
// It reproduces how llama.cpp evaluates a pattern it has no hand-written
// splitter for: with C++ std::regex (ECMAScript flavour: ordered alternation,
// greedy backtracking quantifiers, lookahead) over one of two views of the text:
//
//   - the collapsed view, for a pattern that names a Unicode category \p{…}:
//     ASCII stays itself and every other code point becomes one stand-in for its
//     class (whitespace 0x0B, \p{N} 0xD1, \p{L} 0xD2, \p{P} 0xD3, \p{M} 0xD4,
//     \p{S} 0xD5, anything else 0xD0); \p{X} then means its stand-in plus the
//     ASCII members of X. \p{Lu}, \p{Ll}, \p{Lt}, \p{Lm} and \p{Lo} all mean
//     \p{L}, so a pattern cannot tell upper from lower case outside ASCII (as in
//     llama.cpp). Such a pattern may not contain non-ASCII literals.
//   - the wide view otherwise: the code points themselves, except that
//     non-ASCII whitespace becomes 0x0B.
//
// \s is the six ASCII space characters (0x0B included), \d is [0-9] and \w is
// [0-9A-Za-z_], as std::regex has them in the C locale.

// The stand-ins of the collapsed view.
const (
	collapseOther  rune = 0xD0
	collapseNumber rune = 0xD1
	collapseLetter rune = 0xD2
	collapsePunct  rune = 0xD3
	collapseMark   rune = 0xD4
	collapseSymbol rune = 0xD5
	collapseSpace  rune = 0x0B
)

// rxSet is a set of runes: ranges, optionally negated.
type rxSet struct {
	lo, hi []rune
	neg    bool
}

func (s *rxSet) add(lo, hi rune) { s.lo, s.hi = append(s.lo, lo), append(s.hi, hi) }

func (s *rxSet) addSet(o *rxSet) {
	if !o.neg {
		s.lo, s.hi = append(s.lo, o.lo...), append(s.hi, o.hi...)
		return
	}
	// The complement of o as ranges (o's ranges may overlap: walk them sorted).
	c := complement(o)
	s.lo, s.hi = append(s.lo, c.lo...), append(s.hi, c.hi...)
}

func complement(o *rxSet) *rxSet {
	type r struct{ lo, hi rune }
	rs := make([]r, len(o.lo))
	for i := range o.lo {
		rs[i] = r{o.lo[i], o.hi[i]}
	}
	for i := 1; i < len(rs); i++ { // insertion sort: sets are small
		for j := i; j > 0 && rs[j].lo < rs[j-1].lo; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
	out := &rxSet{}
	next := rune(0)
	for _, x := range rs {
		if x.lo > next {
			out.add(next, x.lo-1)
		}
		if x.hi+1 > next {
			next = x.hi + 1
		}
	}
	if next <= unicode.MaxRune {
		out.add(next, unicode.MaxRune)
	}
	return out
}

func (s *rxSet) has(r rune) bool {
	in := false
	for i := range s.lo {
		if s.lo[i] <= r && r <= s.hi[i] {
			in = true
			break
		}
	}
	return in != s.neg
}

// The escapes' sets.
var (
	setSpace = &rxSet{lo: []rune{'\t', ' '}, hi: []rune{'\r', ' '}} // \t \n \v \f \r and space
	setDigit = &rxSet{lo: []rune{'0'}, hi: []rune{'9'}}
	setWord  = &rxSet{lo: []rune{'0', 'A', '_', 'a'}, hi: []rune{'9', 'Z', '_', 'z'}}
)

// categorySet is \p{name} in the collapsed view: the stand-in of the class and
// its ASCII members.
func categorySet(name string) (*rxSet, bool) {
	s := &rxSet{}
	switch name {
	case "N":
		s.add(collapseNumber, collapseNumber)
		s.add('0', '9')
	case "L", "Lu", "Ll", "Lt", "Lm", "Lo":
		s.add(collapseLetter, collapseLetter)
		s.add('A', 'Z')
		s.add('a', 'z')
	case "P":
		s.add(collapsePunct, collapsePunct)
		for _, r := range [][2]rune{{'!', '#'}, {'%', '*'}, {',', '/'}, {':', ';'}, {'?', '@'}, {'[', ']'}, {'_', '_'}, {'{', '{'}, {'}', '}'}} {
			s.add(r[0], r[1])
		}
	case "M":
		s.add(collapseMark, collapseMark)
	case "S":
		s.add(collapseSymbol, collapseSymbol)
		for _, r := range []rune{'$', '+', '<', '=', '>', '^', '`', '|', '~'} {
			s.add(r, r)
		}
	default:
		return nil, false
	}
	return s, true
}

type rxOp uint8

const (
	rxSetOp    rxOp = iota // one rune of set
	rxSeq                  // subs in order
	rxAlt                  // subs, first that leads to a match
	rxRepeat               // sub min..max times (max < 0: unbounded), greedy
	rxAhead                // (?=sub)
	rxNotAhead             // (?!sub)
	rxBegin                // ^
	rxEnd                  // $
	rxWordB                // \b
	rxNotWordB             // \B
)

type rxNode struct {
	op       rxOp
	set      *rxSet
	subs     []*rxNode
	min, max int
}

// rxProg is a compiled pattern.
type rxProg struct {
	src       string
	root      *rxNode
	collapsed bool // runs over the collapsed view
}

// compileRx parses an ECMAScript pattern of the subset the pre-tokenizer
// table uses: literals, escapes (\s \S \d \D \w \W \b \B \r \n \t \v \f \xHH
// \uHHHH \p{…} and escaped punctuation), classes with ranges and negation,
// groups (…) and (?:…), lookahead (?=…) and (?!…), the greedy quantifiers
// ? * + {n} {n,} {n,m}, alternation, ^ and $.
func compileRx(src string) (*rxProg, error) {
	p := &rxParser{src: src, collapsed: strings.Contains(src, `\p{`)}
	if p.collapsed {
		for i, r := range src {
			if r >= utf8.RuneSelf {
				return nil, fmt.Errorf("pattern %q: offset %d: a non-ASCII literal in a pattern with \\p{…} (llama.cpp cannot run it)", src, i)
			}
		}
	}
	n, err := p.alt()
	if err != nil {
		return nil, fmt.Errorf("pattern %q: offset %d: %v", src, p.pos, err)
	}
	if p.pos < len(src) {
		return nil, fmt.Errorf("pattern %q: offset %d: unexpected %q", src, p.pos, src[p.pos])
	}
	return &rxProg{src: src, root: n, collapsed: p.collapsed}, nil
}

type rxParser struct {
	src       string
	pos       int
	collapsed bool
}

func (p *rxParser) more() bool { return p.pos < len(p.src) }
func (p *rxParser) peek() byte { return p.src[p.pos] }

func (p *rxParser) alt() (*rxNode, error) {
	var alts []*rxNode
	for {
		s, err := p.seq()
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &rxNode{op: rxAlt, subs: alts}, nil
}

func (p *rxParser) seq() (*rxNode, error) {
	n := &rxNode{op: rxSeq}
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		a, err = p.quant(a)
		if err != nil {
			return nil, err
		}
		n.subs = append(n.subs, a)
	}
	if len(n.subs) == 1 {
		return n.subs[0], nil
	}
	return n, nil
}

func (p *rxParser) quant(a *rxNode) (*rxNode, error) {
	for p.more() {
		lo, hi := 0, 0
		switch c := p.peek(); c {
		case '?':
			lo, hi = 0, 1
			p.pos++
		case '*':
			lo, hi = 0, -1
			p.pos++
		case '+':
			lo, hi = 1, -1
			p.pos++
		case '{':
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return nil, fmt.Errorf("unterminated {")
			}
			body := p.src[p.pos+1 : p.pos+end]
			var err error
			if a, b, ok := strings.Cut(body, ","); ok {
				if lo, err = strconv.Atoi(a); err != nil {
					return nil, fmt.Errorf("bad repeat {%s}", body)
				}
				hi = -1
				if b != "" {
					if hi, err = strconv.Atoi(b); err != nil || hi < lo {
						return nil, fmt.Errorf("bad repeat {%s}", body)
					}
				}
			} else {
				if lo, err = strconv.Atoi(body); err != nil {
					return nil, fmt.Errorf("bad repeat {%s}", body)
				}
				hi = lo
			}
			p.pos += end + 1
		default:
			return a, nil
		}
		if p.more() && p.peek() == '?' {
			return nil, fmt.Errorf("lazy quantifiers are not supported")
		}
		switch a.op {
		case rxAhead, rxNotAhead, rxBegin, rxEnd, rxWordB, rxNotWordB:
			return nil, fmt.Errorf("quantified assertion")
		}
		a = &rxNode{op: rxRepeat, subs: []*rxNode{a}, min: lo, max: hi}
	}
	return a, nil
}

func (p *rxParser) atom() (*rxNode, error) {
	c := p.peek()
	switch c {
	case '(':
		p.pos++
		op := rxSeq
		if strings.HasPrefix(p.src[p.pos:], "?:") {
			p.pos += 2
		} else if strings.HasPrefix(p.src[p.pos:], "?=") {
			op, p.pos = rxAhead, p.pos+2
		} else if strings.HasPrefix(p.src[p.pos:], "?!") {
			op, p.pos = rxNotAhead, p.pos+2
		} else if p.more() && p.peek() == '?' {
			return nil, fmt.Errorf("unsupported group (?%c", p.src[min(p.pos+1, len(p.src)-1)])
		}
		n, err := p.alt()
		if err != nil {
			return nil, err
		}
		if !p.more() || p.peek() != ')' {
			return nil, fmt.Errorf("missing )")
		}
		p.pos++
		if op == rxSeq {
			return n, nil
		}
		return &rxNode{op: op, subs: []*rxNode{n}}, nil
	case '[':
		s, err := p.class()
		if err != nil {
			return nil, err
		}
		return &rxNode{op: rxSetOp, set: s}, nil
	case '.':
		p.pos++
		return &rxNode{op: rxSetOp, set: &rxSet{lo: []rune{'\n', '\r', 0x2028}, hi: []rune{'\n', '\r', 0x2029}, neg: true}}, nil
	case '^':
		p.pos++
		return &rxNode{op: rxBegin}, nil
	case '$':
		p.pos++
		return &rxNode{op: rxEnd}, nil
	case '\\':
		switch {
		case strings.HasPrefix(p.src[p.pos:], `\b`):
			p.pos += 2
			return &rxNode{op: rxWordB}, nil
		case strings.HasPrefix(p.src[p.pos:], `\B`):
			p.pos += 2
			return &rxNode{op: rxNotWordB}, nil
		}
		s, err := p.escape()
		if err != nil {
			return nil, err
		}
		return &rxNode{op: rxSetOp, set: s}, nil
	case '*', '+', '?', '{', ')', ']', '}':
		return nil, fmt.Errorf("unexpected %q", c)
	}
	r, w := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += w
	return &rxNode{op: rxSetOp, set: &rxSet{lo: []rune{r}, hi: []rune{r}}}, nil
}

// escape parses one escape at p.pos (a backslash) as a set.
func (p *rxParser) escape() (*rxSet, error) {
	p.pos++
	if !p.more() {
		return nil, fmt.Errorf("trailing backslash")
	}
	c := p.peek()
	p.pos++
	one := func(r rune) *rxSet { return &rxSet{lo: []rune{r}, hi: []rune{r}} }
	switch c {
	case 's':
		return setSpace, nil
	case 'S':
		return &rxSet{lo: setSpace.lo, hi: setSpace.hi, neg: true}, nil
	case 'd':
		return setDigit, nil
	case 'D':
		return &rxSet{lo: setDigit.lo, hi: setDigit.hi, neg: true}, nil
	case 'w':
		return setWord, nil
	case 'W':
		return &rxSet{lo: setWord.lo, hi: setWord.hi, neg: true}, nil
	case 'r':
		return one('\r'), nil
	case 'n':
		return one('\n'), nil
	case 't':
		return one('\t'), nil
	case 'v':
		return one('\v'), nil
	case 'f':
		return one('\f'), nil
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if p.pos+n > len(p.src) {
			return nil, fmt.Errorf("short \\%c escape", c)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return nil, fmt.Errorf("bad \\%c escape", c)
		}
		p.pos += n
		return one(rune(v)), nil
	case 'p':
		end := strings.IndexByte(p.src[p.pos:], '}')
		if !p.more() || p.peek() != '{' || end < 0 {
			return nil, fmt.Errorf("bad \\p")
		}
		name := p.src[p.pos+1 : p.pos+end]
		p.pos += end + 1
		s, ok := categorySet(name)
		if !ok {
			return nil, fmt.Errorf("unknown category \\p{%s}", name)
		}
		return s, nil
	}
	if c >= utf8.RuneSelf || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
		return nil, fmt.Errorf("unsupported escape \\%c", c)
	}
	return one(rune(c)), nil // an escaped punctuation character stands for itself
}

// class parses [...] at p.pos.
func (p *rxParser) class() (*rxSet, error) {
	p.pos++ // [
	s := &rxSet{}
	if p.more() && p.peek() == '^' {
		s.neg = true
		p.pos++
	}
	first := true
	for {
		if !p.more() {
			return nil, fmt.Errorf("missing ]")
		}
		if p.peek() == ']' && !first {
			p.pos++
			return s, nil
		}
		first = false
		lo, sub, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if sub != nil {
			s.addSet(sub)
			continue
		}
		if p.pos+1 < len(p.src) && p.peek() == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			hi, sub2, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if sub2 != nil || hi < lo {
				return nil, fmt.Errorf("bad range")
			}
			s.add(lo, hi)
			continue
		}
		s.add(lo, lo)
	}
}

// classAtom is one member of a class: a rune, or a set for \s, \p{…} and co.
func (p *rxParser) classAtom() (rune, *rxSet, error) {
	if p.peek() == '\\' {
		s, err := p.escape()
		if err != nil {
			return 0, nil, err
		}
		if len(s.lo) == 1 && s.lo[0] == s.hi[0] && !s.neg && s != setSpace && s != setDigit {
			return s.lo[0], nil, nil
		}
		return 0, s, nil
	}
	r, w := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += w
	return r, nil, nil
}

// rxMatcher runs one program over a view.
type rxMatcher struct {
	v      []rune
	lo, hi int // the range being searched (a chunk)
}

// match tries n at i; k continues with the end of n's match.
func (m *rxMatcher) match(n *rxNode, i int, k func(int) bool) bool {
	switch n.op {
	case rxSetOp:
		return i < m.hi && n.set.has(m.v[i]) && k(i+1)
	case rxSeq:
		return m.seq(n.subs, i, k)
	case rxAlt:
		for _, a := range n.subs {
			if m.match(a, i, k) {
				return true
			}
		}
		return false
	case rxRepeat:
		if s := n.subs[0]; s.op == rxSetOp {
			// A run of one set: find the longest, then give back one at a time.
			j := i
			for j < m.hi && (n.max < 0 || j-i < n.max) && s.set.has(m.v[j]) {
				j++
			}
			for ; j-i >= n.min; j-- {
				if k(j) {
					return true
				}
			}
			return false
		}
		return m.repeat(n, 0, i, k)
	case rxAhead:
		return m.match(n.subs[0], i, func(int) bool { return true }) && k(i)
	case rxNotAhead:
		return !m.match(n.subs[0], i, func(int) bool { return true }) && k(i)
	case rxBegin:
		return i == m.lo && k(i)
	case rxEnd:
		return i == m.hi && k(i)
	case rxWordB, rxNotWordB:
		w := func(j int) bool { return j >= m.lo && j < m.hi && setWord.has(m.v[j]) }
		return (w(i-1) != w(i)) == (n.op == rxWordB) && k(i)
	}
	return false
}

func (m *rxMatcher) seq(subs []*rxNode, i int, k func(int) bool) bool {
	if len(subs) == 0 {
		return k(i)
	}
	return m.match(subs[0], i, func(j int) bool { return m.seq(subs[1:], j, k) })
}

// repeat is a greedy general repeat; an iteration that matches nothing ends
// the loop (ECMAScript's rule, so x* over an empty-matching x terminates).
func (m *rxMatcher) repeat(n *rxNode, count, i int, k func(int) bool) bool {
	if n.max < 0 || count < n.max {
		if m.match(n.subs[0], i, func(j int) bool {
			if j == i {
				return false
			}
			return m.repeat(n, count+1, j, k)
		}) {
			return true
		}
	}
	return count >= n.min && k(i)
}

// split runs the program over v[lo:hi] as std::regex_iterator does and calls
// emit with the end of each piece: the text between matches and each
// non-empty match.
func (p *rxProg) split(v []rune, lo, hi int, emit func(end int)) {
	m := rxMatcher{v: v, lo: lo, hi: hi}
	last, pos := lo, lo
	for pos <= hi {
		start, end := -1, -1
		for q := pos; q <= hi; q++ {
			if m.match(p.root, q, func(j int) bool { end = j; return true }) {
				start = q
				break
			}
		}
		if start < 0 {
			break
		}
		if end == start {
			// An empty match: look for a non-empty one at the same place,
			// else go on one code point later.
			if m.match(p.root, start, func(j int) bool { end = j; return j > start }) {
				// found a longer one
			} else {
				end = start
			}
		}
		if start > last {
			emit(start)
		}
		if end > start {
			emit(end)
		}
		last = max(last, end)
		if end > start {
			pos = end
		} else {
			pos = start + 1
		}
	}
	if last < hi {
		emit(hi)
	}
}
