package tokenizer

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// runcText is what the engine printed before TextDecoder: run.c's
// safe_printf over Piece, which drops every one-byte piece that is neither
// printable ASCII nor whitespace (and so every byte-fallback byte >= 0x80).
func runcText(tok Tokenizer, prev int32, ids []int32) string {
	var sb strings.Builder
	for _, id := range ids {
		p := tok.Piece(prev, id)
		prev = id
		if len(p) == 1 {
			c := p[0]
			if !(c >= 0x20 && c < 0x7f) && !(c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') {
				continue
			}
		}
		sb.WriteString(p)
	}
	return sb.String()
}

// streamText decodes ids one Next at a time, checking that every chunk is
// valid UTF-8, and returns the chunks (the last is Flush's).
func streamText(tb testing.TB, d *TextDecoder, ids []int32) []string {
	tb.Helper()
	var chunks []string
	for _, id := range ids {
		s := d.Next(id)
		if !utf8.ValidString(s) {
			tb.Fatalf("Next(%d) = %q: not valid UTF-8", id, s)
		}
		chunks = append(chunks, s)
	}
	return append(chunks, d.Flush())
}

// byteIDs spells s as the byte pieces of a synthetic llama2.c vocabulary.
func byteIDs(s string) []int32 {
	ids := make([]int32, len(s))
	for i := range len(s) {
		ids[i] = 3 + int32(s[i])
	}
	return ids
}

