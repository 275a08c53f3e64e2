package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// CheckError says where a text leaves a grammar's language: Offset is the
// byte offset of the first byte no string of the language has there
// (len(text) when the text stops short of a complete string), Expected
// describes what could have come instead.
type CheckError struct {
	Offset   int
	Found    string // the offending byte, quoted, or "end of input"
	Expected string
}

func (e *CheckError) Error() string {
	return fmt.Sprintf("byte %d: found %s, expected %s", e.Offset, e.Found, e.Expected)
}

// Check reports whether text is a complete string of g's language: nil,
// or a *CheckError naming the offset and what was expected there.
func (g *Grammar) Check(text []byte) error {
	s := g.start()
	for i := range text {
		ns, ok := g.advanceBytes(s, text[i:i+1])
		if !ok {
			return &CheckError{Offset: i, Found: quoteByte(text[i]), Expected: g.Expected(s)}
		}
		s = ns
	}
	if !s.acc {
		return &CheckError{Offset: len(text), Found: "end of input", Expected: g.Expected(s)}
	}
	return nil
}

// Expected describes the bytes that may follow in state s (and "end of
// input" when the text may end there), for error messages.
func (g *Grammar) Expected(s State) string {
	var ok [256]bool
	for b := range 256 {
		_, ok[b] = g.advanceBytes(s, []byte{byte(b)})
	}
	var parts []string
	for b := 0; b < 256; {
		if !ok[b] {
			b++
			continue
		}
		e := b
		for e+1 < 256 && ok[e+1] && (e+1 < 0x80) == (b < 0x80) {
			e++
		}
		switch {
		case b >= 0x80:
			parts = append(parts, "a non-ASCII character")
		case e == b:
			parts = append(parts, quoteByte(byte(b)))
		default:
			parts = append(parts, quoteByte(byte(b))+".."+quoteByte(byte(e)))
		}
		b = e + 1
	}
	if s.acc {
		parts = append(parts, "end of input")
	}
	if s.end {
		return "nothing (generation ended)"
	}
	if len(parts) > 12 {
		parts = append(parts[:12], "...")
	}
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return "one of " + strings.Join(parts, ", ")
}

func quoteByte(b byte) string {
	if b < 0x80 {
		return strconv.QuoteRune(rune(b))
	}
	return fmt.Sprintf("byte 0x%02x", b)
}
