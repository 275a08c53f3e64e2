package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/internal/testutil"
)

// runcEncode is llama2.c run.c's encode() written out in Go: an O(n²)
// oracle for vocabularies read from tokenizer.bin. It groups UTF-8 bytes the
// way run.c does (a lead byte plus up to three continuation bytes), falls
// back to id byte+3, and merges the best-scoring adjacent pair (strictly
// better than -1e10, leftmost on ties) by looking up the concatenation of the
// two pieces' vocabulary strings.
func runcEncode(tok *SPM, text string) []int32 {
	lookup := make(map[string]int32, tok.VocabSize())
	for id := range int32(tok.VocabSize()) {
		lookup[tok.Token(id)] = id
	}
	var ids []int32
	if text != "" {
		ids = append(ids, lookup[" "])
	}
	var buf []byte
	for i := 0; i < len(text); i++ {
		if text[i]&0xC0 != 0x80 {
			buf = buf[:0]
		}
		buf = append(buf, text[i])
		if i+1 < len(text) && text[i+1]&0xC0 == 0x80 && len(buf) < 4 {
			continue
		}
		if id, ok := lookup[string(buf)]; ok {
			ids = append(ids, id)
		} else {
			for _, b := range buf {
				ids = append(ids, int32(b)+3)
			}
		}
		buf = buf[:0]
	}
	for {
		best, bestID, bestIdx := float32(-1e10), int32(-1), -1
		for i := 0; i+1 < len(ids); i++ {
			id, ok := lookup[tok.Token(ids[i])+tok.Token(ids[i+1])]
			if ok && tok.Score(id) > best {
				best, bestID, bestIdx = tok.Score(id), id, i
			}
		}
		if bestIdx < 0 {
			return ids
		}
		ids[bestIdx] = bestID
		ids = slices.Delete(ids, bestIdx+1, bestIdx+2)
	}
}

