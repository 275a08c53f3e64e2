package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// regex compiles a JSON Schema "pattern" (ECMA-262 syntax) to a grammar of
// the JSON string bodies (without the quotes) whose decoded text it
// matches. The subset: literals and escapes (\t \n \r \f \v \0 \xHH
// \uHHHH, \ before punctuation), classes [...] with ranges and negation,
// \d \D \w \W \s \S, '.', groups ( ), (?: ), (?<name> ), alternation,
// quantifiers * + ? {n} {n,} {n,m} (lazy forms match the same strings),
// where \s is the ASCII spaces RE2 and ECMA-262 agree on and \S excludes
// ECMA-262's Unicode spaces as well (at least as strict as either engine),
// and the anchors ^ at the start and $ at the end. A pattern without ^ may
// be preceded by any text, one without $ followed by any (a pattern
// matches anywhere in the string). Refused by name: backreferences,
// lookaround, word boundaries, Unicode property escapes, anchors
// elsewhere.
func (c *compiler) regex(p string) (string, error) {
	r := &reParser{src: p, c: c}
	start, end := false, false
	if strings.HasPrefix(p, "^") {
		start = true
		r.pos = 1
	}
	if n := len(p); n > r.pos && p[n-1] == '$' && (n < 2 || p[n-2] != '\\' || strings.HasSuffix(p, `\\$`)) {
		end = true
		r.src = p[:n-1]
	}
	e, err := r.alt()
	if err != nil {
		return "", err
	}
	if r.pos < len(r.src) {
		return "", fmt.Errorf("offset %d: unexpected %q", r.pos, r.src[r.pos])
	}
	any := c.prim("char") + "*"
	if !start {
		e = any + " " + e
	}
	if !end {
		e = e + " " + any
	}
	return e, nil
}

type reParser struct {
	src   string
	pos   int
	c     *compiler
	depth int
}

func (r *reParser) alt() (string, error) {
	var parts []string
	for {
		s, err := r.seq()
		if err != nil {
			return "", err
		}
		parts = append(parts, s)
		if r.pos < len(r.src) && r.src[r.pos] == '|' {
			r.pos++
			continue
		}
		if len(parts) == 1 {
			return parts[0], nil
		}
		return "( " + strings.Join(parts, " | ") + " )", nil
	}
}

func (r *reParser) seq() (string, error) {
	var items []string
	for r.pos < len(r.src) && r.src[r.pos] != '|' && r.src[r.pos] != ')' {
		atom, err := r.atom()
		if err != nil {
			return "", err
		}
		q, err := r.quant()
		if err != nil {
			return "", err
		}
		if q != "" {
			atom = "( " + atom + " )" + q
		}
		items = append(items, atom)
	}
	if len(items) == 0 {
		return `""`, nil
	}
	return strings.Join(items, " "), nil
}

func (r *reParser) quant() (string, error) {
	if r.pos >= len(r.src) {
		return "", nil
	}
	var q string
	switch r.src[r.pos] {
	case '*', '+', '?':
		q = r.src[r.pos : r.pos+1]
		r.pos++
	case '{':
		end := strings.IndexByte(r.src[r.pos:], '}')
		if end < 0 {
			return "", nil // a literal '{' (checked by atom next)
		}
		body := r.src[r.pos+1 : r.pos+end]
		lo, hi, ok := strings.Cut(body, ",")
		m, err1 := strconv.Atoi(lo)
		if err1 != nil {
			return "", nil
		}
		n := m
		if ok {
			if hi == "" {
				n = -1
			} else if v, err := strconv.Atoi(hi); err == nil {
				n = v
			} else {
				return "", nil
			}
		}
		if m > maxRepeat || n > maxRepeat || n >= 0 && n < m {
			return "", fmt.Errorf("offset %d: repetition {%s} out of range (at most %d, max >= min)", r.pos, body, maxRepeat)
		}
		r.pos += end + 1
		if n < 0 {
			q = fmt.Sprintf("{%d,}", m)
		} else {
			q = fmt.Sprintf("{%d,%d}", m, n)
		}
	default:
		return "", nil
	}
	if r.pos < len(r.src) && r.src[r.pos] == '?' {
		r.pos++ // lazy: the same strings match
	}
	if r.pos < len(r.src) && strings.ContainsRune("*+?", rune(r.src[r.pos])) {
		return "", fmt.Errorf("offset %d: quantifier %q follows another (possessive or nested quantifiers are not supported)", r.pos, r.src[r.pos])
	}
	return q, nil
}

