package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/format/gguf"
)

// TestLlama2VocabMatchesLlamaCpp converts Llama 2's tokenizer.bin and
// compares it with the vocabulary llama.cpp's converter wrote for the same
// model: tokens, scores and types must be identical.
func TestLlama2VocabMatchesLlamaCpp(t *testing.T) {
	v, err := LoadLlama2CVocab(modelFile(t, "llama2-tokenizer/tokenizer.bin"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(modelFile(t, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if diff := cmp.Diff(toks, v.Tokens); diff != "" {
		t.Errorf("tokens (-llama.cpp +tokenizer.bin):\n%.3000s", diff)
	}
	if diff := cmp.Diff(scores, v.Scores); diff != "" {
		t.Errorf("scores (-llama.cpp +tokenizer.bin):\n%.3000s", diff)
	}
	if diff := cmp.Diff(types, v.Types); diff != "" {
		t.Errorf("types (-llama.cpp +tokenizer.bin):\n%.3000s", diff)
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
		Tokens: []string{"<unk>", "<s>", "</s>", "<0x0A>", "\u2581the", "a\u2581b", "<0x0g>"},
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
		{"empty", nil, "offset 0: max_token_length (i32): expected 4 bytes, file ends after 0"},
		{"short header", []byte{1, 0}, "expected 4 bytes, file ends after 2"},
		{"negative max", l2c(-1), "max_token_length -1 outside"},
		{"huge max", l2c(1 << 20), "max_token_length 1048576 outside"},
		{"no pieces", l2c(8), "offset 4: no pieces"},
		{"cut in piece header", good[:len(good)-5], "offset 17: piece 1: expected 8 bytes"},
		{"cut in text", good[:len(good)-1], "offset 25: piece 1: 2 text bytes: expected 2 bytes, file ends after 1"},
		{"long piece", l2c(2, "<unk>"), "offset 8: piece 0: length 5 outside [0, max_token_length 2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadLlama2CVocab(bytes.NewReader(tc.in), "t.bin")
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "t.bin") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("err = %v, want ErrFormat naming t.bin and %q", err, tc.msg)
			}
		})
	}
	ioErr := errors.New("device gone")
	_, err = ReadLlama2CVocab(io.MultiReader(bytes.NewReader(good[:6]), errReader{ioErr}), "t.bin")
	if !errors.Is(err, ioErr) || errors.Is(err, ErrFormat) {
		t.Errorf("I/O error: %v, want it wrapped (not ErrFormat)", err)
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
			if !strings.HasPrefix(err.Error(), "tokenizer: fuzz.bin: offset ") || !errors.Is(err, ErrFormat) {
				t.Fatalf("error %q does not name the file and offset, or is not ErrFormat", err)
			}
			return
		}
		if v.Len() == 0 || len(v.Scores) != v.Len() || len(v.Types) != v.Len() {
			t.Fatalf("%d tokens, %d scores, %d types", v.Len(), len(v.Scores), len(v.Types))
		}
		for i, tok := range v.Tokens {
			if v.Types[i] == int32(TypeNormal) && strings.Contains(tok, " ") {
				t.Fatalf("token %d %q keeps a raw space", i, tok)
			}
		}
		if v.Len() > 1 && v.Tokens[1] != "<s>" {
			t.Fatalf("id 1 is %q, want <s>", v.Tokens[1])
		}
		if v.Types[0] != int32(TypeUnknown) {
			t.Fatalf("id 0 has type %d, want unknown", v.Types[0])
		}
	})
}

// TestVocabGGUF: a tokenizer.bin in GGUF's representation, written as GGUF
// metadata and read back, tokenizes as the tokenizer.bin itself does.
func TestVocabGGUF(t *testing.T) {
	pieces := []string{"<unk>", "\n<s>\n", "\n</s>\n", " ", "a", "b", " a", "ab", " ab"}
	for b := range 256 {
		pieces = append(pieces, fmt.Sprintf("<0x%02X>", b))
	}
	bin := l2c(8, pieces...)
	v, err := ReadLlama2CVocab(bytes.NewReader(bin), "t.bin")
	if err != nil {
		t.Fatal(err)
	}
	f := ggufFixture(t, v.GGUF())
	got, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReadLlama2C(bytes.NewReader(bin), "t.bin", v.Len())
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"ab a", " b\nab", "é"} {
		o := EncodeOptions{BOS: true}
		if diff := cmp.Diff(want.Encode(text, o), got.Encode(text, o)); diff != "" {
			t.Errorf("Encode(%q) (-tokenizer.bin +GGUF):\n%s", text, diff)
		}
	}
	if got.BOS() != 1 || got.EOS() != 2 {
		t.Errorf("BOS %d, EOS %d, want 1 and 2", got.BOS(), got.EOS())
	}
}
