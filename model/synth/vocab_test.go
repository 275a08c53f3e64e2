package synth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tokenizer"
)

func TestGeneratedVocab(t *testing.T) {
	if m := MaxGeneratedVocab(); m < 32000 {
		t.Fatalf("MaxGeneratedVocab = %d, want ≥ 32000 for the Llama-2-sized presets", m)
	}
	v, err := GeneratedVocab(MaxGeneratedVocab())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"<unk>", "<s>", "</s>", "<0x00>", "<0x01>"}, v.Tokens[:5]); diff != "" {
		t.Errorf("first tokens (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int32{2, 3, 3, 6, 6}, v.Types[:5]); diff != "" {
		t.Errorf("first types (-want +got):\n%s", diff)
	}
	if v.Tokens[3+0x41] != "<0x41>" || v.Tokens[258] != "<0xFF>" {
		t.Errorf("byte pieces: id %d = %q, id 258 = %q", 3+0x41, v.Tokens[3+0x41], v.Tokens[258])
	}
	if v.Tokens[259] != space {
		t.Errorf("first normal piece %q, want %q", v.Tokens[259], space)
	}
	ids := map[string]int{}
	for i, tok := range v.Tokens {
		if j, dup := ids[tok]; dup {
			t.Errorf("token %q at ids %d and %d", tok, j, i)
		}
		ids[tok] = i
		if i < minVocab {
			continue
		}
		if v.Types[i] != typeNormal {
			t.Errorf("id %d %q has type %d, want normal", i, tok, v.Types[i])
		}
		if v.Scores[i] >= v.Scores[i-1] && i > minVocab {
			t.Errorf("score of id %d (%v) not below id %d (%v)", i, v.Scores[i], i-1, v.Scores[i-1])
		}
		if strings.Contains(tok, " ") || !utf8.ValidString(tok) {
			t.Errorf("id %d %q: a raw space or invalid UTF-8", i, tok)
		}
	}
	// Every piece of two or more characters must be reachable by a
	// SentencePiece merge of two pieces that come before it.
	for i := minVocab; i < len(v.Tokens); i++ {
		tok := v.Tokens[i]
		if utf8.RuneCountInString(tok) < 2 {
			continue
		}
		ok := false
		for k := range tok {
			if k == 0 {
				continue
			}
			a, okA := ids[tok[:k]]
			b, okB := ids[tok[k:]]
			if okA && okB && a >= minVocab && b >= minVocab && a < i && b < i {
				ok = true
				break
			}
		}
		if !ok {
			t.Errorf("id %d %q cannot be merged from earlier pieces", i, tok)
		}
	}
	for _, w := range []string{space + "the", space + "once", space + "little", "ing", space + "happy"} {
		if id, ok := ids[w]; !ok || id >= 512 {
			t.Errorf("%q at id %d (present %v), want it inside the tiny vocabulary (< 512)", w, id, ok)
		}
	}

	small, err := GeneratedVocab(300)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(v.Tokens[:300], small.Tokens); diff != "" {
		t.Errorf("GeneratedVocab(300) is not a prefix of the full vocabulary:\n%s", diff)
	}
	for _, n := range []int{0, 258, MaxGeneratedVocab() + 1} {
		if _, err := GeneratedVocab(n); !errors.Is(err, ErrInvalid) {
			t.Errorf("GeneratedVocab(%d) = %v, want ErrInvalid", n, err)
		}
	}
}

// TestGeneratedVocabTokenizes loads a written file's vocabulary with the
// project's tokenizer: any text round-trips (byte fallback) and common
// words are single pieces.
func TestGeneratedVocabTokenizes(t *testing.T) {
	b := writeBytes(t, Options{Preset: mustPreset(t, "tiny")})
	tok, err := tokenizer.FromGGUF(readGGUF(t, b))
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 512 || tok.BOS() != 1 || tok.EOS() != 2 {
		t.Errorf("VocabSize %d BOS %d EOS %d, want 512 1 2", tok.VocabSize(), tok.BOS(), tok.EOS())
	}
	for _, text := range []string{"Once upon a time, the little girl was happy.", "Cửa Việt 🦙 {x: 42}\n\ttabs", ""} {
		ids := tok.Encode(text, tokenizer.EncodeOptions{BOS: true})
		if got := tok.Decode(ids); got != text {
			t.Errorf("Decode(Encode(%q)) = %q (ids %v)", text, got, ids)
		}
		for _, id := range ids {
			if id == 0 {
				t.Errorf("Encode(%q) produced <unk>: %v", text, ids)
			}
		}
	}
	ids := tok.Encode("the little", tokenizer.EncodeOptions{})
	var pieces []string
	for _, id := range ids {
		pieces = append(pieces, tok.Token(id))
	}
	if diff := cmp.Diff([]string{space + "the", space + "little"}, pieces); diff != "" {
		t.Errorf("pieces of %q (-want +got):\n%s", "the little", diff)
	}
}

