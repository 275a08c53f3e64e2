package tokenizer

// patKimiK2 is not a pattern for the matcher: it is the one pattern
// llama.cpp lists for kimi-k2, which makes its unicode_regex_split run a
// hand-written splitter for Kimi K2's whole expression (splitKimiK2).
const patKimiK2 = `\p{Han}+`

// isHan reports the code point ranges llama.cpp counts as Han (the CJK
// unified ideographs, extensions A–F and the compatibility ideographs).
func isHan(r rune) bool {
	switch {
	case 0x4E00 <= r && r <= 0x9FFF, 0x3400 <= r && r <= 0x4DBF,
		0x20000 <= r && r <= 0x2A6DF, 0x2A700 <= r && r <= 0x2EBEF,
		0xF900 <= r && r <= 0xFAFF, 0x2F800 <= r && r <= 0x2FA1F:
		return true
	}
	return false
}

// splitKimiK2 is Kimi K2's pre-tokenizer as llama.cpp runs it:
//
//	[\p{Han}]+
//	| [^\r\n\p{L}\p{N}]?[letters but Han]+('s|'t|'re|'ve|'m|'ll|'d)?   (case-folded contraction after the word)
//	| \p{N}{1,3}
//	| ' ?[^\s\p{L}\p{N}]+[\r\n]*'
//	| \s*[\r\n]+ | \s+(?!\S) | \s+
//
// Unlike Llama 3's pattern a contraction never stands alone: it only ends a
// word (so "'s" after a space is punctuation then letters), and a Han run is
// never part of a word.
func splitKimiK2(t *preText, lo, hi int, emit func(int)) {
	word := func(i int) bool { return t.flag(i, lo, hi)&flLetter != 0 && !isHan(t.cp[i]) }
	for pos := lo; pos < hi; {
		c, f := t.cp[pos], t.fl[pos]
		if isHan(c) {
			q := pos + 1
			for q < hi && isHan(t.cp[q]) {
				q++
			}
			emit(q)
			pos = q
			continue
		}
		lead := c != '\r' && c != '\n' && f&(flLetter|flNumber) == 0
		if word(pos) || lead && word(pos+1) {
			q := pos
			if lead {
				q++
			}
			for word(q) {
				q++
			}
			if t.at(q, lo, hi) == '\'' && q+1 < hi {
				switch fold(t.cp[q+1]) {
				case 's', 't', 'm', 'd':
					q += 2
				case 'r', 'v', 'l':
					if q+2 < hi {
						switch a, b := fold(t.cp[q+1]), fold(t.cp[q+2]); {
						case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
							q += 3
						}
					}
				}
			}
			emit(q)
			pos = q
			continue
		}
		if f&flNumber != 0 { // \p{N}{1,3}
			q := pos + 1
			for q < hi && q-pos < 3 && t.fl[q]&flNumber != 0 {
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
		if inRange(p, lo, hi) && t.fl[p]&(flSpace|flLetter|flNumber) == 0 {
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

// fold lower-cases ASCII letters (the contractions are ASCII).
func fold(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + 'a' - 'A'
	}
	return r
}
