package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// MaxBytesPerToken is a true bound: no text encodes to fewer than
// ceil(len/bound) tokens, on vocabularies with byte pieces (SentencePiece and
// byte-level BPE), on long runs of one character (the most a merge can
// cover), on bytes no piece covers and on special tokens' literal text; a
// vocabulary that drops bytes has no bound.
func TestMaxBytesPerToken(t *testing.T) {
	toks := map[string]Tokenizer{"synthetic-spm": synthetic(t, " ", "a", "b", "ab", " ab", "aa", "aaaa"), "synthetic-bpe": syntheticBPE(t)}
	if testutil.HaveModel("stories260K/tok512.bin") {
		toks["tok512"] = loadTok512(t)
	}
	for _, rel := range []string{"llama-cpp-vocab/ggml-vocab-llama-spm.gguf", "llama-cpp-vocab/ggml-vocab-gpt-2.gguf"} {
		if testutil.HaveModel(rel) {
			toks[rel] = loadGGUF(t, rel)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", " ", "ab", "\n", "é", "日本", "🦙", "\xff", "<s>", "</s>", "<|endoftext|>", "Once upon a time", "aaaaaaaa"}
	for name, tok := range toks {
		bound := MaxBytesPerToken(tok)
		if bound < 4 {
			t.Fatalf("%s: bound %d, want one (≥ 4: a character)", name, bound)
		}
		texts := []string{strings.Repeat("a", 4096), strings.Repeat(" ", 1000), strings.Repeat("\xff", 300)}
		for range 300 {
			var b strings.Builder
			for range rng.IntN(64) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			texts = append(texts, b.String())
		}
		for _, s := range texts {
			for _, o := range []EncodeOptions{{}, {ParseSpecial: true}} {
				if n := len(tok.Encode(s, o)); n*bound < len(s) {
					t.Fatalf("%s: %q (%d bytes) encodes to %d tokens, below the bound's %d bytes a token", name, s, len(s), n, bound)
				}
			}
		}
	}
	// No byte pieces and no unknown token: "z" is dropped, so no bound.
	bare, err := NewSPM(SPMOptions{Pieces: []string{"<s>", "</s>", "a", "b"}, Scores: make([]float32, 4), BOS: 0, EOS: 1, Unk: -1})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(bare.Encode("zzzz", EncodeOptions{})); n != 0 {
		t.Fatalf("the bare vocabulary encodes zzzz to %d tokens; the test needs one that drops it", n)
	}
	if b := MaxBytesPerToken(bare); b != 0 {
		t.Errorf("a vocabulary that drops bytes: bound %d, want 0", b)
	}
}
