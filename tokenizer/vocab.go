package tokenizer

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// vocab is what SPM and BPE share: the pieces, their types, the text → id
// index used while merging, the special tokens matched before tokenizing, and
// the decoded text of every id (precomputed so streaming Piece is a lookup).
type vocab struct {
	pieces []string
	types  []TokenType
	// lookup maps piece text to id for the types text can turn into: normal,
	// undefined, user-defined and unused. Control, unknown and byte pieces are
	// left out so that literal "<s>" or "<0x41>" in the input can never merge
	// into BOS or a byte token (llama.cpp does not exclude them, but no real
	// merge chain reaches them, so the output is the same on real
	// vocabularies). For duplicate texts the lowest id wins.
	lookup map[string]int32
	// byteTok[b] is the id of the "<0xXX>" byte piece for b, or -1.
	byteTok [256]int32
	// specials are the control, unknown and user-defined ids with a non-empty
	// text, longest text first (then lowest id): the order llama.cpp's
	// tokenizer_st_partition tries them in.
	specials []int32
	// text is the decoded text of each id: "" for control and unused tokens,
	// the byte for byte tokens, the raw text for unknown and user-defined
	// tokens, the unescaped text for normal ones.
	text []string
	// stripOK marks ids whose decoded text may lose its leading space as the
	// dummy prefix: normal pieces and the byte piece of ' '.
	stripOK []bool

	bos, eos, unk  int32
	addBOS, addEOS bool
	eog            []int32 // end-of-generation ids, sorted (eog.go)
}

func mergeable(t TokenType) bool {
	return t == TypeNormal || t == TypeUndefined || t == TypeUserDefined || t == TypeUnused
}

