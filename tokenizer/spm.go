package tokenizer

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"unicode/utf8"
)

// spaceMarker is SentencePiece's escaped space, U+2581 "▁".
const spaceMarker = "\u2581"

// SPM is a SentencePiece BPE tokenizer (llama.cpp llm_tokenizer_spm, llama2.c
// run.c encode/decode).
//
// Encode, for each run of text between special tokens:
//  1. prefix a space when the text is non-empty and follows the start or a
//     special token (SentencePiece add_dummy_prefix; llama2.c does it too),
//  2. for GGUF vocabularies replace every ' ' with "▁" (llama2.c tokenizer.bin
//     files store plain spaces and need no escaping),
//  3. split into UTF-8 characters (an invalid byte is a character of its own),
//  4. repeatedly merge the adjacent pair whose concatenation is a piece with
//     the highest score, the leftmost on ties,
//  5. emit each remaining symbol's piece; a symbol that is no piece is a single
//     character, emitted byte by byte as "<0xXX>" pieces (or unk).
//
// Step 4 keeps the candidate pairs in a binary heap over a linked list of
// symbols (llama.cpp's approach), so it costs O(n log n) rather than
// llama2.c's O(n²) rescans; the result is the same as run.c's on real
// vocabularies (TestLlama2CMatchesRunc, FuzzTokenizerRoundTrip). The one
// difference: characters that are no piece themselves still merge into a
// piece (SentencePiece does this too), where run.c has already turned them
// into byte pieces that never merge.
//
// Decode removes the dummy prefix again, as SentencePiece does: one leading
// space of the first piece and of the first piece after each BOS. Hence, for
// a llama2.c vocabulary with byte pieces, Decode(Encode(s, o)) == s for every
// byte string s when o.ParseSpecial is false. (GGUF vocabularies cannot return
// a literal "▁" in s: Encode turns it into a space marker like ' '.)
type SPM struct {
	*vocab
	scores         []float32
	space          string // what ' ' becomes before merging: "▁", or " " for llama2.c
	addSpacePrefix bool
	scratch        sync.Pool // *spmScratch
}

var _ Tokenizer = (*SPM)(nil)

// SPMOptions describes an SPM vocabulary for NewSPM.
type SPMOptions struct {
	Pieces []string
	Scores []float32   // one per piece; higher merges first
	Types  []TokenType // one per piece; nil = all normal except BOS/EOS (control), Unk and "<0xXX>" pieces (byte)
	// BOS, EOS and Unk are token ids, or -1 for none.
	BOS, EOS, Unk int32
	// EscapeSpaces makes Encode map ' ' to "▁" and Decode map it back: true
	// for SentencePiece/GGUF vocabularies, false for llama2.c tokenizer.bin.
	EscapeSpaces bool
	// NoSpacePrefix disables the dummy-prefix space (GGUF
	// tokenizer.ggml.add_space_prefix = false).
	NoSpacePrefix bool
	// AddBOS and AddEOS are the vocabulary's defaults (GGUF
	// tokenizer.ggml.add_bos_token/add_eos_token), reported by AddBOS/AddEOS.
	AddBOS, AddEOS bool
}

// NewSPM builds an SPM tokenizer from an in-memory vocabulary (loaders and
// test fixtures use it). Scores and Types must have one entry per piece and
// BOS/EOS/Unk must be ids or -1.
func NewSPM(o SPMOptions) (*SPM, error) {
	n := len(o.Pieces)
	if len(o.Scores) != n || (o.Types != nil && len(o.Types) != n) {
		return nil, fmt.Errorf("tokenizer: NewSPM: %d pieces but %d scores and %d types: %w", n, len(o.Scores), len(o.Types), ErrFormat)
	}
	if err := checkSpecialIDs(n, o.BOS, o.EOS, o.Unk); err != nil {
		return nil, fmt.Errorf("tokenizer: NewSPM: %w", err)
	}
	types := o.Types
	if types == nil {
		types = inferTypes(o.Pieces, o.BOS, o.EOS, o.Unk, true)
	}
	space := " "
	unescape := func(s string) string { return s }
	if o.EscapeSpaces {
		space = spaceMarker
		unescape = func(s string) string { return strings.ReplaceAll(s, spaceMarker, " ") }
	}
	v := newVocab(o.Pieces, types, o.BOS, o.EOS, o.Unk, unescape)
	v.addBOS, v.addEOS = o.AddBOS, o.AddEOS
	return &SPM{vocab: v, scores: o.Scores, space: space, addSpacePrefix: !o.NoSpacePrefix}, nil
}

// inferTypes types a vocabulary that carries none: bos/eos are control, unk
// is unknown, "<0xXX>" pieces are bytes when bytePieces is set, the rest normal.
func inferTypes(pieces []string, bos, eos, unk int32, bytePieces bool) []TokenType {
	types := make([]TokenType, len(pieces))
	for i, p := range pieces {
		types[i] = TypeNormal
		if _, ok := parseBytePiece(p); ok && bytePieces {
			types[i] = TypeByte
		}
	}
	if unk >= 0 {
		types[unk] = TypeUnknown
	}
	for _, id := range []int32{bos, eos} {
		if id >= 0 {
			types[id] = TypeControl
		}
	}
	return types
}

// Kind reports KindSPM.
func (t *SPM) Kind() Kind { return KindSPM }

