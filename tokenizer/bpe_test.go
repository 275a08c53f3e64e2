package tokenizer

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/internal/testutil"
)

func TestByteRuneTable(t *testing.T) {
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteRune[b]
		if seen[r] {
			t.Fatalf("rune %U used twice", r)
		}
		seen[r] = true
		if runeByte[r] != int16(b) {
			t.Fatalf("runeByte[%U] = %d, want %d", r, runeByte[r], b)
		}
	}
	// Spot checks against GPT-2's bytes_to_unicode.
	for b, want := range map[byte]rune{' ': 'Ġ', '\n': 'Ċ', '\t': 'ĉ', 0: 'Ā', '!': '!', 0xAD: 'Ń', 0xFF: 'ÿ', 0x7F: 'ġ'} {
		if byteRune[b] != want {
			t.Errorf("byteRune[%#x] = %q, want %q", b, byteRune[b], want)
		}
	}
	if got := unmapBytes("ĠhelloĊ<|x|>é"); got != " hello\n<|x|>\xe9" {
		t.Errorf("unmapBytes = %q", got)
	}
}

// splitOracle splits s with a pattern given as an independent oracle built on
// Go's regexp: head holds the pattern's lookahead-free alternatives before
// \s+(?!\S), anchored and leftmost-first; \s+(?!\S) is tried by hand after
// it, then the final \s+. Go's \s is ASCII-only, so \s is spelled as the
// White_Space set (wsClass).
func splitOracle(head *regexp.Regexp, s string) []string {
	var out []string
	for pos := 0; pos < len(s); {
		if m := head.FindString(s[pos:]); m != "" {
			out = append(out, m)
			pos += len(m)
			continue
		}
		var ends []int // ends of whitespace prefixes, shortest first
		for q := pos; q < len(s); {
			m := wsRune.FindString(s[q:])
			if m == "" {
				break
			}
			q += len(m)
			ends = append(ends, q)
		}
		end := -1
		for i := len(ends) - 1; i >= 0; i-- { // \s+(?!\S), greedy
			if e := ends[i]; e == len(s) || wsRune.MatchString(s[e:]) {
				end = e
				break
			}
		}
		if end < 0 {
			end = ends[len(ends)-1] // \s+
		}
		out = append(out, s[pos:end])
		pos = end
	}
	return out
}

const wsClass = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var (
	wsRune     = regexp.MustCompile(`^[` + wsClass + `]`)
	gpt2Head   = regexp.MustCompile(`^(?:'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^` + wsClass + `\p{L}\p{N}]+)`)
	llama3Head = regexp.MustCompile(`^(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^` + wsClass + `\p{L}\p{N}]+[\r\n]*|[` + wsClass + `]*[\r\n]+)`)
	qwen2Head  = regexp.MustCompile(`^(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^` + wsClass + `\p{L}\p{N}]+[\r\n]*|[` + wsClass + `]*[\r\n]+)`)
	digitRune  = regexp.MustCompile(`\p{N}`)
)

func gpt2SplitOracle(s string) []string { return splitOracle(gpt2Head, s) }

// smollmSplitOracle applies \p{N} and then GPT-2's pattern in sequence, as
// llama.cpp's regex list for SmolLM does.
func smollmSplitOracle(s string) []string {
	var out []string
	start := 0
	for _, loc := range digitRune.FindAllStringIndex(s, -1) {
		if start < loc[0] {
			out = append(out, gpt2SplitOracle(s[start:loc[0]])...)
		}
		out = append(out, s[loc[0]:loc[1]])
		start = loc[1]
	}
	if start < len(s) {
		out = append(out, gpt2SplitOracle(s[start:])...)
	}
	return out
}

// oracleSplitter pairs a tokenizer.ggml.pre name with an oracle built on
// Go's regexp for its pattern.
type oracleSplitter struct {
	name   string // the pre-tokenizer's name
	oracle func(string) []string
}

var splitters = []oracleSplitter{
	{"gpt-2", gpt2SplitOracle},
	{"llama-bpe", func(s string) []string { return splitOracle(llama3Head, s) }},
	{"qwen2", func(s string) []string { return splitOracle(qwen2Head, s) }},
	{"smollm", smollmSplitOracle},
}

func split(s string) []string { return preSplit("gpt-2", s) }

// preSplit is the pre-tokens of s under the named pre-tokenizer.
func preSplit(name, s string) []string {
	p, ok := lookupPre(name)
	if !ok {
		panic("no pre-tokenizer " + name)
	}
	var out []string
	var t preText
	p.split(&t, s, func(w string) { out = append(out, w) })
	return out
}

