package tokenizer

import "unicode/utf8"

// TextDecoder turns one sequence's tokens into its text while they are being
// generated: Next returns the text that became complete with a token, Flush
// what is left at the end. One TextDecoder per sequence; it is not safe for
// concurrent use.
//
// A token's bytes are what Piece(prev, id) gives: SentencePiece "<0xXX>"
// byte-fallback pieces are their raw byte, byte-level BPE pieces the bytes
// their runes stand for, "▁" a space; BOS, EOS and other control tokens and
// unused tokens print nothing, unknown and user-defined tokens their text.
// As in llama2.c's run.c, the piece right after BOS loses its leading space
// (SentencePiece's dummy prefix), and at the start of the stream (prev -1) a
// piece keeps it.
//
// The bytes of consecutive tokens are joined and emitted only as complete
// UTF-8: a character split over several tokens (an emoji as four byte
// pieces, a BPE piece ending inside a character) is held until its last byte
// arrives, then printed whole. Bytes that cannot be, or can no longer become,
// valid UTF-8 are printed as U+FFFD, one per maximal subpart of an ill-formed
// sequence (Unicode §3.9 "U+FFFD substitution of maximal subparts"), the rule
// Python's bytes.decode(errors="replace") and hence Hugging Face's decode and
// TextStreamer follow: "\xe2\x82A" is "\uFFFDA". A sequence still incomplete
// at Flush becomes one U+FFFD. The output therefore never depends on how the
// bytes were split into tokens: the concatenation of every Next and the final
// Flush is Decode of the whole sequence.
//
// ASCII control bytes: a token whose whole text is one ASCII control byte
// other than \t \n \v \f \r (0x00–0x08, 0x0E–0x1F, 0x7F; in practice a
// "<0x1B>" byte piece) is dropped, as run.c's safe_printf drops it, so that a
// model cannot write terminal escape sequences or NULs into a console or a
// JSON result; the dropped byte does not interrupt a pending character.
// Control bytes inside a longer piece are kept (run.c keeps them too). With
// KeepControl set every byte is kept, which is what llama.cpp prints. For
// ASCII-only text the output is therefore exactly what run.c prints.
// Bytes 0x80–0xFF are never dropped: they are the UTF-8 run.c loses.
type TextDecoder struct {
	tok  Tokenizer
	prev int32
	// KeepControl keeps one-byte ASCII control pieces (llama.cpp's
	// behaviour) instead of dropping them (run.c's).
	KeepControl bool
	pend        [utf8.UTFMax]byte // an incomplete UTF-8 prefix, held
	npend       int
	out         []byte // scratch for Next
}

// NewTextDecoder starts decoding a sequence from its first token (a leading
// BOS prints nothing, and the piece after it loses its leading space).
func NewTextDecoder(t Tokenizer) *TextDecoder { return NewTextDecoderAfter(t, -1) }

// NewTextDecoderAfter starts decoding after token prev, which is not printed:
// for the completion of a prompt, prev is the prompt's last token, so a
// completion right after a BOS-only prompt loses its leading space exactly as
// the full text would. -1 means no previous token.
func NewTextDecoderAfter(t Tokenizer, prev int32) *TextDecoder {
	return &TextDecoder{tok: t, prev: prev}
}

// Reset makes d decode a new sequence after prev (-1: from its start),
// dropping any held bytes; KeepControl is kept.
func (d *TextDecoder) Reset(prev int32) {
	d.prev, d.npend = prev, 0
}

// Clone returns an independent copy of d in its current state (a held
// partial character included), for a sequence that forks (beam search).
func (d *TextDecoder) Clone() *TextDecoder {
	c := *d
	c.out = nil
	return &c
}

// Pending is the number of bytes held back as the start of an incomplete
// UTF-8 character (0 to 3).
func (d *TextDecoder) Pending() int { return d.npend }

// Next decodes token tok and returns the text that became complete with it,
// possibly "" (a control token, or the first bytes of a character).
func (d *TextDecoder) Next(tok int32) string {
	p := d.piece(tok)
	if d.npend == 0 && utf8.ValidString(p) {
		return p // the common case: a whole piece, no copy
	}
	d.out = d.appendText(d.out[:0], p)
	return string(d.out)
}