// Score returns the merge score of id (0 when out of range).
func (t *SPM) Score(id int32) float32 {
	if !t.vocab.valid(id) {
		return 0
	}
	return t.scores[id]
}

// Decode implements Tokenizer.
func (t *SPM) Decode(ids []int32) string { return t.vocab.decode(ids, t.addSpacePrefix) }

// Piece implements Tokenizer.
func (t *SPM) Piece(prev, id int32) string { return t.vocab.piece(prev, id, t.addSpacePrefix) }

// spmSym is one symbol of the text being merged: bytes [start, start+n) of
// the escaped text, linked to its neighbours; n == 0 once merged away.
type spmSym struct {
	start, n   int32
	prev, next int32
}

// mergePair is a queued candidate merge of a symbol (left, in key's low 32
// bits) with its right neighbour. key orders the queue, smallest first; size
// is the pair's combined length when queued: if either symbol has changed
// since, the pair is stale.
type mergePair struct {
	key         uint64
	right, size int32
}

func (p mergePair) left() int32 { return int32(uint32(p.key)) }

// spmKey makes the highest score pop first, then the leftmost pair: the
// score's bits are mapped to an unsigned integer in descending float order
// (-0 counts as +0, as float comparison does).
func spmKey(score float32, left int32) uint64 {
	if score == 0 {
		score = 0
	}
	b := math.Float32bits(score)
	if b&(1<<31) != 0 {
		b = ^b // negative: larger magnitude sorts lower
	} else {
		b |= 1 << 31
	}
	return uint64(^b)<<32 | uint64(uint32(left))
}

type spmScratch struct {
	buf   []byte
	syms  []spmSym
	queue []mergePair
}

// Encode implements Tokenizer.
func (t *SPM) Encode(text string, o EncodeOptions) []int32 {
	out := make([]int32, 0, len(text)/3+2)
	if o.BOS && t.vocab.bos >= 0 {
		out = append(out, t.vocab.bos)
	}
	s, _ := t.scratch.Get().(*spmScratch)
	if s == nil {
		s = new(spmScratch)
	}
	prevSpecial := true
	for _, f := range t.vocab.partition(text, o.ParseSpecial) {
		if f.id >= 0 {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		s.buf = s.buf[:0]
		if t.addSpacePrefix && prevSpecial {
			s.buf = append(s.buf, t.space...)
		}
		if t.space == " " {
			s.buf = append(s.buf, f.text...)
		} else {
			for i := 0; i < len(f.text); {
				j := strings.IndexByte(f.text[i:], ' ')
				if j < 0 {
					s.buf = append(s.buf, f.text[i:]...)
					break
				}
				s.buf = append(s.buf, f.text[i:i+j]...)
				s.buf = append(s.buf, t.space...)
				i += j + 1
			}
		}
		out = t.encodeRun(s, out)
		prevSpecial = false
	}
	t.scratch.Put(s)
	if o.EOS && t.vocab.eos >= 0 {
		out = append(out, t.vocab.eos)
	}
	return out
}

// encodeRun merges s.buf and appends its tokens to out.
func (t *SPM) encodeRun(s *spmScratch, out []int32) []int32 {
	buf := s.buf
	syms := s.syms[:0]
	for i := 0; i < len(buf); {
		_, w := utf8.DecodeRune(buf[i:])
		n := int32(len(syms))
		syms = append(syms, spmSym{start: int32(i), n: int32(w), prev: n - 1, next: n + 1})
		i += w
	}
	if len(syms) == 0 {
		s.syms = syms
		return out
	}
	syms[len(syms)-1].next = -1

	q := s.queue[:0]
	try := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		id, ok := t.vocab.lookup[string(buf[l.start:r.start+r.n])]
		if !ok {
			return
		}
		q = pushPair(q, mergePair{key: spmKey(t.scores[id], left), right: right, size: l.n + r.n})
	}
	mergeAll(syms, &q, try)
	for i := int32(0); i >= 0; i = syms[i].next {
		piece := buf[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.vocab.lookup[string(piece)]; ok {
			out = append(out, id)
			continue
		}
		for _, b := range piece {
			out = t.vocab.appendByte(out, b)
		}
	}
	s.syms, s.queue = syms, q
	return out
}

// pushPair and popPair keep q a binary min-heap on key. Hand-written rather
// than container/heap so the comparison inlines in Encode's innermost loop.
func pushPair(q []mergePair, p mergePair) []mergePair {
	q = append(q, p)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if q[parent].key <= q[i].key {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	return q
}

// mergeAll offers every adjacent pair of the linked symbols to try, which
// queues those that may merge, then applies the queued merges best first;
// each merge offers the merged symbol's new neighbour pairs. An entry whose
// sides changed since it was queued is stale and skipped. SPM (by score) and
// BPE (by rank) differ only in their try.
func mergeAll(syms []spmSym, q *[]mergePair, try func(left, right int32)) {
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(*q) > 0 {
		var p mergePair
		p, *q = popPair(*q)
		left := p.left()
		l, r := &syms[left], &syms[p.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != p.size {
			continue // stale: one side was merged into something else
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = left
		}
		try(l.prev, left)
		try(left, l.next)
	}
}

func popPair(q []mergePair) (mergePair, []mergePair) {
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(q) && q[l].key < q[m].key {
			m = l
		}
		if r := l + 1; r < len(q) && q[r].key < q[m].key {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return top, q
}
