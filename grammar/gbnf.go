package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a GBNF error at a place in the source: Line and Col are
// 1-based (Col counts bytes), Msg says what was found and what was expected.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("grammar: line %d col %d: %s", e.Line, e.Col, e.Msg)
}

// maxRepeat bounds the counts of {m,n}: each repetition becomes grammar
// elements, so a count from a typo ({1000000}) must not build a huge grammar.
const maxRepeat = 1 << 12

// expr is the parsed form of a rule body before it is flattened.
type expr struct {
	kind     exprKind
	kids     []*expr // alt: alternatives; seq: items; rep: the repeated item
	cls      int32   // char: class index
	name     string  // ref: rule name
	min, max int     // rep: bounds; max -1 = unbounded
	off      int     // source offset (refs: for "undefined rule" errors)
}

type exprKind uint8

const (
	exAlt exprKind = iota
	exSeq
	exChar
	exRef
	exRep
)

// parser is a recursive-descent parser of llama.cpp's GBNF. The source is
// read as bytes; literals and classes are decoded as UTF-8.
type parser struct {
	src   string
	pos   int
	b     *builder
	rules map[string]*expr
	order []string // rule names in definition order
	depth int
}

// maxNest bounds group nesting, so a hostile grammar of a million "(" ends
// in an error instead of exhausting the goroutine stack.
const maxNest = 512

// ParseGBNF parses a grammar in llama.cpp's GBNF: `name ::= body` rules,
// alternation `|`, grouping `( )`, repetition `* + ? {m} {m,} {m,n}`, string
// literals, character classes `[a-z]` and `[^...]`, `.` (any character),
// escapes `\xHH \uHHHH \UHHHHHHHH \t \n \r \\ \" \[ \]` and `#` comments. The
// start rule is `root`. Left recursion (a rule that can call itself before
// matching a character, with more to match after the call) is refused
// naming the rule, as is a grammar whose language is empty.
func ParseGBNF(src string) (*Grammar, error) {
	p := &parser{src: src, b: newBuilder(), rules: map[string]*expr{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if _, ok := p.rules["root"]; !ok {
		return nil, &SyntaxError{Line: 1, Col: 1, Msg: `no "root" rule: the grammar starts at root`}
	}
	for _, name := range p.order {
		if err := p.checkRefs(p.rules[name]); err != nil {
			return nil, err
		}
	}
	for _, name := range p.order {
		p.b.rule(name)
	}
	for _, name := range p.order {
		p.b.define(name, p.rules[name])
	}
	return p.b.finish("root")
}

func (p *parser) errAt(off int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < off && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// found describes what is at the current position, for error messages.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "end of input"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	if r == '\n' {
		return "end of line"
	}
	return strconv.QuoteRune(r)
}

func (p *parser) checkRefs(e *expr) error {
	if e.kind == exRef {
		if _, ok := p.rules[e.name]; !ok {
			return p.errAt(e.off, "undefined rule %q", e.name)
		}
	}
	for _, k := range e.kids {
		if err := p.checkRefs(k); err != nil {
			return err
		}
	}
	return nil
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// space skips blanks and comments; newlines only when nl is true (a rule
// body ends at a newline outside parentheses).
func (p *parser) space(nl bool) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '\r' || c == '\n':
			if !nl {
				return
			}
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		default:
			return
		}
	}
}

func (p *parser) name() string {
	s := p.pos
	for p.pos < len(p.src) && isWordChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[s:p.pos]
}

func (p *parser) parse() error {
	p.space(true)
	if p.pos >= len(p.src) {
		return p.errAt(p.pos, "empty grammar: expected a rule `name ::= ...`")
	}
	for p.pos < len(p.src) {
		start := p.pos
		name := p.name()
		if name == "" {
			return p.errAt(p.pos, "expected a rule name, found %s", p.found())
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errAt(p.pos, "expected ::= after rule name %q, found %s", name, p.found())
		}
		p.pos += 3
		p.space(true)
		body, err := p.alternatives(false)
		if err != nil {
			return err
		}
		if _, dup := p.rules[name]; dup {
			return p.errAt(start, "rule %q defined twice", name)
		}
		p.rules[name] = body
		p.order = append(p.order, name)
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return p.errAt(p.pos, "expected end of line after rule %q, found %s", name, p.found())
		}
		p.space(true)
	}
	return nil
}

// alternatives parses `seq ('|' seq)*`; nested is true inside parentheses,
// where newlines are blanks.
func (p *parser) alternatives(nested bool) (*expr, error) {
	alt := &expr{kind: exAlt, off: p.pos}
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alt.kids = append(alt.kids, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		return alt, nil
	}
}

