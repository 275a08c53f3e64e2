package tokenizer

import "unicode/utf8"

// MaxBytesPerToken bounds how many bytes of the text one token of Encode's
// output stands for, so len(text) / MaxBytesPerToken tokens is a lower bound
// on the length of the encoding that costs nothing to compute: a server can
// refuse a prompt that cannot fit the context from its byte length alone,
// before spending seconds tokenizing megabytes. It returns 0 when there is no
// such bound: when the vocabulary can drop bytes it has no piece for (no
// byte pieces and no unknown token), or t is not one of this package's
// tokenizers.
//
// Every token Encode emits covers input bytes equal to its decoded text (a
// merged piece, a byte piece's byte), a special token's literal text (its
// piece) or, for the unknown token, one character (at most utf8.UTFMax
// bytes); SentencePiece's dummy prefix only adds tokens. So the bound is the
// longest decoded text or piece, or utf8.UTFMax if that is shorter.
func MaxBytesPerToken(t Tokenizer) int {
	var v *vocab
	covered := true
	switch t := t.(type) {
	case *SPM:
		v = t.vocab
		// A character no piece covers goes out byte by byte: its byte piece,
		// a one-byte piece, or unk, else nothing.
		for b := range 256 {
			_, one := v.lookup[string([]byte{byte(b)})]
			covered = covered && (v.byteTok[b] >= 0 || one || v.unk >= 0)
		}
	case *BPE:
		v = t.vocab
		for b := range 256 {
			if t.pre.raw {
				// Characters as they are: a piece no merge covers goes out
				// as each byte's "<0xXX>" piece, or the byte is dropped.
				covered = covered && v.byteTok[b] >= 0
			} else {
				// Byte-level: a piece no merge covers goes out as each
				// byte's one-rune piece, or unk, or nothing.
				_, one := v.lookup[string(byteRune[b])]
				covered = covered && (one || v.unk >= 0)
			}
		}
	default:
		return 0
	}
	if !covered {
		return 0
	}
	n := utf8.UTFMax
	for i, s := range v.text {
		n = max(n, len(s), len(v.pieces[i])) // a special token's literal text is its piece
	}
	return n
}
