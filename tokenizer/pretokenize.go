package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// runeClass is the part of a rune's Unicode category the GPT-2 pattern looks at.
type runeClass uint8

const (
	classOther  runeClass = iota // [^\s\p{L}\p{N}], and invalid UTF-8 bytes
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s: the Unicode White_Space property
)

var asciiClass = func() (t [utf8.RuneSelf]runeClass) {
	for r := range rune(utf8.RuneSelf) {
		t[r] = classifySlow(r)
	}
	return t
}()

func classifySlow(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.Is(unicode.White_Space, r):
		return classSpace
	}
	return classOther
}

// runeAt decodes the rune at s[i:]; an invalid byte is RuneError of width 1,
// which classifies as classOther like the U+FFFD it stands for.
func runeAt(s string, i int) (rune, runeClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), asciiClass[c], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, classifySlow(r), w
}

// splitGPT2 calls emit for each pre-token of s under GPT-2's pattern
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// Go's regexp has no lookahead, so this is the pattern's leftmost-first
// semantics written out: the alternatives are tried in order at each position
// and the first that matches, matched greedily, wins. The pre-tokens
// concatenate back to s exactly (invalid UTF-8 included).
func splitGPT2(s string, emit func(string)) {
	for pos := 0; pos < len(s); {
		end := gpt2Next(s, pos)
		emit(s[pos:end])
		pos = end
	}
}

// gpt2Next returns the end of the pre-token starting at pos (< len(s)).
func gpt2Next(s string, pos int) int {
	// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive in GPT-2)
	if s[pos] == '\'' && pos+1 < len(s) {
		switch s[pos+1] {
		case 's', 't', 'm', 'd':
			return pos + 2
		}
		if pos+2 < len(s) {
			switch s[pos+1 : pos+3] {
			case "re", "ve", "ll":
				return pos + 3
			}
		}
	}
	_, c, w := runeAt(s, pos)
	p := pos
	// The optional leading space of " ?\p{L}+", " ?\p{N}+" and
	// " ?[^\s\p{L}\p{N}]+": taken when what follows starts such a run.
	if s[pos] == ' ' && pos+1 < len(s) {
		if _, c2, w2 := runeAt(s, pos+1); c2 != classSpace {
			c, p, w = c2, pos+1, w2
		}
	}
	if c != classSpace {
		q := p + w
		for q < len(s) {
			_, cq, wq := runeAt(s, q)
			if cq != c {
				break
			}
			q += wq
		}
		return q
	}
	// \s+(?!\S) takes a whitespace run up to the end of s, or all of it but
	// its last rune when a non-space follows (that rune then starts the next
	// pre-token, e.g. as the space of " ?\p{L}+"); a single whitespace rune
	// before a non-space is matched by the final \s+.
	q, last, n := pos, pos, 0
	for q < len(s) {
		_, cq, wq := runeAt(s, q)
		if cq != classSpace {
			break
		}
		last = q
		q += wq
		n++
	}
	if q == len(s) || n == 1 {
		return q
	}
	return last
}

// splitDigitsGPT2 is the SmolLM/StarCoder pre-tokenizer: every \p{N} rune
// is a pre-token of its own (HF Digits with individual_digits), and the text
// between them is split with GPT-2's pattern.
func splitDigitsGPT2(s string, emit func(string)) {
	start := 0
	for i := 0; i < len(s); {
		_, c, w := runeAt(s, i)
		if c == classNumber {
			if start < i {
				splitGPT2(s[start:i], emit)
			}
			emit(s[i : i+w])
			start = i + w
		}
		i += w
	}
	if start < len(s) {
		splitGPT2(s[start:], emit)
	}
}

// splitLlama3 is the Llama 3 pre-tokenizer (HF tokenizer.json's pattern),
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// and splitQwen2 Qwen2's, the same with \p{N} in place of \p{N}{1,3}
// (llama.cpp spells its (?i:…) as '[sS]|'[tT]…, which differs only on 'ſ').
func splitLlama3(s string, emit func(string)) { splitLlamaFamily(s, 3, emit) }

func splitQwen2(s string, emit func(string)) { splitLlamaFamily(s, 1, emit) }

func splitLlamaFamily(s string, maxDigits int, emit func(string)) {
	for pos := 0; pos < len(s); {
		end := llama3Next(s, pos, maxDigits)
		emit(s[pos:end])
		pos = end
	}
}

// foldedIs reports whether r equals the ASCII lower-case letter c under
// Unicode simple case folding, as the (?i) of the HF patterns matches: of the
// letters in contractions only 's' has a third form, 'ſ' (U+017F).
// (llama.cpp compares lower-cased runes and so misses "'ſ".)
func foldedIs(r rune, c byte) bool {
	return r == rune(c) || r == rune(c-'a'+'A') || (c == 's' && r == 'ſ')
}