// comparableWithRunc reports whether run.c would see the same input: valid
// UTF-8 (run.c groups invalid bytes differently) without NUL (C strings end
// there).
func comparableWithRunc(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// stream concatenates Piece(prev, id) over ids, as run.c prints a sequence.
func stream(tok Tokenizer, ids []int32) string {
	var sb strings.Builder
	prev := int32(-1)
	for _, id := range ids {
		sb.WriteString(tok.Piece(prev, id))
		prev = id
	}
	return sb.String()
}

func TestLlama2CKnownEncodings(t *testing.T) {
	tok := loadTok512(t)
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 || tok.Unk() != 0 {
		t.Fatalf("VocabSize %d BOS %d EOS %d Unk %d, want 512 1 2 0", tok.VocabSize(), tok.BOS(), tok.EOS(), tok.Unk())
	}
	ids := tok.Encode("Lily and Tom", EncodeOptions{BOS: true})
	// The ids of the pieces, checked against the file: 317 " Lily", 269 " and",
	// 274 " T", 287 "om" (tok512.bin lists merges best first, score -(id-259)).
	if diff := cmp.Diff([]int32{1, 317, 269, 274, 287}, ids); diff != "" {
		t.Errorf("Encode (-want +got):\n%s", diff)
	}
	var pieces, tokens []string
	prev := int32(-1)
	for _, id := range ids {
		pieces = append(pieces, tok.Piece(prev, id))
		tokens = append(tokens, tok.Token(id))
		prev = id
	}
	if diff := cmp.Diff([]string{"", "Lily", " and", " T", "om"}, pieces); diff != "" {
		t.Errorf("Piece (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"\n<s>\n", " Lily", " and", " T", "om"}, tokens); diff != "" {
		t.Errorf("Token (-want +got):\n%s", diff)
	}

	tests := []struct {
		name string
		text string
		o    EncodeOptions
		want []int32
	}{
		{"empty", "", EncodeOptions{}, []int32{}},
		{"empty with BOS/EOS", "", EncodeOptions{BOS: true, EOS: true}, []int32{1, 2}},
		{"dummy prefix only", " ", EncodeOptions{}, []int32{410, 410}},
		{"EOS", "Lily", EncodeOptions{EOS: true}, []int32{317, 2}},
		// tok512 has no "\n" piece: byte fallback to <0x0A> (id 10+3).
		{"newline byte fallback", "a\nb", EncodeOptions{}, []int32{261, 13, 430}},
		// "ö" is no piece either: its two UTF-8 bytes ("é" is one, id 485).
		{"utf-8 byte fallback", "öé", EncodeOptions{}, []int32{410, 0xC3 + 3, 0xB6 + 3, 485}},
		// Special-token text is plain text unless ParseSpecial.
		{"special text", "<unk>", EncodeOptions{}, runcEncode(tok, "<unk>")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tok.Encode(tc.text, tc.o)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Encode(%q) (-want +got):\n%s", tc.text, diff)
			}
			if !tc.o.BOS && !tc.o.EOS {
				if diff := cmp.Diff(runcEncode(tok, tc.text), got, cmp.Comparer(func(a, b []int32) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) })); diff != "" {
					t.Errorf("run.c oracle (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestLlama2CMatchesRunc compares Encode with the run.c oracle on real text
// for both llama2.c vocabularies.
func TestLlama2CMatchesRunc(t *testing.T) {
	greedy, err := os.ReadFile(modelFile(t, "stories260K/expected-greedy-256.txt"))
	if err != nil {
		t.Fatal(err)
	}
	texts := append(strings.Split(string(greedy), "\n"),
		"Hello world", " Hello", "  Hello", "\t\tindent", "naïve café déjà vu", "日本語のテキスト",
		"emoji 🦙🚀 and ZWJ 👩‍👩‍👧", "3.14159 + 2 = 5.14159", "x := []int{1, 2, 3} // go",
		"Cửa Việt", "ied 4 ½ months", "!!!!!!", "   ", "a  b   c    d")
	for _, name := range []string{"tok512", "llama2"} {
		t.Run(name, func(t *testing.T) {
			tok := loadTok512
			if name == "llama2" {
				tok = loadLlama2Tok
			}
			spm := tok(t)
			for _, text := range texts {
				if diff := cmp.Diff(runcEncode(spm, text), spm.Encode(text, EncodeOptions{}), cmp.Comparer(func(a, b []int32) bool { return len(a) == 0 && len(b) == 0 || slices.Equal(a, b) })); diff != "" {
					t.Errorf("Encode(%q) (-run.c +got):\n%s", text, diff)
				}
			}
		})
	}
}

// TestLlama2CStreamGreedy: run.c printed expected-greedy-256.txt piece by
// piece after BOS (and a final newline); encoding that text with BOS and
// streaming it back through Piece must reproduce it byte for byte.
func TestLlama2CStreamGreedy(t *testing.T) {
	tok := loadTok512(t)
	for _, f := range []string{"expected-greedy-256.txt", "expected-greedy-prompt-lily-tom-64.txt"} {
		b, err := os.ReadFile(modelFile(t, "stories260K/"+f))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.TrimSuffix(string(b), "\n")
		ids := tok.Encode(text, EncodeOptions{BOS: true})
		if got := stream(tok, ids); got != text {
			t.Errorf("%s: streamed pieces differ:\n got %q\nwant %q", f, got, text)
		}
		if got := tok.Decode(ids); got != text {
			t.Errorf("%s: Decode differs:\n got %q\nwant %q", f, got, text)
		}
	}
}

func TestLlama2CPieceAndDecode(t *testing.T) {
	tok := synthetic(t, " ", "a", "b", " a", "ab", " ab")
	id := func(p string) int32 {
		for i := range int32(tok.VocabSize()) {
			if tok.Token(i) == p {
				return i
			}
		}
		t.Fatalf("no piece %q", p)
		return -1
	}
	sp, a, b, spab := id(" "), id("a"), id("b"), id(" ab")
	pieceTests := []struct {
		name     string
		prev, id int32
		want     string
	}{
		{"after BOS drops the space", 1, spab, "ab"},
		{"at the start keeps it", -1, spab, " ab"},
		{"mid-stream keeps it", a, spab, " ab"},
		{"BOS is empty", -1, 1, ""},
		{"EOS is empty", a, 2, ""},
		{"unk prints its text", a, 0, "<unk>"},
		{"byte piece is its byte", a, 3 + '\n', "\n"},
		{"half a UTF-8 sequence stays raw", a, 3 + 0xE2, "\xe2"},
		{"byte space after BOS is dropped too", 1, 3 + ' ', ""},
		{"id out of range", a, 100000, ""},
		{"negative id", a, -5, ""},
	}
	for _, tc := range pieceTests {
		t.Run("Piece/"+tc.name, func(t *testing.T) {
			if got := tok.Piece(tc.prev, tc.id); got != tc.want {
				t.Errorf("Piece(%d, %d) = %q, want %q", tc.prev, tc.id, got, tc.want)
			}
		})
	}
	decodeTests := []struct {
		name string
		ids  []int32
		want string
	}{
		{"nothing", nil, ""},
		{"dummy prefix at start", []int32{spab, sp, a}, "ab a"},
		{"dummy prefix after BOS", []int32{1, spab, 2, 1, spab}, "abab"},
		{"only the first piece", []int32{sp, sp, b}, " b"},
		{"no prefix when the first piece has none", []int32{a, spab}, "a ab"},
		{"bytes join into UTF-8", []int32{a, 3 + 0xC3, 3 + 0xA9}, "aé"},
		{"invalid ids are skipped", []int32{-1, a, 99999, b}, "ab"},
	}
	for _, tc := range decodeTests {
		t.Run("Decode/"+tc.name, func(t *testing.T) {
			if got := tok.Decode(tc.ids); got != tc.want {
				t.Errorf("Decode(%v) = %q, want %q", tc.ids, got, tc.want)
			}
		})
	}
}

func TestLlama2CVocabMismatch(t *testing.T) {
	tests := []struct {
		name, file string
		vocab      int
		want       string
	}{
		{"file smaller than model", "stories260K/tok512.bin", 32000, "tok512.bin has 512 pieces but the model's vocabulary is 32000"},
		{"file larger than model", "llama2-tokenizer/tokenizer.bin", 512, "tokenizer.bin has 32000 pieces but the model's vocabulary is 512"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadLlama2C(modelFile(t, tc.file), tc.vocab)
			if !errors.Is(err, ErrVocabMismatch) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrVocabMismatch containing %q", err, tc.want)
			}
		})
	}
	t.Run("any count with vocabSize 0", func(t *testing.T) {
		tok, err := LoadLlama2C(modelFile(t, "stories260K/tok512.bin"), 0)
		if err != nil || tok.VocabSize() != 512 {
			t.Fatalf("LoadLlama2C(…, 0) = %v pieces, %v; want 512, nil", tok, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadLlama2C("testdata/no-such-tokenizer.bin", 512)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "no-such-tokenizer.bin") {
			t.Fatalf("err = %v, want ErrNotExist naming the file", err)
		}
	})
}

// TestLlama2CTruncated reads every proper prefix of a small tokenizer.bin:
// each must fail, name the file, and say either where it was cut or how many
// whole pieces it holds.
func TestLlama2CTruncated(t *testing.T) {
	pieces := []l2cPiece{{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}, {-1, " a"}, {-2, "é"}, {-3, ""}}
	full := llama2cBytes(pieces)
	if _, err := ReadLlama2C(bytes.NewReader(full), "small.bin", len(pieces)); err != nil {
		t.Fatalf("full file: %v", err)
	}
	// Offsets where a piece ends: a cut there is a clean short file.
	boundary := map[int]int{4: 0}
	off := 4
	for i, p := range pieces {
		off += 8 + len(p.text)
		boundary[off] = i + 1
	}
	for n := range len(full) {
		_, err := ReadLlama2C(bytes.NewReader(full[:n]), "small.bin", len(pieces))
		if err == nil {
			t.Fatalf("prefix of %d bytes: no error", n)
		}
		if !strings.Contains(err.Error(), "small.bin") {
			t.Errorf("prefix of %d bytes: error does not name the file: %v", n, err)
		}
		if k, ok := boundary[n]; ok {
			want := "has " + strconv.Itoa(k) + " pieces but the model's vocabulary is 6"
			if !errors.Is(err, ErrVocabMismatch) || !strings.Contains(err.Error(), want) {
				t.Errorf("prefix of %d bytes: err = %v, want ErrVocabMismatch %q", n, err, want)
			}
		} else if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "offset ") {
			t.Errorf("prefix of %d bytes: err = %v, want ErrFormat with an offset", n, err)
		}
	}
}

func TestLlama2CBadFields(t *testing.T) {
	le := binary.LittleEndian
	good := llama2cBytes([]l2cPiece{{0, "<unk>"}, {0, "ab"}})
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"negative max_token_length", le.AppendUint32(nil, math.MaxUint32), "offset 0: max_token_length -1"},
		{"huge max_token_length", le.AppendUint32(nil, 1<<30), "offset 0: max_token_length 1073741824"},
		{"negative piece length", le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 5), 0), math.MaxUint32), "offset 8: piece 0: length -1"},
		{"piece longer than max_token_length", append(le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, 2), 0), 3), "abc"...), "offset 8: piece 0: length 3 outside [0, max_token_length 2]"},
		{"trailing partial piece", append(slices.Clone(good), 1, 2, 3), "offset 27: piece 2: expected 8 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLlama2C(bytes.NewReader(tc.data), "bad.bin", 2)
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "bad.bin: "+tc.want) {
				t.Fatalf("err = %v, want ErrFormat containing %q", err, "bad.bin: "+tc.want)
			}
		})
	}
	t.Run("no pieces", func(t *testing.T) {
		_, err := ReadLlama2C(bytes.NewReader(le.AppendUint32(nil, 4)), "empty.bin", 0)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "empty.bin") {
			t.Fatalf("err = %v, want ErrFormat naming empty.bin", err)
		}
	})
}

