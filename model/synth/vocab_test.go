package synth

import (
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

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
