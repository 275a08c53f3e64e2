package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The byte-level BPE pre-tokenizer: a fragment of text (between special
// tokens) is cut into pre-tokens by a sequence of patterns, llama.cpp's
// unicode_regex_split. The first pattern cuts the whole fragment; each next
// one cuts every piece the previous ones left, on its own (a piece boundary is
// the end of the text for it). A pattern cuts a piece into its matches and the
// runs of text between them, so nothing is lost: the pre-tokens concatenate
// back to the fragment.
//
// The common patterns have hand-written splitters (llama.cpp's custom GPT-2,
// Llama 3 and Qwen2 ones); every other pattern runs on the matcher of
// prematch.go. TestCustomSplittersMatchPatterns and FuzzPreTokenize hold the
// hand-written splitters to the matcher on the same patterns.

// Rune flags: the part of a code point's Unicode properties the patterns use.
const (
	flLetter uint8 = 1 << iota // \p{L}
	flNumber                   // \p{N}
	flSpace                    // the White_Space property: \s of the hand-written splitters
	flPunct                    // \p{P}
	flSymbol                   // \p{S}
	flMark                     // \p{M}
)

var asciiFlags = func() (t [utf8.RuneSelf]uint8) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = flagsSlow(r)
	}
	return t
}()

func flagsSlow(r rune) uint8 {
	var f uint8
	switch {
	case unicode.IsLetter(r):
		f = flLetter
	case unicode.IsNumber(r):
		f = flNumber
	case unicode.IsPunct(r):
		f = flPunct
	case unicode.IsSymbol(r):
		f = flSymbol
	case unicode.IsMark(r):
		f = flMark
	}
	if unicode.Is(unicode.White_Space, r) {
		f |= flSpace
	}
	return f
}

func runeFlags(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiFlags[r]
	}
	return flagsSlow(r)
}

// preText is one fragment decoded once: its code points (an invalid byte is
// U+FFFD of width 1, as llama.cpp reads it), their byte offsets and flags,
// and the views the matcher runs on, built when first needed.
type preText struct {
	s         string
	cp        []rune
	off       []int // off[i] is the byte offset of cp[i]; off[len(cp)] == len(s)
	fl        []uint8
	collapsed []rune
	wide      []rune
	bounds    []int // piece ends, reused by preTokenizer.split
	next      []int
}

func (t *preText) reset(s string) {
	t.s, t.cp, t.off, t.fl, t.collapsed, t.wide = s, t.cp[:0], t.off[:0], t.fl[:0], nil, nil
	for i := 0; i < len(s); {
		r, w := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, w = utf8.DecodeRuneInString(s[i:])
		}
		t.cp = append(t.cp, r)
		t.off = append(t.off, i)
		t.fl = append(t.fl, runeFlags(r))
		i += w
	}
	t.off = append(t.off, len(s))
}

// view returns the collapsed or the wide view (see prematch.go).
func (t *preText) view(collapsed bool) []rune {
	if collapsed && t.collapsed != nil {
		return t.collapsed
	}
	if !collapsed && t.wide != nil {
		return t.wide
	}
	v := make([]rune, len(t.cp))
	for i, r := range t.cp {
		f := t.fl[i]
		switch {
		case r < utf8.RuneSelf:
			v[i] = r
		case f&flSpace != 0:
			v[i] = collapseSpace
		case !collapsed:
			v[i] = r
		case f&flNumber != 0:
			v[i] = collapseNumber
		case f&flLetter != 0:
			v[i] = collapseLetter
		case f&flPunct != 0:
			v[i] = collapsePunct
		case f&flMark != 0:
			v[i] = collapseMark
		case f&flSymbol != 0:
			v[i] = collapseSymbol
		default:
			v[i] = collapseOther
		}
	}
	if collapsed {
		t.collapsed = v
	} else {
		t.wide = v
	}
	return v
}

// A splitter cuts t's code points [lo, hi) and calls emit with the end of
// each non-empty piece, in order; the last end is hi.
type splitter func(t *preText, lo, hi int, emit func(end int))

// flag returns the flags of code point i, 0 outside [lo, hi).
func (t *preText) flag(i, lo, hi int) uint8 {
	if i < lo || i >= hi {
		return 0
	}
	return t.fl[i]
}

// at returns code point i, -1 outside [lo, hi).
func (t *preText) at(i, lo, hi int) rune {
	if i < lo || i >= hi {
		return -1
	}
	return t.cp[i]
}

