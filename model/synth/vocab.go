package synth

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/tokenizer"
)

// GGUF token types (llama.cpp llama_token_type).
const (
	typeNormal  = int32(tokenizer.TypeNormal)
	typeUnknown = int32(tokenizer.TypeUnknown)
	typeControl = int32(tokenizer.TypeControl)
	typeByte    = int32(tokenizer.TypeByte)
)

// space is SentencePiece's escaped space, U+2581.
const space = "\u2581"

// minVocab is the smallest vocabulary: <unk>, <s>, </s> and 256 byte pieces.
const minVocab = 3 + 256

// Vocab is a SentencePiece vocabulary in GGUF's representation; a llama2.c
// tokenizer.bin reads into one with tokenizer.LoadLlama2CVocab.
type Vocab = tokenizer.Vocab

// GeneratedVocab returns the first n tokens of sluice's generated
// SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte pieces
// "<0x00>".."<0xFF>" (so any text encodes through byte fallback), then
// normal pieces with strictly descending scores: "▁", lower-case letters,
// "▁"+letter, punctuation, common English words (every prefix of a word comes
// before it, so SentencePiece merges can reach it), digits and capitals, then
// letter bigrams and trigrams, without and with "▁", most frequent first. A
// random model's output therefore decodes to readable-ish text.
//
// n must lie in [259, MaxGeneratedVocab].
func GeneratedVocab(n int) (Vocab, error) {
	pieces := generatedPieces()
	if n < minVocab || n > minVocab+len(pieces) {
		return Vocab{}, fmt.Errorf("synth: generated vocabulary of %d tokens, want %d..%d: %w", n, minVocab, minVocab+len(pieces), ErrInvalid)
	}
	v := Vocab{Tokens: make([]string, 0, n), Scores: make([]float32, 0, n), Types: make([]int32, 0, n)}
	add(&v, "<unk>", 0, typeUnknown)
	add(&v, "<s>", 0, typeControl)
	add(&v, "</s>", 0, typeControl)
	for b := range 256 {
		add(&v, bytePiece(byte(b)), 0, typeByte)
	}
	for i, p := range pieces[:n-minVocab] {
		add(&v, p, -float32(i), typeNormal)
	}
	return v, nil
}

// MaxGeneratedVocab is the largest vocabulary GeneratedVocab can make.
func MaxGeneratedVocab() int { return minVocab + len(generatedPieces()) }

func add(v *Vocab, tok string, score float32, typ int32) {
	v.Tokens = append(v.Tokens, tok)
	v.Scores = append(v.Scores, score)
	v.Types = append(v.Types, typ)
}

func bytePiece(b byte) string { return fmt.Sprintf("<0x%02X>", b) }

// letterFreq is the relative frequency of English letters (percent), used to
// rank bigrams and trigrams.
var letterFreq = map[byte]float64{
	'e': 12.7, 't': 9.06, 'a': 8.17, 'o': 7.51, 'i': 6.97, 'n': 6.75, 's': 6.33, 'h': 6.09,
	'r': 5.99, 'd': 4.25, 'l': 4.03, 'c': 2.78, 'u': 2.76, 'm': 2.41, 'w': 2.36, 'f': 2.23,
	'g': 2.02, 'y': 1.97, 'p': 1.93, 'b': 1.29, 'v': 0.98, 'k': 0.77, 'j': 0.15, 'x': 0.15,
	'q': 0.10, 'z': 0.07,
}

// lettersByFreq lists a-z most frequent first.
const lettersByFreq = "etaoinshrdlcumwfgypbvkjxqz"

// commonWords are frequent English (and TinyStories) words, most frequent
// first, plus a few suffixes.
var commonWords = strings.Fields(`
the and to was he she it of in they said her his you with on that for had is
day one big little time once upon there were so happy play saw but mom not
very all wanted friend went we be do can like up are what at out go me my
ing ed er ly es
tom lily ben dog cat sun tree ball toy park fun help look good new see did
have from this them then when love home him girl boy named down an as by or
no yes just about into more know now how who will would could make made get
got find found came come back away each other sad bird water red blue car
`)

// generatedPieces is the ordered list of normal pieces, built once.
var generatedPieces = sync.OnceValue(func() []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	// addWord adds every prefix of w that is two characters or longer before
	// w itself, so w = prefix + last character is always a possible merge.
	addWord := func(w string) {
		runes := 0
		for i := range w { // i is where rune number `runes` starts
			if runes >= 2 {
				add(w[:i])
			}
			runes++
		}
		add(w)
	}
	add(space)
	for i := range len(lettersByFreq) {
		add(lettersByFreq[i : i+1])
	}
	for i := range len(lettersByFreq) {
		add(space + lettersByFreq[i:i+1])
	}
	for _, c := range strings.Split(`. , ' ! ? " - : ;`, " ") {
		add(c)
	}
	for _, w := range commonWords {
		if w == "ing" || w == "ed" || w == "er" || w == "ly" || w == "es" {
			addWord(w)
			continue
		}
		addWord(space + w)
	}
	const capitals = "TSAMCIBPHWDLRFNEGOJKUVYQXZ"
	for _, s := range []string{"0123456789", capitals} {
		for i := range len(s) {
			add(s[i : i+1])
		}
	}
	for i := range len(capitals) {
		add(space + capitals[i:i+1])
	}
	for c := byte('!'); c <= '~'; c++ {
		add(string(rune(c)))
	}
	for _, n := range []int{2, 3} {
		grams := ngrams(n)
		for _, g := range grams {
			add(g)
		}
		for _, g := range grams {
			add(space + g)
		}
	}
	return out
})

// ngrams returns every lower-case n-letter string, ranked by the product of
// its letters' frequencies (ties in byte order, so the list is deterministic).
func ngrams(n int) []string {
	type gram struct {
		s string
		f float64
	}
	grams := []gram{{"", 1}}
	for range n {
		next := make([]gram, 0, len(grams)*26)
		for _, g := range grams {
			for i := range len(lettersByFreq) {
				c := lettersByFreq[i]
				next = append(next, gram{g.s + string(rune(c)), g.f * letterFreq[c]})
			}
		}
		grams = next
	}
	slices.SortFunc(grams, func(a, b gram) int {
		if c := cmp.Compare(b.f, a.f); c != 0 {
			return c
		}
		return strings.Compare(a.s, b.s)
	})
	out := make([]string, len(grams))
	for i, g := range grams {
		out[i] = g.s
	}
	return out
}