// TestLlama2VocabMatchesLlamaCpp converts Llama 2's tokenizer.bin and
// compares it with the vocabulary llama.cpp's converter wrote for the same
// model: tokens, scores and types must be identical.
func TestLlama2VocabMatchesLlamaCpp(t *testing.T) {
	v, err := LoadLlama2CVocab(sharedModel(t, "llama2-tokenizer/tokenizer.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(sharedModel(t, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if diff := cmp.Diff(toks, v.Tokens); diff != "" {
		t.Errorf("tokens (-llama.cpp +synth):\n%.3000s", diff)
	}
	if diff := cmp.Diff(scores, v.Scores); diff != "" {
		t.Errorf("scores (-llama.cpp +synth):\n%.3000s", diff)
	}
	if diff := cmp.Diff(types, v.Types); diff != "" {
		t.Errorf("types (-llama.cpp +synth):\n%.3000s", diff)
	}
}

// TestLlama2TokenizerModel writes a small model with Llama 2's vocabulary:
// the GGUF tokenizer must encode text exactly as llama2.c's tokenizer.bin.
func TestLlama2TokenizerModel(t *testing.T) {
	path := sharedModel(t, "llama2-tokenizer/tokenizer.bin")
	p := mustPreset(t, "tiny")
	p.Name, p.Vocab = "tiny-32k", 32000
	b := writeBytes(t, Options{Preset: p, DType: 2 /* q4_0 keeps it small */, TokenizerPath: path})
	got, err := tokenizer.FromGGUF(readGGUF(t, b))
	if err != nil {
		t.Fatal(err)
	}
	want, err := tokenizer.LoadLlama2C(path, 32000)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Hello world", "Once upon a time, there was a little girl named Lily.", "  two  spaces\nand a newline", "Cửa Việt 🦙"} {
		o := tokenizer.EncodeOptions{BOS: true}
		if diff := cmp.Diff(want.Encode(text, o), got.Encode(text, o)); diff != "" {
			t.Errorf("Encode(%q) (-tokenizer.bin +gguf):\n%s", text, diff)
		}
	}

	err = Write(io.Discard, Options{Preset: mustPreset(t, "tiny"), TokenizerPath: path})
	if !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "32000 pieces") {
		t.Errorf("tiny preset with a 32000-piece tokenizer: %v, want ErrTokenizer naming the counts", err)
	}
}

// l2c encodes pieces in the tokenizer.bin layout.
func l2c(maxLen int32, pieces ...string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(maxLen))
	for i, p := range pieces {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(-float32(i)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func TestReadLlama2CVocab(t *testing.T) {
	got, err := ReadLlama2CVocab(bytes.NewReader(l2c(8, "<unk>", "\n<s>\n", "\n</s>\n", "<0x0A>", " the", "a b", "<0x0g>")), "t.bin")
	if err != nil {
		t.Fatal(err)
	}
	want := Vocab{
		Tokens: []string{"<unk>", "<s>", "</s>", "<0x0A>", space + "the", "a" + space + "b", "<0x0g>"},
		Scores: []float32{0, -1, -2, -3, -4, -5, -6},
		Types:  []int32{2, 3, 3, 6, 1, 1, 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	good := l2c(8, "<unk>", "ab")
	tests := []struct {
		name string
		in   []byte
		msg  string
	}{
		{"empty", nil, "offset 0: max_token_length (i32): expected 4 bytes, got 0"},
		{"short header", []byte{1, 0}, "expected 4 bytes, got 2"},
		{"negative max", l2c(-1), "max_token_length -1 outside"},
		{"huge max", l2c(1 << 20), "max_token_length 1048576 outside"},
		{"no pieces", l2c(8), "offset 4: no pieces"},
		{"cut in piece header", good[:len(good)-5], "offset 17: piece 1: expected 8 bytes"},
		{"cut in text", good[:len(good)-1], "offset 25: piece 1: expected 2 text bytes, got 1"},
		{"long piece", l2c(2, "<unk>"), "offset 8: piece 0: length 5 outside [0, max_token_length 2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLlama2CVocab(bytes.NewReader(tc.in), "t.bin")
			if !errors.Is(err, ErrTokenizer) || !strings.Contains(err.Error(), "t.bin") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want ErrTokenizer naming t.bin and %q", err, tc.msg)
			}
		})
	}
	ioErr := errors.New("device gone")
	_, err = ReadLlama2CVocab(io.MultiReader(bytes.NewReader(good[:6]), errReader{ioErr}), "t.bin")
	if !errors.Is(err, ioErr) || errors.Is(err, ErrTokenizer) {
		t.Errorf("I/O error: %v, want it wrapped (not ErrTokenizer)", err)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func FuzzReadLlama2CVocab(f *testing.F) {
	f.Add(l2c(8, "<unk>", "\n<s>\n", "\n</s>\n", "<0x00>", " a", "ab"))
	f.Add(l2c(0, ""))
	f.Add(l2c(3, "abc", "d e"))
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0, 5, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadLlama2CVocab(bytes.NewReader(data), "fuzz.bin")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "synth: fuzz.bin: offset ") || !errors.Is(err, ErrTokenizer) {
				t.Fatalf("error %q does not name the file and offset, or is not ErrTokenizer", err)
			}
			return
		}
		if v.Len() == 0 || len(v.Scores) != v.Len() || len(v.Types) != v.Len() {
			t.Fatalf("%d tokens, %d scores, %d types", v.Len(), len(v.Scores), len(v.Types))
		}
		for i, tok := range v.Tokens {
			if v.Types[i] == typeNormal && strings.Contains(tok, " ") {
				t.Fatalf("token %d %q keeps a raw space", i, tok)
			}
		}
		if v.Len() > 1 && v.Tokens[1] != "<s>" {
			t.Fatalf("id 1 is %q, want <s>", v.Tokens[1])
		}
		if v.Types[0] != typeUnknown {
			t.Fatalf("id 0 has type %d, want unknown", v.Types[0])
		}
	})
}
