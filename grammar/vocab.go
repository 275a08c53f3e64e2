package grammar

import (
	"bytes"
	"slices"

	"github.com/sluicehq/sluice/tokenizer"
)

// Vocab is a model's vocabulary as the bytes each token writes, with its
// end-of-generation ids. It is built once per model and shared by every
// matcher over that model.
type Vocab struct {
	tok    [][]byte
	eog    []int32 // sorted
	isEOG  []bool
	sorted []int32 // ids of the non-empty, non-EOG tokens in byte order
	lcp    []int32 // lcp[i]: bytes sorted[i] shares with sorted[i-1]
	// skip[skipAt[i]+d] is the first j > i whose token does not share the
	// first d+1 bytes of token sorted[i]: where a walk resumes when that
	// prefix dies, without visiting the tokens in between.
	skip   []int32
	skipAt []int32
	maxLen int
	// maxStarts is the most UTF-8 character starts (bytes that are not
	// continuation bytes) in one token: no token can begin more characters
	// than that, which bounds how many repetitions of a bounded repetition
	// one token can consume (see Matcher.canonPos).
	maxStarts int
}

// NewVocab makes a vocabulary from each token's bytes (index = id) and the
// end-of-generation ids. Tokens with no bytes that are not EOG (BOS,
// padding, other control tokens) are never allowed under a grammar.
func NewVocab(tokens [][]byte, eog []int32) *Vocab {
	v := &Vocab{tok: make([][]byte, len(tokens)), isEOG: make([]bool, len(tokens))}
	for i, t := range tokens {
		v.tok[i] = slices.Clone(t)
	}
	for _, e := range eog {
		if e >= 0 && int(e) < len(tokens) && !v.isEOG[e] {
			v.isEOG[e] = true
			v.eog = append(v.eog, e)
		}
	}
	slices.Sort(v.eog)
	for i, t := range v.tok {
		if len(t) > 0 && !v.isEOG[i] {
			v.sorted = append(v.sorted, int32(i))
			v.maxLen = max(v.maxLen, len(t))
			starts := 0
			for _, c := range t {
				if c&0xC0 != 0x80 {
					starts++
				}
			}
			v.maxStarts = max(v.maxStarts, starts)
		}
	}
	slices.SortFunc(v.sorted, func(a, b int32) int {
		if c := bytes.Compare(v.tok[a], v.tok[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.lcp = make([]int32, len(v.sorted))
	for i := 1; i < len(v.sorted); i++ {
		a, b := v.tok[v.sorted[i-1]], v.tok[v.sorted[i]]
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		v.lcp[i] = int32(n)
	}
	v.skipAt = make([]int32, len(v.sorted)+1)
	for i, id := range v.sorted {
		v.skipAt[i+1] = v.skipAt[i] + int32(len(v.tok[id]))
	}
	v.skip = make([]int32, v.skipAt[len(v.sorted)])
	for i := len(v.sorted) - 1; i >= 0; i-- {
		for d := range len(v.tok[v.sorted[i]]) {
			j := int32(i + 1)
			if i+1 < len(v.sorted) && int(v.lcp[i+1]) > d {
				j = v.skip[v.skipAt[i+1]+int32(d)]
			}
			v.skip[v.skipAt[i]+int32(d)] = j
		}
	}
	return v
}

// FromTokenizer builds the vocabulary of t: each token's bytes are what
// t.Piece gives after a token other than BOS (as tokenizer.TextDecoder
// streams them): "▁" is a space, "<0xXX>" byte pieces their raw byte,
// byte-level BPE pieces the bytes their runes stand for; control tokens
// write nothing. The end-of-generation ids are t's EOG set when it has one
// (tokenizer.EOGer), else its EOS.
func FromTokenizer(t tokenizer.Tokenizer) *Vocab {
	n := t.VocabSize()
	toks := make([][]byte, n)
	for i := range n {
		toks[i] = []byte(t.Piece(-1, int32(i)))
	}
	var eog []int32
	if e, ok := t.(tokenizer.EOGer); ok {
		eog = e.EOG()
	} else if t.EOS() >= 0 {
		eog = []int32{t.EOS()}
	}
	return NewVocab(toks, eog)
}

// Len is the number of token ids.
func (v *Vocab) Len() int { return len(v.tok) }

// Bytes returns the bytes token id writes (shared: do not modify).
func (v *Vocab) Bytes(id int32) []byte { return v.tok[id] }

// IsEOG reports whether id ends generation.
func (v *Vocab) IsEOG(id int32) bool { return id >= 0 && int(id) < len(v.isEOG) && v.isEOG[id] }

// EOG returns the end-of-generation ids, sorted.
func (v *Vocab) EOG() []int32 { return slices.Clone(v.eog) }