// contractionEnd matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos, returning its
// end or -1.
func contractionEnd(s string, pos int) int {
	if s[pos] != '\'' || pos+1 >= len(s) {
		return -1
	}
	r1, _, w1 := runeAt(s, pos+1)
	for _, c := range []byte("stmd") {
		if foldedIs(r1, c) {
			return pos + 1 + w1
		}
	}
	if pos+1+w1 >= len(s) {
		return -1
	}
	r2, _, w2 := runeAt(s, pos+1+w1)
	for _, p := range [...]string{"re", "ve", "ll"} {
		if foldedIs(r1, p[0]) && foldedIs(r2, p[1]) {
			return pos + 1 + w1 + w2
		}
	}
	return -1
}

func isCRLF(r rune) bool { return r == '\r' || r == '\n' }

// llama3Next returns the end of the pre-token starting at pos (< len(s)).
func llama3Next(s string, pos, maxDigits int) int {
	if end := contractionEnd(s, pos); end >= 0 {
		return end
	}
	r, c, w := runeAt(s, pos)
	letters := func(q int) int {
		for q < len(s) {
			_, cq, wq := runeAt(s, q)
			if cq != classLetter {
				break
			}
			q += wq
		}
		return q
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		return letters(pos + w)
	}
	if c != classNumber && !isCRLF(r) && pos+w < len(s) {
		if _, c2, w2 := runeAt(s, pos+w); c2 == classLetter {
			return letters(pos + w + w2)
		}
	}
	// \p{N}{1,maxDigits}
	if c == classNumber {
		q := pos + w
		for n := 1; n < maxDigits && q < len(s); n++ {
			_, cq, wq := runeAt(s, q)
			if cq != classNumber {
				break
			}
			q += wq
		}
		return q
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	p, pc, pw := pos, c, w
	if r == ' ' && pos+1 < len(s) {
		if _, c2, w2 := runeAt(s, pos+1); c2 == classOther {
			p, pc, pw = pos+1, c2, w2
		}
	}
	if pc == classOther {
		q := p + pw
		for q < len(s) {
			_, cq, wq := runeAt(s, q)
			if cq != classOther {
				break
			}
			q += wq
		}
		for q < len(s) && (s[q] == '\r' || s[q] == '\n') {
			q++
		}
		return q
	}
	// Whitespace. \s*[\r\n]+ takes the run up to its last \r or \n; without
	// one, \s+(?!\S) and \s+ behave as in GPT-2's pattern.
	q, last, n, nl := pos, pos, 0, -1
	for q < len(s) {
		rq, cq, wq := runeAt(s, q)
		if cq != classSpace {
			break
		}
		last = q
		q += wq
		n++
		if isCRLF(rq) {
			nl = q
		}
	}
	if nl >= 0 {
		return nl
	}
	if q == len(s) || n == 1 {
		return q
	}
	return last
}

// preTokenizer describes how a tokenizer.ggml.pre name splits text.
type preTokenizer struct {
	split func(s string, emit func(string))
	// ignoreMerges: a pre-token that is a whole piece is emitted as is,
	// without merging (HF ignore_merges; llama.cpp sets it for Llama 3).
	ignoreMerges bool
	addBOS       bool // llama.cpp's add_bos default for this family
}

// preTokenizers maps the tokenizer.ggml.pre values this package implements
// to their pre-tokenizer, following llama.cpp's llama_vocab::load. "" (no
// key) and "default" use GPT-2's pattern, which is what HF's ByteLevel
// pre-tokenizer does; llama.cpp instead applies an approximation it warns
// "degrades generation quality".
var preTokenizers = map[string]preTokenizer{
	"":                 {split: splitGPT2},
	"default":          {split: splitGPT2},
	"gpt-2":            {split: splitGPT2},
	"gpt2":             {split: splitGPT2},
	"phi-2":            {split: splitGPT2},
	"mpt":              {split: splitGPT2},
	"olmo":             {split: splitGPT2},
	"llama3":           {split: splitLlama3, ignoreMerges: true, addBOS: true},
	"llama-v3":         {split: splitLlama3, ignoreMerges: true, addBOS: true},
	"llama-bpe":        {split: splitLlama3, ignoreMerges: true, addBOS: true},
	"falcon3":          {split: splitLlama3, ignoreMerges: true, addBOS: true},
	"pixtral":          {split: splitLlama3, ignoreMerges: true, addBOS: true},
	"qwen2":            {split: splitQwen2},
	"stablelm2":        {split: splitQwen2},
	"deepseek-r1-qwen": {split: splitQwen2},
	"smollm":           {split: splitDigitsGPT2},
	"starcoder":        {split: splitDigitsGPT2},
	"refact":           {split: splitDigitsGPT2},
	"command-r":        {split: splitDigitsGPT2},
	"codeshell":        {split: splitDigitsGPT2},
}