// inRange reports whether i is a code point of [lo, hi): llama.cpp's
// "flags.as_uint() != 0".
func inRange(i, lo, hi int) bool { return lo <= i && i < hi }

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i (ASCII letters, upper case
// too when fold), returning its end or -1.
func (t *preText) contraction(i, lo, hi int, fold bool) int {
	if t.at(i, lo, hi) != '\'' || i+1 >= hi {
		return -1
	}
	low := func(r rune) rune {
		if fold && 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch low(t.cp[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 >= hi {
		return -1
	}
	switch a, b := low(t.cp[i+1]), low(t.cp[i+2]); {
	case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
		return i + 3
	}
	return -1
}

// splitGPT2 is GPT-2's pattern,
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// its alternatives tried in order at each position, each greedy.
func splitGPT2(t *preText, lo, hi int, emit func(int)) {
	for pos := lo; pos < hi; {
		if end := t.contraction(pos, lo, hi, false); end >= 0 {
			emit(end)
			pos = end
			continue
		}
		c := t.cp[pos]
		// " ?X+" for X = letters, numbers, other: the space is taken when an X follows.
		p := pos
		if c == ' ' {
			p++
		}
		f2 := t.flag(p, lo, hi)
		var class uint8
		switch {
		case f2&flLetter != 0:
			class = flLetter
		case f2&flNumber != 0:
			class = flNumber
		case f2&(flSpace|flLetter|flNumber) == 0 && inRange(p, lo, hi):
			class = 0 // other
		default:
			class = flSpace
		}
		if class != flSpace {
			q := p + 1
			for q < hi && t.classOf(q) == class {
				q++
			}
			emit(q)
			pos = q
			continue
		}
		pos = spaceRun(t, pos, lo, hi, false, emit)
	}
}

// classOf is code point i's class for GPT-2's runs: letter, number, space or
// other (0).
func (t *preText) classOf(i int) uint8 {
	f := t.fl[i]
	switch {
	case f&flLetter != 0:
		return flLetter
	case f&flNumber != 0:
		return flNumber
	case f&flSpace != 0:
		return flSpace
	}
	return 0
}

// spaceRun matches the whitespace alternatives at pos: with newlines set,
// \s*[\r\n]+ first; then \s+(?!\S) (a run of several before a non-space
// gives back its last one) and \s+. A position that starts none of them is a
// piece of one code point. It emits the piece and returns its end.
func spaceRun(t *preText, pos, lo, hi int, newlines bool, emit func(int)) int {
	n, lastNL := 0, -1
	for pos+n < hi && t.fl[pos+n]&flSpace != 0 {
		if r := t.cp[pos+n]; r == '\r' || r == '\n' {
			lastNL = pos + n + 1
		}
		n++
	}
	end := pos + 1
	switch {
	case newlines && lastNL >= 0:
		end = lastNL
	case n > 1 && pos+n < hi:
		end = pos + n - 1
	case n > 0:
		end = pos + n
	}
	emit(end)
	return end
}

// splitLlama3 is the Llama 3 pattern (llama.cpp's spelling of the (?i:…)),
//
//	(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and splitQwen2 Qwen2's, the same with \p{N} for \p{N}{1,3}.
func splitLlama3(t *preText, lo, hi int, emit func(int)) { splitLlamaFamily(t, lo, hi, 3, emit) }

func splitQwen2(t *preText, lo, hi int, emit func(int)) { splitLlamaFamily(t, lo, hi, 1, emit) }

func splitLlamaFamily(t *preText, lo, hi, maxDigits int, emit func(int)) {
	for pos := lo; pos < hi; {
		if end := t.contraction(pos, lo, hi, true); end >= 0 {
			emit(end)
			pos = end
			continue
		}
		c, f := t.cp[pos], t.fl[pos]
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if c != '\r' && c != '\n' && f&flNumber == 0 && (f&flLetter != 0 || t.flag(pos+1, lo, hi)&flLetter != 0) {
			q := pos + 1
			for q < hi && t.fl[q]&flLetter != 0 {
				q++
			}
			emit(q)
			pos = q
			continue
		}
		// \p{N}{1,maxDigits}
		if f&flNumber != 0 {
			q := pos + 1
			for q < hi && q-pos < maxDigits && t.fl[q]&flNumber != 0 {
				q++
			}
			emit(q)
			pos = q
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
		p := pos
		if c == ' ' {
			p++
		}
		if t.flag(p, lo, hi)&(flSpace|flLetter|flNumber) == 0 && (inRange(p, lo, hi) || p > pos) {
			q := p
			for q < hi && t.fl[q]&(flSpace|flLetter|flNumber) == 0 {
				q++
			}
			for q < hi && (t.cp[q] == '\r' || t.cp[q] == '\n') {
				q++
			}
			emit(q)
			pos = q
			continue
		}
		pos = spaceRun(t, pos, lo, hi, true, emit)
	}
}

// splitDigitGroups is llama.cpp's splitter for AFMoE's digit rule (also used
// for Tiny Aya's \d{1,3}(?=(?:\d{3})*\b)): a run of n \p{N} is cut into a
// head of n mod 3 and groups of three. As in llama.cpp, the text before a run
// is not a piece of its own but the start of the run's first piece (the
// patterns after this one cut it off again).
func splitDigitGroups(t *preText, lo, hi int, emit func(int)) {
	prev := lo
	out := func(end int) {
		if end > prev {
			emit(end)
			prev = end
		}
	}
	for pos := lo; pos < hi; {
		if t.fl[pos]&flNumber == 0 {
			pos++
			continue
		}
		start := pos
		for pos < hi && t.fl[pos]&flNumber != 0 {
			pos++
		}
		cur := start
		if r := (pos - start) % 3; r > 0 {
			cur += r
			out(cur)
		}
		for ; cur < pos; cur += 3 {
			out(cur + 3)
		}
	}
	out(hi)
}

// splitNewlines is [^\n]+|[\n]+: runs of newlines and runs of the rest.
func splitNewlines(t *preText, lo, hi int, emit func(int)) {
	for pos := lo; pos < hi; {
		nl := t.cp[pos] == '\n'
		q := pos + 1
		for q < hi && (t.cp[q] == '\n') == nl {
			q++
		}
		emit(q)
		pos = q
	}
}
