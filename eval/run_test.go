package eval_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/sluicehq/sluice/eval"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama" // registers the llama architecture
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

// corpusSeed and corpusTokens made testdata/stories260K-corpus.txt.
const (
	corpusSeed = 42
	corpusFile = "testdata/stories260K-corpus.txt"
)

func load(t *testing.T, path, tok string) *model.Loaded {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Tokenizer: tok, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func stories(t *testing.T) *model.Loaded {
	dir := testutil.Models(t)
	return load(t, filepath.Join(dir, "stories260K", "stories260K.bin"), filepath.Join(dir, "stories260K", "tok512.bin"))
}

// tiny writes a seeded synthetic model (no ../shared needed).
func tiny(t *testing.T, seed uint64) *model.Loaded {
	t.Helper()
	return load(t, synthfile.Path(t, synthfile.Options{DType: tensor.F32, Seed: seed}), "")
}

func corpusIDs(t *testing.T, l *model.Loaded) []int32 {
	t.Helper()
	b, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	return l.Tokenizer.Encode(string(b), tokenizer.EncodeOptions{})
}

// The committed corpus is what SampleCorpus gives with its seed: regenerate
// the first few stories and compare.
func TestCorpusPrefix(t *testing.T) {
	m := stories(t)
	want, err := os.ReadFile(corpusFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := eval.SampleCorpus(t.Context(), m, eval.CorpusOptions{Tokens: 400, Seed: corpusSeed})
	if err != nil {
		t.Fatal(err)
	}
	got = strings.TrimSuffix(got, "\n")
	if len(got) < 600 || !strings.HasPrefix(string(want), got) {
		t.Errorf("400 tokens with seed %d are not a prefix of %s:\n got %q\nwant %q", corpusSeed, corpusFile, got, want[:min(len(want), len(got)+20)])
	}
	if strings.Count(got, "\n") < 1 {
		t.Errorf("want several stories, got one: %q", got)
	}
	other, err := eval.SampleCorpus(t.Context(), m, eval.CorpusOptions{Tokens: 50, Seed: corpusSeed + 1})
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(string(want), strings.TrimSuffix(other, "\n")) {
		t.Errorf("seed %d gave the same text as seed %d", corpusSeed+1, corpusSeed)
	}
}

// stories260K sampled the corpus itself, so its perplexity is about
// e^(entropy of its own distribution): measured 4.40 at ctx 512.
func TestStoriesPerplexity(t *testing.T) {
	m := stories(t)
	ids := corpusIDs(t, m)
	if testing.Short() {
		ids = ids[:600] // two windows, a seventh of the work
	}
	res, err := eval.Evaluate(t.Context(), m, nil, ids, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ppl := res.Perplexity(); !(ppl > 3 && ppl < 6) {
		t.Errorf("perplexity %v, want 3..6 (measured 4.40)", ppl)
	}
	if res.Tokens != len(ids) || res.Context != 512 || res.Windows != (len(ids)+510)/511 {
		t.Errorf("scored %d of %d tokens in %d windows of %d, want all in ⌈n/511⌉ windows of 512", res.Tokens, len(ids), res.Windows, res.Context)
	}
}

// A model against itself: KL exactly 0, top-1 exactly 1. Against a weaker
// model on the same vocabulary: KL > 0, top-1 < 1, and the weaker model's
// perplexity is higher.
func TestStoriesAgainstRef(t *testing.T) {
	dir := testutil.Models(t)
	m := stories(t)
	if testing.Short() {
		t.Skip("-short: two passes over the corpus")
	}
	ids := corpusIDs(t, m)[:1500]
	self := load(t, filepath.Join(dir, "stories260K-gguf", "stories260K.gguf"), "")
	res, err := eval.Evaluate(t.Context(), m, self, ids, eval.Options{Context: 256})
	if err != nil {
		t.Fatal(err)
	}
	if res.MeanKL() != 0 || res.Top1Agreement() != 1 || res.Perplexity() != res.RefPerplexity() {
		t.Errorf(".bin against its GGUF: KL %v, top-1 %v, ppl %v vs %v; want 0, 1, equal", res.MeanKL(), res.Top1Agreement(), res.Perplexity(), res.RefPerplexity())
	}
	xs := load(t, filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), filepath.Join(dir, "stories260K", "tok512.bin"))
	res, err = eval.Evaluate(t.Context(), xs, m, ids, eval.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Context != 256 {
		t.Errorf("default window %d, want 256 (llama2xs's context)", res.Context)
	}
	if kl, top1 := res.MeanKL(), res.Top1Agreement(); !(kl > 0.1 && kl < 3) || !(top1 > 0.3 && top1 < 0.95) {
		t.Errorf("llama2xs against stories260K: KL %v, top-1 %v; want 0.1..3 and 0.3..0.95 (measured 0.67, 0.61)", kl, top1)
	}
	if !(res.Perplexity() > res.RefPerplexity()) {
		t.Errorf("weaker model perplexity %v not above the reference's %v", res.Perplexity(), res.RefPerplexity())
	}
}

// Synthetic models need no ../shared: a model against itself is exact, two
// seeds differ, and a uniform-ish random model has a perplexity of the order
// of its vocabulary.
func TestSynthetic(t *testing.T) {
	a, b := tiny(t, 1), tiny(t, 2)
	ids := a.Tokenizer.Encode("the quick brown fox jumps over the lazy dog, again and again", tokenizer.EncodeOptions{})
	res, err := eval.Evaluate(t.Context(), a, a, ids, eval.Options{Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	if res.MeanKL() != 0 || res.Top1Agreement() != 1 || res.Tokens != len(ids) || res.Windows != (len(ids)+6)/7 {
		t.Errorf("self: KL %v top-1 %v, %d tokens in %d windows; want 0, 1, %d in %d", res.MeanKL(), res.Top1Agreement(), res.Tokens, res.Windows, len(ids), (len(ids)+6)/7)
	}
	if ppl := res.Perplexity(); math.IsNaN(ppl) || ppl < 2 || ppl > 100*512 {
		t.Errorf("perplexity %v of a random model: want finite, of the order of 512", ppl)
	}
	res, err = eval.Evaluate(t.Context(), a, b, ids, eval.Options{Context: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !(res.MeanKL() > 0) || res.Top1Agreement() == 1 {
		t.Errorf("seeds 1 and 2: KL %v top-1 %v; want KL > 0 and some disagreement", res.MeanKL(), res.Top1Agreement())
	}
}

func TestEvaluateErrors(t *testing.T) {
	a := tiny(t, 1)
	ids := []int32{5, 6, 7}
	tests := []struct {
		name string
		ref  *model.Loaded
		ids  []int32
		o    eval.Options
		want string
	}{
		{"window past the context", nil, ids, eval.Options{Context: 257}, "window of 257 tokens"},
		{"window of one", nil, ids, eval.Options{Context: 1}, "window of 1"},
		{"no tokens", nil, nil, eval.Options{}, "no tokens"},
		{"token outside the vocabulary", nil, []int32{5, 9999}, eval.Options{}, "9999"},
	}
	if dir := modelsOrEmpty(t); dir != "" {
		s := load(t, filepath.Join(dir, "stories260K", "stories260K.bin"), filepath.Join(dir, "stories260K", "tok512.bin"))
		tests = append(tests, struct {
			name string
			ref  *model.Loaded
			ids  []int32
			o    eval.Options
			want string
		}{"different vocabularies", s, ids, eval.Options{}, "stories260K.bin"})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eval.Evaluate(t.Context(), a, tc.ref, tc.ids, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tc.want)
			}
			if tc.ref != nil && (!errors.Is(err, eval.ErrVocab) || !strings.Contains(err.Error(), "tiny.gguf")) {
				t.Errorf("err = %v, want ErrVocab naming both files", err)
			}
		})
	}
}

func modelsOrEmpty(t *testing.T) string {
	dir := filepath.Join(testutil.Root(), "..", "shared", "models", "stories260K", "stories260K.bin")
	if _, err := os.Stat(dir); err != nil {
		return ""
	}
	return filepath.Join(testutil.Root(), "..", "shared", "models")
}