// TestTextDecoderRealSPM: the non-ASCII characters run.c loses (they are
// byte-fallback pieces in Llama's vocabularies) come out whole, streamed one
// token at a time and in one Decode.
func TestTextDecoderRealSPM(t *testing.T) {
	texts := []string{"Cửa Việt", "Hello 🦙 world", "naïve café déjà vu", "日本語のテキスト",
		"emoji 🦙🚀 and ZWJ 👩‍👩‍👧", "ied 4 ½ months", "tabs\tand\nnewlines"}
	vocabs := []struct {
		name string
		load func(testing.TB) Tokenizer
	}{
		{"llama2-tokenizer", func(tb testing.TB) Tokenizer { return loadLlama2Tok(tb) }},
		{"llama-spm.gguf", func(tb testing.TB) Tokenizer { return loadGGUF(tb, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf") }},
		{"phi-3.gguf", func(tb testing.TB) Tokenizer { return loadGGUF(tb, "llama-cpp-vocab/ggml-vocab-phi-3.gguf") }},
	}
	for _, v := range vocabs {
		t.Run(v.name, func(t *testing.T) {
			tok := v.load(t)
			for _, text := range texts {
				ids := tok.Encode(text, EncodeOptions{BOS: true})
				if got := Decode(tok, -1, ids); got != text {
					t.Errorf("Decode(Encode(%q)) = %q", text, got)
				}
				if got := strings.Join(streamText(t, NewTextDecoder(tok), ids), ""); got != text {
					t.Errorf("streamed %q = %q", text, got)
				}
			}
			// The two reported examples: the old printing lost characters.
			for text, old := range map[string]string{"Cửa Việt": "Ca Việt", "Hello 🦙 world": "Hello  world"} {
				ids := tok.Encode(text, EncodeOptions{BOS: true})
				if got := runcText(tok, -1, ids); got != old {
					t.Errorf("old rule on %q gave %q, this test expects %q (the vocabulary changed?)", text, got, old)
				}
			}
			// 🦙 is four byte pieces: every Next before the last prints
			// nothing (BOS, the dummy-prefix space, three bytes), the last
			// all of it.
			ids := tok.Encode("🦙", EncodeOptions{BOS: true})
			bytePieces := 0
			for _, id := range ids {
				if len(tok.Piece(-1, id)) == 1 && tok.Piece(-1, id) != " " {
					bytePieces++
				}
			}
			chunks := streamText(t, NewTextDecoder(tok), ids)
			if bytePieces != 4 || strings.Join(chunks, "") != "🦙" || chunks[len(chunks)-2] != "🦙" {
				t.Errorf("🦙 byte by byte: chunks %q (ids %v, %d byte pieces)", chunks, ids, bytePieces)
			}
		})
	}
}

// TestTextDecoderRealBPE: byte-level BPE pieces end inside characters; the
// decoder prints each character once, whole.
func TestTextDecoderRealBPE(t *testing.T) {
	tok := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	for _, text := range []string{"Hello 🦙 world", "Cửa Việt", "emoji 🦙🚀 and ZWJ 👩‍👩‍👧", "日本語のテキスト"} {
		ids := tok.Encode(text, EncodeOptions{})
		split := false
		for _, id := range ids {
			split = split || !utf8.ValidString(tok.Piece(-1, id))
		}
		if !split {
			t.Errorf("%q: no token ends inside a character, the test proves nothing (ids %v)", text, ids)
		}
		chunks := streamText(t, NewTextDecoder(tok), ids)
		if got := strings.Join(chunks, ""); got != text {
			t.Errorf("streamed %q = %q", text, got)
		}
		if got := Decode(tok, -1, ids); got != text {
			t.Errorf("Decode(Encode(%q)) = %q", text, got)
		}
		if strings.Contains(text, "🦙") {
			whole := false
			for _, c := range chunks {
				whole = whole || strings.Contains(c, "🦙")
			}
			if !whole {
				t.Errorf("%q: no chunk holds 🦙 whole: %q", text, chunks)
			}
		}
	}
}

// TestTextDecoderGoldenUnchanged: for ASCII text the new printing is exactly
// the old: the stories260K goldens (run.c's output) and random sequences of
// every token whose text is ASCII, control-byte pieces included.
func TestTextDecoderGoldenUnchanged(t *testing.T) {
	for _, name := range []string{"tok512", "llama2"} {
		t.Run(name, func(t *testing.T) {
			var tok *SPM
			if name == "tok512" {
				tok = loadTok512(t)
			} else {
				tok = loadLlama2Tok(t)
			}
			for _, f := range []string{"expected-greedy-256.txt", "expected-greedy-200.txt", "expected-greedy-prompt-lily-tom-64.txt"} {
				b, err := os.ReadFile(modelFile(t, "stories260K/"+f))
				if err != nil {
					t.Fatal(err)
				}
				text := strings.TrimSuffix(string(b), "\n")
				ids := tok.Encode(text, EncodeOptions{BOS: true})
				if got, old := Decode(tok, -1, ids), runcText(tok, -1, ids); got != text || old != text {
					t.Errorf("%s: Decode %q, old rule %q, want %q", f, got, old, text)
				}
				n := len(ids) / 2
				if got, old := Decode(tok, ids[n-1], ids[n:]), runcText(tok, ids[n-1], ids[n:]); got != old {
					t.Errorf("%s: completion after token %d: Decode %q, old rule %q", f, n, got, old)
				}
			}
			var ascii []int32
			for id := range int32(tok.VocabSize()) {
				p := tok.Piece(-1, id)
				if strings.IndexFunc(p, func(r rune) bool { return r >= utf8.RuneSelf }) < 0 {
					ascii = append(ascii, id)
				}
			}
			rng := rand.New(rand.NewPCG(1, 2))
			for range 200 {
				ids := make([]int32, 1+rng.IntN(40))
				for i := range ids {
					ids[i] = ascii[rng.IntN(len(ascii))]
					if rng.IntN(8) == 0 {
						ids[i] = tok.BOS()
					}
				}
				prev := int32(-1)
				if rng.IntN(2) == 0 {
					prev = ascii[rng.IntN(len(ascii))]
				}
				if got, old := Decode(tok, prev, ids), runcText(tok, prev, ids); got != old {
					t.Fatalf("ids %v after %d: Decode %q, old rule %q", ids, prev, got, old)
				}
			}
		})
	}
}

// TestTextDecoderIllFormed: bytes that are no UTF-8 become U+FFFD per maximal
// subpart (the values are Python's bytes.decode("utf-8", "replace")), the
// same whether the bytes come one token at a time or in one piece.
func TestTextDecoderIllFormed(t *testing.T) {
	tok := synthetic(t, "\xe2\x82", "\xf0\x9f", "\xa6\x99", "\xf0\x9f\xa6A\xe2")
	cases := []struct{ in, want string }{
		{"\xe2\x82A", "\uFFFDA"},
		{"\x80", "\uFFFD"},
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xf0\x9f\xa6", "\uFFFD"},
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xe0\x80", "\uFFFD\uFFFD"},
		{"a\xf0\x9f\xa6\x99b", "a🦙b"},
		{"\xf0\x9f\xa6A\xe2", "\uFFFDA\uFFFD"},
		{"\xe2\x82\xf0\x9f\xa6\x99", "\uFFFD🦙"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"€\xe2\x82\xac", "€€"},
	}
	for _, tc := range cases {
		// One byte piece per byte.
		if got := Decode(tok, 2, byteIDs(tc.in)); got != tc.want {
			t.Errorf("bytes of %q: got %q, want %q", tc.in, got, tc.want)
		}
		if got := strings.Join(streamText(t, NewTextDecoderAfter(tok, 2), byteIDs(tc.in)), ""); got != tc.want {
			t.Errorf("streamed bytes of %q: got %q, want %q", tc.in, got, tc.want)
		}
		// The whole string as one piece.
		d := NewTextDecoder(tok)
		if got := string(d.AppendFlush(d.appendText(nil, tc.in))); got != tc.want {
			t.Errorf("one piece %q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	// Multi-byte pieces that split characters.
	id := func(p string) int32 {
		for i := range int32(tok.VocabSize()) {
			if tok.Token(i) == p && tok.Type(i) == TypeNormal {
				return i
			}
		}
		t.Fatalf("no piece %q", p)
		return -1
	}
	d := NewTextDecoderAfter(tok, 2)
	if got := d.Next(id("\xf0\x9f")); got != "" || d.Pending() != 2 {
		t.Errorf("first half of 🦙: %q, %d pending", got, d.Pending())
	}
	if got := d.Next(id("\xa6\x99")); got != "🦙" || d.Pending() != 0 {
		t.Errorf("second half of 🦙: %q, %d pending", got, d.Pending())
	}
	if got := d.Next(id("\xf0\x9f\xa6A\xe2")); got != "\uFFFDA" || d.Pending() != 1 {
		t.Errorf("broken piece: %q, %d pending", got, d.Pending())
	}
	if got := d.Next(id("\xe2\x82")); got != "\uFFFD" || d.Pending() != 2 {
		t.Errorf("after broken piece: %q, %d pending", got, d.Pending())
	}
	if got := d.Flush(); got != "\uFFFD" || d.Pending() != 0 {
		t.Errorf("Flush: %q, %d pending", got, d.Pending())
	}
	if got := d.Flush(); got != "" {
		t.Errorf("second Flush: %q", got)
	}
}

// TestTextDecoderStreamingInvariant: however random bytes are split into
// tokens, the streamed text is the same, valid UTF-8, and valid input comes
// out unchanged.
func TestTextDecoderStreamingInvariant(t *testing.T) {
	tok := synthetic(t)
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []byte("a\x80\xbf\xc2\xdf\xe0\xed\xee\xf0\xf4\xf5\x9f\xa0\x8f\x90")
	for range 2000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			}
		}
		in := string(b)
		d := NewTextDecoder(tok)
		d.KeepControl = true
		whole := string(d.AppendFlush(d.appendText(nil, in)))
		if !utf8.ValidString(whole) {
			t.Fatalf("%q decoded to invalid %q", in, whole)
		}
		if utf8.ValidString(in) && whole != in {
			t.Fatalf("valid %q decoded to %q", in, whole)
		}
		// One byte piece per byte, streamed.
		d = NewTextDecoderAfter(tok, 2)
		d.KeepControl = true
		if got := strings.Join(streamText(t, d, byteIDs(in)), ""); got != whole {
			t.Fatalf("%q: streamed %q, whole %q", in, got, whole)
		}
	}
}

func TestTextDecoderControlAndBOS(t *testing.T) {
	tok := synthetic(t, " ", "a", "b", " a", "ab", " ab", "x\x1by")
	id := func(p string) int32 {
		for i := range int32(tok.VocabSize()) {
			if tok.Token(i) == p && tok.Type(i) == TypeNormal {
				return i
			}
		}
		t.Fatalf("no piece %q", p)
		return -1
	}
	const bos, eos = 1, 2
	esc, nl, tab, del, nul := int32(3+0x1b), int32(3+'\n'), int32(3+'\t'), int32(3+0x7f), int32(3)
	tests := []struct {
		name string
		prev int32
		ids  []int32
		keep bool
		want string
	}{
		{"leading BOS not printed, its successor loses the space", -1, []int32{bos, id(" ab"), id(" a")}, false, "ab a"},
		{"no BOS: the first piece keeps its space", -1, []int32{id(" ab")}, false, " ab"},
		{"after a BOS prompt", bos, []int32{id(" ab")}, false, "ab"},
		{"mid-stream BOS and EOS", id("a"), []int32{eos, bos, id(" a"), eos}, false, "a"},
		{"unk prints its text", id("a"), []int32{0}, false, "<unk>"},
		{"control bytes dropped", -1, []int32{id("a"), esc, nul, del, nl, tab, id("b")}, false, "a\n\tb"},
		{"control bytes kept", -1, []int32{id("a"), esc, nul, del, nl, tab, id("b")}, true, "a\x1b\x00\x7f\n\tb"},
		{"control byte inside a piece kept", -1, []int32{id("x\x1by")}, false, "x\x1by"},
		{"a dropped byte does not break a character", -1, append(append(byteIDs("\xe2"), esc), byteIDs("\x82\xac")...), false, "€"},
		{"a kept one does", -1, append(append(byteIDs("\xe2"), esc), byteIDs("\x82\xac")...), true, "\uFFFD\x1b\uFFFD\uFFFD"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := NewTextDecoderAfter(tok, tc.prev)
			d.KeepControl = tc.keep
			if got := strings.Join(streamText(t, d, tc.ids), ""); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
			if !tc.keep {
				if got := Decode(tok, tc.prev, tc.ids); got != tc.want {
					t.Errorf("Decode: got %q, want %q", got, tc.want)
				}
			}
		})
	}
	// A clone continues a held character on its own.
	d0 := NewTextDecoder(tok)
	d0.Next(3 + 0xe2)
	d1 := d0.Clone()
	if a, b := d0.Next(3+0x82)+d0.Next(3+0xac), d1.Next(3+0x41); a != "€" || b != "\uFFFDA" {
		t.Errorf("clone: original %q, clone %q", a, b)
	}
	// Reset starts over.
	d := NewTextDecoder(tok)
	d.Next(3 + 0xf0)
	d.Reset(bos)
	if got := d.Next(id(" ab")); got != "ab" || d.Pending() != 0 {
		t.Errorf("after Reset: %q, %d pending", got, d.Pending())
	}
}

func TestTextDecoderNoAlloc(t *testing.T) {
	tok := synthetic(t, "ab")
	ids := append(byteIDs("x🦙y€"), 3+0x1b, 2, 1)
	d := NewTextDecoder(tok)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		buf = buf[:0]
		for _, id := range ids {
			buf = d.AppendNext(buf, id)
		}
		buf = d.AppendFlush(buf)
	})
	if allocs != 0 {
		t.Errorf("AppendNext/AppendFlush: %v allocations per sequence", allocs)
	}
	if got := string(buf); got != "x🦙y€" {
		t.Errorf("got %q", got)
	}
}

func BenchmarkTextDecoder(b *testing.B) {
	tok := loadLlama2Tok(b)
	ids := tok.Encode(strings.Repeat("Hello 🦙 world, Cửa Việt is a town. ", 20), EncodeOptions{BOS: true})
	d := NewTextDecoder(tok)
	b.ReportAllocs()
	for b.Loop() {
		d.Reset(-1)
		for _, id := range ids {
			_ = d.Next(id)
		}
	}
}