// newVocab indexes pieces. types has len(pieces) entries; bos, eos and unk
// are ids or -1. unescape turns a normal piece into its text.
func newVocab(pieces []string, types []TokenType, bos, eos, unk int32, unescape func(string) string) *vocab {
	v := &vocab{
		pieces:  pieces,
		types:   types,
		lookup:  make(map[string]int32, len(pieces)),
		text:    make([]string, len(pieces)),
		stripOK: make([]bool, len(pieces)),
		bos:     bos,
		eos:     eos,
		unk:     unk,
	}
	for i := range v.byteTok {
		v.byteTok[i] = -1
	}
	for i, p := range pieces {
		id := int32(i)
		switch t := types[i]; {
		case mergeable(t):
			if _, dup := v.lookup[p]; !dup {
				v.lookup[p] = id
			}
			if t == TypeUserDefined {
				v.text[i] = p
				v.specials = append(v.specials, id)
			} else if t != TypeUnused {
				v.text[i] = unescape(p)
				v.stripOK[i] = true
			}
		case t == TypeByte:
			if b, ok := parseBytePiece(p); ok {
				if v.byteTok[b] < 0 {
					v.byteTok[b] = id
				}
				v.text[i] = string([]byte{b})
				v.stripOK[i] = b == ' '
			}
		case t == TypeUnknown:
			v.text[i] = p
			v.specials = append(v.specials, id)
		case t == TypeControl:
			v.specials = append(v.specials, id)
		}
	}
	v.eog, _ = eogSet(pieces, types, eos, nil)
	v.specials = slices.DeleteFunc(v.specials, func(id int32) bool { return pieces[id] == "" })
	slices.SortFunc(v.specials, func(a, b int32) int {
		if c := cmp.Compare(len(pieces[b]), len(pieces[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return v
}

// parseBytePiece recognises SentencePiece byte pieces, "<0xXX>" with two hex
// digits.
func parseBytePiece(p string) (byte, bool) {
	if len(p) != 6 || !strings.HasPrefix(p, "<0x") || p[5] != '>' {
		return 0, false
	}
	hi, ok1 := unhex(p[3])
	lo, ok2 := unhex(p[4])
	return hi<<4 | lo, ok1 && ok2
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// checkSpecialIDs checks that BOS, EOS and Unk are ids of an n-piece
// vocabulary or -1.
func checkSpecialIDs(n int, bos, eos, unk int32) error {
	for _, c := range []struct {
		name string
		id   int32
	}{{"BOS", bos}, {"EOS", eos}, {"Unk", unk}} {
		if c.id < -1 || int(c.id) >= n {
			return fmt.Errorf("%s id %d outside [-1, %d): %w", c.name, c.id, n, ErrFormat)
		}
	}
	return nil
}

func (v *vocab) valid(id int32) bool { return id >= 0 && int(id) < len(v.pieces) }

// appendByte emits one byte no merged piece covers: its "<0xXX>" piece, else
// a one-byte piece with that text (llama.cpp byte_to_token), else unk, else
// nothing.
func (v *vocab) appendByte(out []int32, b byte) []int32 {
	if id := v.byteTok[b]; id >= 0 {
		return append(out, id)
	}
	if id, ok := v.lookup[string([]byte{b})]; ok {
		return append(out, id)
	}
	if v.unk >= 0 {
		return append(out, v.unk)
	}
	return out
}

// fragment is a piece of input text after special-token partitioning: raw
// text to tokenize (id < 0) or one special token.
type fragment struct {
	text string
	id   int32
}

// partition splits text around the special tokens it contains, as llama.cpp's
// tokenizer_st_partition does: each special token, longest first, splits every
// raw fragment at each of its occurrences, left to right. User-defined tokens
// are always matched; control and unknown ones only with parseSpecial. Empty
// raw fragments are dropped, so "" gives no fragment at all.
func (v *vocab) partition(text string, parseSpecial bool) []fragment {
	if text == "" {
		return nil
	}
	frags := []fragment{{text: text, id: -1}}
	for _, id := range v.specials {
		if t := v.types[id]; !parseSpecial && t != TypeUserDefined {
			continue
		}
		sp := v.pieces[id]
		var hit bool
		for _, f := range frags {
			if f.id < 0 && strings.Contains(f.text, sp) {
				hit = true
				break
			}
		}
		if !hit {
			continue
		}
		next := make([]fragment, 0, len(frags)+2)
		for _, f := range frags {
			if f.id >= 0 {
				next = append(next, f)
				continue
			}
			s := f.text
			for {
				i := strings.Index(s, sp)
				if i < 0 {
					break
				}
				if i > 0 {
					next = append(next, fragment{text: s[:i], id: -1})
				}
				next = append(next, fragment{text: sp, id: id})
				s = s[i+len(sp):]
			}
			if s != "" {
				next = append(next, fragment{text: s, id: -1})
			}
		}
		frags = next
	}
	return frags
}

// decode is Decode for both kinds: the concatenated text of ids, without the
// dummy-prefix space when stripPrefix is set.
func (v *vocab) decode(ids []int32, stripPrefix bool) string {
	var sb strings.Builder
	for i, id := range ids {
		if !v.valid(id) {
			continue
		}
		s := v.text[id]
		if stripPrefix && v.stripOK[id] && (i == 0 || (v.bos >= 0 && ids[i-1] == v.bos)) {
			s = strings.TrimPrefix(s, " ")
		}
		sb.WriteString(s)
	}
	return sb.String()
}

// piece is Piece for both kinds.
func (v *vocab) piece(prev, id int32, stripPrefix bool) string {
	if !v.valid(id) {
		return ""
	}
	s := v.text[id]
	if stripPrefix && prev >= 0 && prev == v.bos && v.stripOK[id] {
		s = strings.TrimPrefix(s, " ")
	}
	return s
}

func (v *vocab) token(id int32) string {
	if !v.valid(id) {
		return ""
	}
	return v.pieces[id]
}

// Type returns the token type of id (TypeUndefined when out of range).
func (v *vocab) tokenType(id int32) TokenType {
	if !v.valid(id) {
		return TypeUndefined
	}
	return v.types[id]
}

// The accessors SPM and BPE share, promoted through their embedded *vocab.

// VocabSize is the number of pieces.
func (v *vocab) VocabSize() int { return len(v.pieces) }

// BOS is the beginning-of-sequence id, or -1.
func (v *vocab) BOS() int32 { return v.bos }

// EOS is the end-of-sequence id, or -1.
func (v *vocab) EOS() int32 { return v.eos }

// Unk is the unknown-token id, or -1.
func (v *vocab) Unk() int32 { return v.unk }

// AddBOS reports whether the vocabulary asks for a BOS before every prompt.
func (v *vocab) AddBOS() bool { return v.addBOS }

// AddEOS reports whether the vocabulary asks for an EOS after every prompt.
func (v *vocab) AddEOS() bool { return v.addEOS }

// Token returns the raw vocabulary entry of id (byte-level spelled for BPE).
func (v *vocab) Token(id int32) string { return v.token(id) }

// Type returns the token type of id.
func (v *vocab) Type(id int32) TokenType { return v.tokenType(id) }