func TestSplitGPT2(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"  Hello", []string{" ", " Hello"}},
		{"\n\n  Hello", []string{"\n\n ", " Hello"}},
		{"\tHello", []string{"\t", "Hello"}},
		{"a \nb", []string{"a", " ", "\n", "b"}},
		{"end  ", []string{"end", "  "}},
		{"I'm we'll they're it's ' s", []string{"I", "'m", " we", "'ll", " they", "'re", " it", "'s", " '", " s"}},
		{"'S don'T", []string{"'", "S", " don", "'", "T"}}, // case-sensitive
		{"x''s", []string{"x", "''", "s"}},
		{"3.14 +42", []string{"3", ".", "14", " +", "42"}},
		{"¼½ ⅷ", []string{"¼½", " ⅷ"}}, // \p{N} includes No and Nl
		{"!!!?!", []string{"!!!?!"}},
		{"a\u00a0b", []string{"a", "\u00a0", "b"}}, // NBSP is \s
		{"a\u3000\u3000b", []string{"a", "\u3000", "\u3000", "b"}},
		{"ខ្មែរ", []string{"ខ", "្", "ម", "ែ", "រ"}}, // combining marks are neither L nor N
		{"🦙 🦙", []string{"🦙", " 🦙"}},
		{"\xff\xfeab \x80", []string{"\xff\xfe", "ab", " \x80"}},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got := split(tc.in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("splitGPT2 (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, gpt2SplitOracle(tc.in)); diff != "" {
				t.Errorf("oracle disagrees with the table (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitLlamaFamily(t *testing.T) {
	tests := []struct {
		splitter string // a name in splitters
		in       string
		want     []string
	}{
		{"llama-bpe", "Hello world", []string{"Hello", " world"}},
		{"llama-bpe", "I'M we'Ll it'ſ", []string{"I", "'M", " we", "'Ll", " it", "'ſ"}},
		{"llama-bpe", "12345 6", []string{"123", "45", " ", "6"}},
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"llama-bpe", "\tfoo \"bar\" (x)", []string{"\tfoo", " \"", "bar", "\"", " (", "x", ")"}},
		{"llama-bpe", "a;\n\n  b", []string{"a", ";\n\n", " ", " b"}},
		{"llama-bpe", "x \n \n  y", []string{"x", " \n \n", " ", " y"}},
		{"llama-bpe", "\r\nfoo", []string{"\r\n", "foo"}},
		{"llama-bpe", "end   ", []string{"end", "   "}},
		{"smollm", "abc123 4x", []string{"abc", "1", "2", "3", " ", "4", "x"}},
	}
	for _, tc := range tests {
		t.Run(tc.splitter+"/"+tc.in, func(t *testing.T) {
			i := slices.IndexFunc(splitters, func(sp oracleSplitter) bool { return sp.name == tc.splitter })
			if diff := cmp.Diff(tc.want, preSplit(tc.splitter, tc.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, splitters[i].oracle(tc.in)); diff != "" {
				t.Errorf("oracle disagrees with the table (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSplitGPT2: every hand-written splitter equals its regexp oracle and
// loses no byte.
func FuzzSplitGPT2(f *testing.F) {
	for _, s := range []string{"Hello world", "  x", "\n\n\t a", "it's 3.14!", "\xff\x80 'll", "日本 語", " \u2028x",
		"I'M 12345 \"q\"\r\n\r\n  z", "a;\n\n  b", "'ſ '\xffs", "x1y22z333 4444"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, sp := range splitters {
			got := preSplit(sp.name, s)
			if strings.Join(got, "") != s {
				t.Fatalf("%s: pieces %q do not concatenate to %q", sp.name, got, s)
			}
			if want := sp.oracle(s); !slices.Equal(want, got) {
				t.Fatalf("%s(%q) = %q, oracle %q", sp.name, s, got, want)
			}
		}
	})
}

// syntheticBPE is a byte-level vocabulary: the 256 byte runes, some merges,
// one merge whose result is no piece, and <|endoftext|>.
func syntheticBPE(tb testing.TB) *BPE {
	tb.Helper()
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string(byteRune[b]))
	}
	pieces = append(pieces, "he", "ll", "llo", "hello", "Ġhello", "Ġw", "<|endoftext|>")
	eot := int32(len(pieces) - 1)
	tok, err := NewBPE(BPEOptions{
		Pieces: pieces,
		Merges: []string{"h e", "l l", "ll o", "he llo", "Ġ hello", "Ġ w", "o r"}, // "or" is no piece
		BOS:    eot, EOS: eot, Unk: -1,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func TestBPEEncode(t *testing.T) {
	tok := syntheticBPE(t)
	id := func(s string) int32 {
		for i := range int32(tok.VocabSize()) {
			if tok.Token(i) == s {
				return i
			}
		}
		t.Fatalf("no piece %q", s)
		return -1
	}
	b := func(c byte) int32 { return id(string(byteRune[c])) }
	tests := []struct {
		name string
		text string
		o    EncodeOptions
		want []int32
	}{
		{"merges", "hello hello", EncodeOptions{}, []int32{id("hello"), id("Ġhello")}},
		{"no dummy prefix", "hello", EncodeOptions{BOS: true}, []int32{id("<|endoftext|>"), id("hello")}},
		{"merge result not a piece falls back to runes", "world", EncodeOptions{}, []int32{b('w'), b('o'), b('r'), b('l'), b('d')}},
		{"pre-tokens do not merge across", "he llo", EncodeOptions{}, []int32{id("he"), b(' '), id("llo")}},
		{"bytes", "\xff\n", EncodeOptions{}, []int32{b(0xff), b('\n')}},
		{"special parsed", "hello<|endoftext|>", EncodeOptions{ParseSpecial: true}, []int32{id("hello"), id("<|endoftext|>")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tok.Encode(tc.text, tc.o)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q) (-want +got):\n%s", tc.text, diff)
			}
			if d := tok.Decode(got); d != strings.ReplaceAll(tc.text, "<|endoftext|>", "") {
				t.Errorf("Decode = %q", d)
			}
		})
	}
	if got := tok.Piece(tok.BOS(), id("Ġhello")); got != " hello" {
		t.Errorf("Piece after BOS = %q, want %q (byte-level BPE has no dummy prefix)", got, " hello")
	}
	if got := tok.Piece(0, b(0xE2)); got != "\xe2" {
		t.Errorf("Piece of byte rune = %q", got)
	}
}

// FuzzBPERoundTrip: byte-level BPE is lossless on every byte string, for the
// synthetic vocabulary and GPT-2's when present.
func FuzzBPERoundTrip(f *testing.F) {
	for _, s := range []string{"", "Hello world", "  x\n\n", "it's", "\xff\x00", "日本語 🦙", "<|endoftext|>"} {
		f.Add(s)
	}
	toks := map[string]Tokenizer{"synthetic": syntheticBPE(f)}
	if testutil.HaveModel("llama-cpp-vocab/ggml-vocab-gpt-2.gguf") {
		toks["gpt-2"] = loadGGUF(f, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	}
	// The SentencePiece-style names on their test vocabulary: lossless but
	// for a literal "▁", which decodes to a space (as in llama.cpp).
	raw := rawVocabOnce()
	types := make([]TokenType, len(raw.types))
	for i, ty := range raw.types {
		types[i] = TokenType(ty)
	}
	for _, pre := range []string{"gemma4", "sarvam-moe"} {
		tok, err := NewBPE(BPEOptions{Pieces: raw.pieces, Types: types, Merges: raw.merges, Pre: pre, BOS: raw.eot, EOS: raw.eot, Unk: -1})
		if err != nil {
			f.Fatal(err)
		}
		toks[pre] = tok
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tok := range toks {
			if (name == "gemma4" || name == "sarvam-moe") && strings.Contains(s, spaceMarker) {
				continue
			}
			ids := tok.Encode(s, EncodeOptions{BOS: true, EOS: true})
			if got := tok.Decode(ids); got != s {
				t.Fatalf("%s: Decode(Encode(%q)) = %q (ids %v)", name, s, got, ids)
			}
			if got := stream(tok, ids); got != s {
				t.Fatalf("%s: streamed pieces of %q = %q", name, s, got)
			}
			if utf8.ValidString(s) && len(ids) > len(s)+2 {
				t.Fatalf("%s: %d ids for %d bytes", name, len(ids), len(s))
			}
		}
	})
}

// TestBPEPreTokenizers: Pre selects the splitter, Llama 3's emits whole-piece
// pre-tokens without merging (ignore_merges), unknown names are refused.
func TestBPEPreTokenizers(t *testing.T) {
	var pieces []string
	for b := range 256 {
		pieces = append(pieces, string(byteRune[b]))
	}
	pieces = append(pieces, "ab", "abc", "12", "123") // id b is byte b's rune
	ab, abc, d12, d123 := int32(256), int32(257), int32(258), int32(259)
	merges := []string{"a b", "1 2", "12 3"} // no merge reaches "abc"
	tests := []struct {
		pre  string
		text string
		want []int32
	}{
		{"gpt-2", "abc", []int32{ab, 'c'}},
		{"llama-bpe", "abc", []int32{abc}},
		{"gpt-2", "123", []int32{d123}},
		{"llama-bpe", "123", []int32{d123}},
		{"qwen2", "123", []int32{'1', '2', '3'}},
		{"smollm", "123", []int32{'1', '2', '3'}},
		{"", "12", []int32{d12}},
	}
	for _, tc := range tests {
		t.Run(tc.pre+"/"+tc.text, func(t *testing.T) {
			tok, err := NewBPE(BPEOptions{Pieces: pieces, Merges: merges, Pre: tc.pre, BOS: -1, EOS: -1, Unk: -1})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, tok.Encode(tc.text, EncodeOptions{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	_, err := NewBPE(BPEOptions{Pieces: pieces, Merges: merges, Pre: "no-such-pre", BOS: -1, EOS: -1, Unk: -1})
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"no-such-pre"`) || !strings.Contains(err.Error(), "llama-bpe, ") {
		t.Errorf("Pre no-such-pre: err = %v, want ErrUnsupported naming it and listing the known ones", err)
	}
	if names := PreTokenizers(); !slices.IsSorted(names) || !slices.Contains(names, "llama-bpe") || !slices.Contains(names, "") {
		t.Errorf("PreTokenizers() = %q", names)
	}
}