// FuzzReadLlama2C: no input makes the reader panic, and whatever it accepts
// has exactly the requested number of pieces and encodes without panicking.
func FuzzReadLlama2C(f *testing.F) {
	f.Add(llama2cBytes(smallLlama2C(" a", "b")), 261)
	f.Add(llama2cBytes([]l2cPiece{{0, "<unk>"}, {0, "x"}}), 2)
	f.Add([]byte{7, 0, 0, 0}, 0)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		vocab %= 1 << 12
		tok, err := ReadLlama2C(bytes.NewReader(data), "fuzz.bin", vocab)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.bin") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if vocab > 0 && tok.VocabSize() != vocab {
			t.Fatalf("accepted %d pieces for vocabSize %d", tok.VocabSize(), vocab)
		}
		ids := tok.Encode("Hello, wörld \x00\xff", EncodeOptions{BOS: true, EOS: true, ParseSpecial: true})
		for _, id := range ids {
			if id < 0 || int(id) >= tok.VocabSize() {
				t.Fatalf("Encode produced id %d outside the %d-piece vocabulary", id, tok.VocabSize())
			}
		}
		_ = tok.Decode(ids)
	})
}

// FuzzTokenizerRoundTrip checks, for arbitrary byte strings s (valid UTF-8 or
// not), with the synthetic vocabulary and with tok512 when present:
//
//   - Decode(Encode(s, o)) == s exactly, with or without BOS and EOS, and with
//     ParseSpecial off. Encode adds one dummy-prefix space before non-empty s;
//     Decode removes exactly one leading space from the first piece at the
//     start or after BOS, which is that space, so nothing else is lost.
//   - Streaming Piece(prev, id) after BOS gives s too (run.c's view).
//   - For valid UTF-8 without NUL, Encode equals run.c's encode.
func FuzzTokenizerRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", " ", "  ", "Lily and Tom", " leading space", "trailing space ", "a\nb\n\n", "\t",
		"é", "日本語", "🦙", "\xff\xfe", "a\x80b", "\xe2\x82", "\x00", "<s>", "\n<s>\n", "<0x41>", "<unk>",
		"Once upon a time, there was a little girl named Lily.",
	} {
		f.Add(s)
	}
	// Every character of a merged piece is a piece too, as in real
	// SentencePiece vocabularies; otherwise run.c differs (see
	// TestMergeThroughNonPieceCharacters).
	toks := map[string]*SPM{"synthetic": synthetic(f, " ", "a", "b", "T", "o", "m", "é", " a", "ab", " ab", " T", "om", " Tom")}
	if testutil.HaveModel("stories260K/tok512.bin") {
		toks["tok512"] = loadTok512(f)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for name, tok := range toks {
			for _, o := range []EncodeOptions{{}, {BOS: true}, {BOS: true, EOS: true}} {
				ids := tok.Encode(s, o)
				if got := tok.Decode(ids); got != s {
					t.Fatalf("%s %+v: Decode(Encode(%q)) = %q (ids %v)", name, o, s, got, ids)
				}
			}
			ids := tok.Encode(s, EncodeOptions{BOS: true})
			if got := stream(tok, ids); got != s {
				t.Fatalf("%s: streamed Piece after BOS of %q = %q (ids %v)", name, s, got, ids)
			}
			if comparableWithRunc(s) {
				want := runcEncode(tok, s)
				if got := tok.Encode(s, EncodeOptions{}); !slices.Equal(want, got) {
					t.Fatalf("%s: Encode(%q) = %v, run.c gives %v", name, s, got, want)
				}
			}
		}
	})
}

// TestMergeThroughNonPieceCharacters pins the one known difference from
// run.c: SentencePiece and llama.cpp merge characters that are no piece
// themselves when their concatenation is one; run.c has already turned them
// into "<0xXX>" byte pieces, which never merge. Real vocabularies contain
// every character of every piece, so the two agree on them.
func TestMergeThroughNonPieceCharacters(t *testing.T) {
	tok := synthetic(t, " ", " T", "om", " Tom") // 'T', 'o', 'm' are no pieces
	if got, want := tok.Encode("Tom", EncodeOptions{}), []int32{262}; !slices.Equal(got, want) {
		t.Errorf("Encode = %v, want %v (\" Tom\")", got, want)
	}
	if got, want := runcEncode(tok, "Tom"), []int32{259, 'T' + 3, 'o' + 3, 'm' + 3}; !slices.Equal(got, want) {
		t.Errorf("run.c oracle = %v, want %v", got, want)
	}
}