var (
	digitRanges = []rng{{'0', '9'}}
	wordRanges  = []rng{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	// \s is the spaces every regex engine agrees on (RE2's set), \S
	// excludes ECMA-262's wider set: both are at least as strict as either.
	asciiSpace  = []rng{{'\t', '\n'}, {'\f', '\r'}, {' ', ' '}}
	spaceRanges = []rng{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	dotRanges   = []rng{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}} // negated
)

func (r *reParser) atom() (string, error) {
	c := r.src[r.pos]
	start := r.pos
	switch c {
	case '(':
		r.pos++
		if r.depth++; r.depth > maxNest {
			return "", fmt.Errorf("offset %d: groups nested deeper than %d", start, maxNest)
		}
		if strings.HasPrefix(r.src[r.pos:], "?") {
			switch {
			case strings.HasPrefix(r.src[r.pos:], "?:"):
				r.pos += 2
			case strings.HasPrefix(r.src[r.pos:], "?<=") || strings.HasPrefix(r.src[r.pos:], "?<!") ||
				strings.HasPrefix(r.src[r.pos:], "?=") || strings.HasPrefix(r.src[r.pos:], "?!"):
				return "", fmt.Errorf("offset %d: lookaround (%s...) is not supported", start, r.src[r.pos:min(len(r.src), r.pos+3)])
			case strings.HasPrefix(r.src[r.pos:], "?<") || strings.HasPrefix(r.src[r.pos:], "?P<"):
				end := strings.IndexByte(r.src[r.pos:], '>')
				if end < 0 {
					return "", fmt.Errorf("offset %d: unterminated group name", start)
				}
				r.pos += end + 1
			default:
				return "", fmt.Errorf("offset %d: group flags (%s...) are not supported", start, r.src[r.pos:min(len(r.src), r.pos+2)])
			}
		}
		e, err := r.alt()
		if err != nil {
			return "", err
		}
		if r.pos >= len(r.src) || r.src[r.pos] != ')' {
			return "", fmt.Errorf("offset %d: expected ')' closing the group at offset %d", r.pos, start)
		}
		r.pos++
		r.depth--
		return "( " + e + " )", nil
	case '[':
		rs, neg, err := r.class()
		if err != nil {
			return "", err
		}
		return r.chars(rs, neg), nil
	case '.':
		r.pos++
		return r.chars(dotRanges, true), nil
	case '^', '$':
		return "", fmt.Errorf("offset %d: anchor %q is only supported at the start (^) or end ($) of the pattern", start, c)
	case '*', '+', '?':
		return "", fmt.Errorf("offset %d: quantifier %q has nothing to repeat", start, c)
	case '\\':
		rs, neg, err := r.escape(false)
		if err != nil {
			return "", err
		}
		return r.chars(rs, neg), nil
	}
	ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	return r.chars([]rng{{ch, ch}}, false), nil
}

// escape reads \X (r.pos at the backslash) as a set of characters.
func (r *reParser) escape(inClass bool) ([]rng, bool, error) {
	start := r.pos
	r.pos++
	if r.pos >= len(r.src) {
		return nil, false, fmt.Errorf("offset %d: pattern ends in a backslash", start)
	}
	c := r.src[r.pos]
	r.pos++
	one := func(x rune) ([]rng, bool, error) { return []rng{{x, x}}, false, nil }
	switch c {
	case 'd':
		return digitRanges, false, nil
	case 'D':
		return digitRanges, true, nil
	case 'w':
		return wordRanges, false, nil
	case 'W':
		return wordRanges, true, nil
	case 's':
		return asciiSpace, false, nil
	case 'S':
		return spaceRanges, true, nil
	case 't':
		return one('\t')
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case '0':
		return one(0)
	case 'b':
		if inClass {
			return one('\b')
		}
		return nil, false, fmt.Errorf(`offset %d: word boundary \b is not supported`, start)
	case 'B':
		return nil, false, fmt.Errorf(`offset %d: \B is not supported`, start)
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if r.pos+n > len(r.src) {
			return nil, false, fmt.Errorf(`offset %d: \%c needs %d hex digits`, start, c, n)
		}
		v, err := strconv.ParseUint(r.src[r.pos:r.pos+n], 16, 32)
		if err != nil {
			return nil, false, fmt.Errorf(`offset %d: \%c needs %d hex digits`, start, c, n)
		}
		r.pos += n
		return one(rune(v))
	case 'p', 'P':
		return nil, false, fmt.Errorf(`offset %d: Unicode property escapes \%c{...} are not supported`, start, c)
	case 'c', 'k':
		return nil, false, fmt.Errorf(`offset %d: \%c is not supported`, start, c)
	}
	if c >= '1' && c <= '9' {
		return nil, false, fmt.Errorf("offset %d: backreference \\%c is not supported", start, c)
	}
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
		return nil, false, fmt.Errorf("offset %d: unknown escape \\%c", start, c)
	}
	r.pos--
	ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	return one(ch)
}

