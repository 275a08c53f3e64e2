package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// byteRune is GPT-2's bytes_to_unicode table: the printable bytes '!'..'~',
// '¡'..'¬' and '®'..'ÿ' stand for themselves, the other 68 bytes map in
// order to U+0100..U+0143, so every byte string has a printable spelling
// without spaces (' ' is "Ġ", '\n' is "Ċ"). runeByte is its inverse (-1 for
// runes outside the table).
var byteRune, runeByte = func() (br [256]rune, rb [0x144]int16) {
	for i := range rb {
		rb[i] = -1
	}
	next := rune(0x100)
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			br[b] = rune(b)
		} else {
			br[b] = next
			next++
		}
		rb[br[b]] = int16(b)
	}
	return br, rb
}()

// unmapBytes turns a byte-level piece back into bytes; runes outside the
// table (added tokens written in plain text) are kept as they are.
func unmapBytes(p string) string {
	var b []byte
	for i := 0; i < len(p); {
		r, w := utf8.DecodeRuneInString(p[i:])
		if int(r) < len(runeByte) && runeByte[r] >= 0 {
			b = append(b, byte(runeByte[r]))
		} else {
			b = append(b, p[i:i+w]...)
		}
		i += w
	}
	return string(b)
}

// BPE is a byte-level BPE tokenizer (llama.cpp llm_tokenizer_bpe, HF
// ByteLevel BPE) for GPT-2, Llama 3, Qwen2 and SmolLM style vocabularies.
//
// Encode, for each run of text between special tokens, splits it into
// pre-tokens with the vocabulary's pattern (GPT-2's by default), spells each pre-token's bytes
// with the bytes_to_unicode runes, and merges adjacent symbols: the pair
// "a b" with the lowest rank in the merges list first, the leftmost on ties,
// until no pair of the list is left. Each final symbol is its piece; a symbol
// that is not a piece (a merges list naming a pair whose concatenation is
// not in the vocabulary) is emitted rune by rune. Byte-level BPE is lossless:
// Decode(Encode(s, o)) == s for every byte string s when o.ParseSpecial is
// false and s contains no user-defined token.
type BPE struct {
	*vocab
	ranks   map[string]int32 // "a b" → position in the merges list
	pre     *preTokenizer
	scratch sync.Pool // *bpeScratch
}

var _ Tokenizer = (*BPE)(nil)

// BPEOptions describes a byte-level BPE vocabulary for NewBPE.
type BPEOptions struct {
	Pieces []string    // byte-level spelled pieces
	Types  []TokenType // one per piece; nil = all normal except BOS/EOS (control) and Unk
	Merges []string    // "a b" pairs, highest priority first
	// Pre names the pre-tokenizer as GGUF tokenizer.ggml.pre does, with
	// llama.cpp's meaning: "gpt-2", "llama-bpe" (Llama 3, which also emits a
	// pre-token that is a whole piece without merging), "qwen2", "smollm",
	// "deepseek-v3", … (PreTokenizers lists them all); "" is llama.cpp's
	// fallback for a vocabulary without the key, "default".
	Pre string
	// BOS, EOS and Unk are token ids, or -1 for none.
	BOS, EOS, Unk  int32
	AddBOS, AddEOS bool // the vocabulary's defaults, reported by AddBOS/AddEOS
}

// NewBPE builds a byte-level BPE tokenizer from an in-memory vocabulary.
// Every merge must contain a space separating its two halves.
func NewBPE(o BPEOptions) (*BPE, error) {
	n := len(o.Pieces)
	if o.Types != nil && len(o.Types) != n {
		return nil, fmt.Errorf("tokenizer: NewBPE: %d pieces but %d types: %w", n, len(o.Types), ErrFormat)
	}
	if err := checkSpecialIDs(n, o.BOS, o.EOS, o.Unk); err != nil {
		return nil, fmt.Errorf("tokenizer: NewBPE: %w", err)
	}
	pre, ok := lookupPre(o.Pre)
	if !ok {
		return nil, fmt.Errorf("tokenizer: NewBPE: %w", unknownPre(o.Pre))
	}
	ranks := make(map[string]int32, len(o.Merges))
	for i, m := range o.Merges {
		// llama.cpp splits at the first space after the first byte, so a
		// merge may start with a space; it needs one somewhere after that.
		if len(m) < 3 || strings.IndexByte(m[1:], ' ') < 0 {
			return nil, fmt.Errorf("tokenizer: NewBPE: merge %d %q: expected two pieces separated by a space: %w", i, m, ErrFormat)
		}
		if _, dup := ranks[m]; !dup {
			ranks[m] = int32(i)
		}
	}
	types := o.Types
	if types == nil {
		types = inferTypes(o.Pieces, o.BOS, o.EOS, o.Unk, pre.raw)
	}
	unmap := unmapBytes
	if pre.raw {
		unmap = func(p string) string { return strings.ReplaceAll(p, spaceMarker, " ") }
	}
	v := newVocab(o.Pieces, types, o.BOS, o.EOS, o.Unk, unmap)
	v.addBOS, v.addEOS = o.AddBOS || pre.forceBOS, o.AddEOS
	return &BPE{vocab: v, ranks: ranks, pre: pre}, nil
}