func (p *parser) sequence(nested bool) (*expr, error) {
	seq := &expr{kind: exSeq, off: p.pos}
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		start := p.pos
		var item *expr
		switch {
		case c == '"':
			p.pos++
			lit := &expr{kind: exSeq, off: start}
			for {
				if p.pos >= len(p.src) || p.src[p.pos] == '\n' || p.src[p.pos] == '\r' {
					return nil, p.errAt(p.pos, "unterminated string literal: expected '\"', found %s", p.found())
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				lit.kids = append(lit.kids, &expr{kind: exChar, cls: p.b.class(classOf(r, r), false)})
			}
			item = lit
		case c == '[':
			p.pos++
			neg := false
			if p.pos < len(p.src) && p.src[p.pos] == '^' {
				neg = true
				p.pos++
			}
			var rs []rng
			for {
				if p.pos >= len(p.src) || p.src[p.pos] == '\n' || p.src[p.pos] == '\r' {
					return nil, p.errAt(p.pos, "unterminated character class: expected ']', found %s", p.found())
				}
				if p.src[p.pos] == ']' {
					p.pos++
					break
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
					p.pos++
					rstart := p.pos
					if hi, err = p.char(); err != nil {
						return nil, err
					}
					if hi < lo {
						return nil, p.errAt(rstart, "character range %q-%q is backwards: expected its end >= its start", lo, hi)
					}
				}
				rs = append(rs, rng{lo, hi})
			}
			item = &expr{kind: exChar, cls: p.b.class(rs, neg), off: start}
		case c == '.':
			p.pos++
			item = &expr{kind: exChar, cls: p.b.class(nil, true), off: start}
		case c == '(':
			p.pos++
			if p.depth++; p.depth > maxNest {
				return nil, p.errAt(start, "groups nested deeper than %d", maxNest)
			}
			p.space(true)
			g, err := p.alternatives(true)
			if err != nil {
				return nil, err
			}
			p.depth--
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errAt(p.pos, "expected ')' to close the group opened at %s, found %s", p.lineCol(start), p.found())
			}
			p.pos++
			item = g
		case isWordChar(c):
			n := p.name()
			// A name followed by ::= starts the next rule: the body ends here.
			save := p.pos
			p.space(false)
			if strings.HasPrefix(p.src[p.pos:], "::=") {
				if !nested {
					p.pos = start
					return seq, nil
				}
				return nil, p.errAt(start, "rule definition %q inside a group: expected ')'", n)
			}
			p.pos = save
			item = &expr{kind: exRef, name: n, off: start}
		case c == '<':
			return nil, p.errAt(start, "token references <...> are not supported: expected a literal, class, group or rule name")
		case c == '*' || c == '+' || c == '?' || c == '{':
			return nil, p.errAt(start, "expected an item before the repetition operator %q", c)
		case c == ')' || c == '|':
			if c == ')' && !nested {
				return nil, p.errAt(start, "unexpected ')': no group is open")
			}
			return seq, nil
		case c == '\n' || c == '\r':
			if nested {
				p.space(true)
				continue
			}
			return seq, nil
		default:
			return nil, p.errAt(start, "expected a literal, class, group or rule name, found %s", p.found())
		}
		p.space(nested)
		// Postfix repetition.
		for p.pos < len(p.src) {
			op := p.src[p.pos]
			min, max := 0, 0
			switch op {
			case '*':
				min, max = 0, -1
				p.pos++
			case '+':
				min, max = 1, -1
				p.pos++
			case '?':
				min, max = 0, 1
				p.pos++
			case '{':
				var err error
				if min, max, err = p.braces(); err != nil {
					return nil, err
				}
			default:
				goto done
			}
			item = &expr{kind: exRep, kids: []*expr{item}, min: min, max: max, off: start}
			p.space(nested)
		}
	done:
		seq.kids = append(seq.kids, item)
	}
	if nested {
		return nil, p.errAt(p.pos, "expected ')' to close a group, found end of input")
	}
	return seq, nil
}

func (p *parser) lineCol(off int) string {
	e := p.errAt(off, "").(*SyntaxError)
	return fmt.Sprintf("line %d col %d", e.Line, e.Col)
}

// braces parses {m}, {m,} or {m,n}.
func (p *parser) braces() (min, max int, err error) {
	start := p.pos
	p.pos++
	p.space(false)
	num := func() (int, bool, error) {
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false, nil
		}
		n, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || n > maxRepeat {
			return 0, false, p.errAt(s, "repetition count %s too large: expected at most %d", p.src[s:p.pos], maxRepeat)
		}
		return n, true, nil
	}
	m, ok, err := num()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, p.errAt(p.pos, "expected a number after '{', found %s", p.found())
	}
	p.space(false)
	max = m
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		p.space(false)
		n, ok, err := num()
		if err != nil {
			return 0, 0, err
		}
		max = -1
		if ok {
			if n < m {
				return 0, 0, p.errAt(start, "repetition {%d,%d}: expected max >= min", m, n)
			}
			max = n
		}
		p.space(false)
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errAt(p.pos, "expected '}' to close the repetition, found %s", p.found())
	}
	p.pos++
	return m, max, nil
}

// char reads one character of a literal or class: an escape or one UTF-8
// encoded code point.
func (p *parser) char() (rune, error) {
	start := p.pos
	if p.src[p.pos] == '\\' {
		p.pos++
		if p.pos >= len(p.src) {
			return 0, p.errAt(start, "escape at end of input: expected an escaped character")
		}
		c := p.src[p.pos]
		p.pos++
		switch c {
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if p.pos+n > len(p.src) {
				return 0, p.errAt(start, `escape \%c: expected %d hex digits`, c, n)
			}
			v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
			if err != nil {
				return 0, p.errAt(start, `escape \%c: expected %d hex digits, found %q`, c, n, p.src[p.pos:p.pos+n])
			}
			p.pos += n
			if v > utf8.MaxRune {
				return 0, p.errAt(start, `escape \%c%s: beyond U+10FFFF`, c, p.src[p.pos-n:p.pos])
			}
			return rune(v), nil
		case 't':
			return '\t', nil
		case 'n':
			return '\n', nil
		case 'r':
			return '\r', nil
		case '\\', '"', '[', ']', '-', '^', '/', '\'', '.', '|', '(', ')', '*', '+', '?', '{', '}':
			return rune(c), nil
		}
		return 0, p.errAt(start, `unknown escape \%c: expected one of \x \u \U \t \n \r \\ \" \[ \]`, c)
	}
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	if r == utf8.RuneError && n <= 1 {
		return 0, p.errAt(start, "invalid UTF-8 byte 0x%02x in the grammar", p.src[p.pos])
	}
	p.pos += n
	return r, nil
}