// class reads [...] (r.pos at '[').
func (r *reParser) class() ([]rng, bool, error) {
	start := r.pos
	r.pos++
	neg := false
	if r.pos < len(r.src) && r.src[r.pos] == '^' {
		neg = true
		r.pos++
	}
	var rs []rng
	for {
		if r.pos >= len(r.src) {
			return nil, false, fmt.Errorf("offset %d: unterminated character class", start)
		}
		if r.src[r.pos] == ']' {
			r.pos++
			return rs, neg, nil
		}
		lo, single, err := r.classAtom()
		if err != nil {
			return nil, false, err
		}
		if single && r.pos+1 < len(r.src) && r.src[r.pos] == '-' && r.src[r.pos+1] != ']' {
			r.pos++
			hi, single2, err := r.classAtom()
			if err != nil {
				return nil, false, err
			}
			if !single2 {
				return nil, false, errors.New("a range ends in a class escape (\\d, \\w, \\s)")
			}
			if hi[0].lo < lo[0].lo {
				return nil, false, fmt.Errorf("offset %d: range out of order", r.pos)
			}
			rs = append(rs, rng{lo[0].lo, hi[0].lo})
			continue
		}
		rs = append(rs, lo...)
	}
}

func (r *reParser) classAtom() ([]rng, bool, error) {
	if r.src[r.pos] == '\\' {
		rs, neg, err := r.escape(true)
		if err != nil {
			return nil, false, err
		}
		if neg {
			rs = normalize(rs, true)
		}
		return rs, len(rs) == 1 && rs[0].lo == rs[0].hi && !neg, nil
	}
	ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	return []rng{{ch, ch}}, true, nil
}

// chars is a grammar for one character of the set as a JSON string writes
// it: the characters JSON must escape (", \, control characters) as their
// escapes, every other character as itself.
func (r *reParser) chars(rs []rng, neg bool) string {
	set := normalize(rs, neg)
	cls := class{set}
	var parts []string
	var plain []rng
	for _, x := range set {
		lo, hi := x.lo, x.hi
		if lo < 0x20 {
			lo = 0x20
		}
		for _, cut := range []rune{'"', '\\'} {
			if lo <= cut && cut <= hi {
				if lo < cut {
					plain = append(plain, rng{lo, cut - 1})
				}
				lo = cut + 1
			}
		}
		if lo <= hi {
			plain = append(plain, rng{lo, hi})
		}
	}
	if len(plain) > 0 {
		parts = append(parts, classString(plain))
	}
	if cls.has('"') {
		parts = append(parts, `"\\\""`)
	}
	if cls.has('\\') {
		parts = append(parts, `"\\\\"`)
	}
	short := map[rune]string{'\b': `"\\b"`, '\f': `"\\f"`, '\n': `"\\n"`, '\r': `"\\r"`, '\t': `"\\t"`}
	for ch := rune(0); ch < 0x20; ch++ {
		if cls.has(ch) {
			if s, ok := short[ch]; ok {
				parts = append(parts, s)
			} else {
				parts = append(parts, fmt.Sprintf(`"\\u00%02x"`, ch))
			}
		}
	}
	return alt(parts)
}