// Kind reports KindBPE.
func (t *BPE) Kind() Kind { return KindBPE }

// Decode implements Tokenizer. Byte-level BPE has no dummy prefix to remove.
func (t *BPE) Decode(ids []int32) string { return t.vocab.decode(ids, false) }

// Piece implements Tokenizer. Byte-level BPE has no dummy prefix, so a piece
// after BOS keeps its leading space.
func (t *BPE) Piece(prev, id int32) string { return t.vocab.piece(prev, id, false) }

type bpeScratch struct {
	buf   []byte // the pre-token spelled in byte-level runes
	key   []byte // "a b" of the pair being looked up
	syms  []spmSym
	queue []mergePair
	text  preText
}

// Encode implements Tokenizer.
func (t *BPE) Encode(text string, o EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if o.BOS && t.vocab.bos >= 0 {
		out = append(out, t.vocab.bos)
	}
	s, _ := t.scratch.Get().(*bpeScratch)
	if s == nil {
		s = new(bpeScratch)
	}
	for _, f := range t.vocab.partition(text, o.ParseSpecial) {
		if f.id >= 0 {
			out = append(out, f.id)
			continue
		}
		text := f.text
		if t.pre.raw { // llama.cpp's escape_whitespaces, per raw-text fragment
			text = strings.ReplaceAll(text, " ", spaceMarker)
		}
		t.pre.split(&s.text, text, func(word string) { out = t.encodeWord(s, word, out) })
	}
	t.scratch.Put(s)
	if o.EOS && t.vocab.eos >= 0 {
		out = append(out, t.vocab.eos)
	}
	return out
}

// encodeWord merges one pre-token and appends its tokens to out. Its
// symbols are the byte-level runes of its bytes, or for an SPM-style
// vocabulary (pre.raw) its UTF-8 characters.
func (t *BPE) encodeWord(s *bpeScratch, word string, out []int32) []int32 {
	buf, syms := s.buf[:0], s.syms[:0]
	if t.pre.raw {
		if t.pre.newlineWhole && strings.Trim(word, "\n") == "" {
			if id, ok := t.vocab.lookup[word]; ok {
				return append(out, id)
			}
		}
		buf = append(buf, word...)
		for i := 0; i < len(word); {
			_, w := utf8.DecodeRuneInString(word[i:])
			n := int32(len(syms))
			syms = append(syms, spmSym{start: int32(i), n: int32(w), prev: n - 1, next: n + 1})
			i += w
		}
	} else {
		for i := 0; i < len(word); i++ {
			n := int32(len(syms))
			start := int32(len(buf))
			buf = utf8.AppendRune(buf, byteRune[word[i]])
			syms = append(syms, spmSym{start: start, n: int32(len(buf)) - start, prev: n - 1, next: n + 1})
		}
	}
	if len(syms) == 0 {
		return out
	}
	if t.pre.ignore {
		if id, ok := t.vocab.lookup[string(buf)]; ok {
			s.buf, s.syms = buf, syms
			return append(out, id)
		}
	}
	syms[len(syms)-1].next = -1

	q, key := s.queue[:0], s.key
	try := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		key = append(key[:0], buf[l.start:l.start+l.n]...)
		key = append(key, ' ')
		key = append(key, buf[r.start:r.start+r.n]...)
		rank, ok := t.ranks[string(key)]
		if !ok {
			return
		}
		// Lowest rank first, then leftmost.
		q = pushPair(q, mergePair{key: uint64(rank)<<32 | uint64(left), right: right, size: l.n + r.n})
	}
	mergeAll(syms, &q, try)
	for i := int32(0); i >= 0; i = syms[i].next {
		piece := buf[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.vocab.lookup[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		if t.pre.raw { // each byte's "<0xXX>" piece; none: the byte is dropped
			for _, b := range piece {
				if id := t.vocab.byteTok[b]; id >= 0 {
					out = append(out, id)
				}
			}
			continue
		}
		for j := 0; j < len(piece); {
			_, w := utf8.DecodeRune(piece[j:])
			if id, ok := t.vocab.lookup[string(piece[j:j+w])]; ok {
				out = append(out, id)
			} else if t.vocab.unk >= 0 {
				out = append(out, t.vocab.unk)
			}
			j += w
		}
	}
	s.buf, s.key, s.syms, s.queue = buf, key, syms, q
	return out
}