// AppendNext is Next appending to dst, for callers that keep one buffer (it
// does not allocate once d and dst have grown).
func (d *TextDecoder) AppendNext(dst []byte, tok int32) []byte {
	return d.appendText(dst, d.piece(tok))
}

// Flush returns what is held at the end of the sequence: "" or, for a
// character that never completed, U+FFFD. d can then continue, as if the
// sequence restarted after the last token.
func (d *TextDecoder) Flush() string {
	return string(d.AppendFlush(nil))
}

// AppendFlush is Flush appending to dst.
func (d *TextDecoder) AppendFlush(dst []byte) []byte {
	if d.npend > 0 {
		d.npend = 0
		dst = utf8.AppendRune(dst, utf8.RuneError)
	}
	return dst
}

// piece is the text of tok after d.prev, after the control-byte rule.
func (d *TextDecoder) piece(tok int32) string {
	p := d.tok.Piece(d.prev, tok)
	d.prev = tok
	if len(p) == 1 && !d.KeepControl && isDroppedControl(p[0]) {
		return ""
	}
	return p
}

// isDroppedControl reports the ASCII control bytes run.c's safe_printf
// drops: not printable and not whitespace.
func isDroppedControl(c byte) bool {
	return c < 0x20 && !(c >= '\t' && c <= '\r') || c == 0x7f
}

// appendText appends the complete UTF-8 of the held bytes followed by p to
// dst and holds a trailing incomplete character.
func (d *TextDecoder) appendText(dst []byte, p string) []byte {
	i := 0
	if d.npend > 0 {
		// Complete the held character with p's first bytes; at most 3 more
		// are needed, so this works on a small copy.
		var buf [2 * utf8.UTFMax]byte
		n := copy(buf[:], d.pend[:d.npend])
		n += copy(buf[n:], p[:min(len(p), utf8.UTFMax-1)])
		k, complete := utf8Unit(buf[:n])
		if !complete {
			// Still a valid prefix; it used all of p (p was short).
			d.npend = copy(d.pend[:], buf[:n])
			return dst
		}
		if k < 0 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			k = -k
		} else {
			dst = append(dst, buf[:k]...)
		}
		// The held bytes are a valid prefix, so the unit (character or
		// ill-formed subpart) ends in p, never inside them.
		i = k - d.npend
		d.npend = 0
	}
	for i < len(p) {
		if c := p[i]; c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		k, complete := utf8Unit(p[i:min(len(p), i+utf8.UTFMax)])
		if !complete {
			d.npend = copy(d.pend[:], p[i:])
			return dst
		}
		if k < 0 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
			i += -k
			continue
		}
		dst = append(dst, p[i:i+k]...)
		i += k
	}
	return dst
}

// utf8Unit looks at the sequence starting at b[0] (len(b) >= 1): a
// well-formed character of k bytes gives (k, true); an ill-formed one gives
// (-k, true), k being the length of its maximal subpart (the longest prefix
// that could have started a character, at least 1); a valid prefix cut short
// by the end of b gives (0, false).
func utf8Unit[S ~string | ~[]byte](b S) (int, bool) {
	c := b[0]
	if c < utf8.RuneSelf {
		return 1, true
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF) // the range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F // no surrogates
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F // nothing above U+10FFFF
	default:
		return -1, true // a continuation byte, C0, C1 or F5–FF
	}
	for j := 1; j <= need; j++ {
		if j >= len(b) {
			return 0, false
		}
		if b[j] < lo || b[j] > hi {
			return -j, true
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true
}

// Decode is the text of toks as a TextDecoder after prev streams it (see
// TextDecoder), flushed at the end: prev -1 decodes a whole sequence, and a
// completion is Decode(t, prompt[len(prompt)-1], generated). Unlike
// Tokenizer.Decode, the first piece keeps its leading space unless it
// follows a BOS (run.c's printing rule), and one-byte ASCII control pieces
// are dropped.
func Decode(t Tokenizer, prev int32, toks []int32) string {
	d := NewTextDecoderAfter(t, prev)
	var b []byte
	for _, id := range toks {
		b = d.AppendNext(b, id)
	}
	return string(d.AppendFlush(b))
}
