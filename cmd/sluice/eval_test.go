package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

const evalCorpus = "../../eval/testdata/stories260K-corpus.txt"

func TestEvalJSON(t *testing.T) {
	bin, tok, gg, _ := stories(t)
	text, minTokens := evalCorpus, 4000.0
	if testing.Short() {
		// the start of the corpus: the race detector makes a full pass slow
		text, minTokens = filepath.Join(t.TempDir(), "short.txt"), 150
		if err := os.WriteFile(text, []byte(readFile(t, evalCorpus)[:800]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, err := cli(t, "", "eval", "-m", bin, "--tokenizer", tok, "--text", text, "--ref", gg, "--ctx", "128", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ppl, _ := r["perplexity"].(float64)
	if !(ppl > 3 && ppl < 8) || r["kl_divergence"] != 0.0 || r["top1_agreement"] != 1.0 || r["ctx"] != 128.0 {
		t.Errorf("self-eval of stories260K: want perplexity 3..8, KL 0, top-1 1, ctx 128; got\n%s", out)
	}
	if n, _ := r["tokens"].(float64); n < minTokens {
		t.Errorf("%v tokens scored, want all of the text (> %v)", r["tokens"], minTokens)
	}
	if w, _ := r["windows"].(float64); w != float64(int((r["tokens"].(float64)+126)/127)) {
		t.Errorf("%v windows for %v tokens at ctx 128", r["windows"], r["tokens"])
	}
	out, _, err = cli(t, "", "eval", "-m", bin, "--tokenizer", tok, "--text", text, "--ctx", "64")
	if err != nil || !strings.Contains(out, "perplexity:") || strings.Contains(out, "mean KL") {
		t.Errorf("text output without --ref: %v\n%s", err, out)
	}
}

// --make-text with the committed corpus's seed reproduces its start.
func TestEvalMakeText(t *testing.T) {
	bin, tok, _, _ := stories(t)
	path := filepath.Join(t.TempDir(), "corpus.txt")
	if _, stderr, err := cli(t, "", "eval", "--make-text", "-m", bin, "--tokenizer", tok, "-o", path, "--tokens", "200", "--seed", "42"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	got := strings.TrimSuffix(readFile(t, path), "\n")
	if want := readFile(t, evalCorpus); len(got) < 300 || !strings.HasPrefix(want, got) {
		t.Errorf("--make-text --seed 42 --tokens 200 is not a prefix of the committed corpus:\n%q", got)
	}
}

func TestEvalErrors(t *testing.T) {
	bin, tok, _, _ := stories(t)
	tmp := t.TempDir()
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join(tmp, "tiny.gguf")
	if err := synth.WriteFile(tiny, synth.Options{Preset: p, DType: tensor.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"different vocabularies", []string{"-m", bin, "--tokenizer", tok, "--text", evalCorpus, "--ref", tiny}, []string{"vocabularies differ", "stories260K.bin", "tiny.gguf"}},
		{"no text", []string{"-m", bin, "--tokenizer", tok}, []string{"--text"}},
		{"missing text", []string{"-m", bin, "--tokenizer", tok, "--text", filepath.Join(tmp, "nope.txt")}, []string{"nope.txt"}},
		{"window past the context", []string{"-m", bin, "--tokenizer", tok, "--text", evalCorpus, "--ctx", "4096"}, []string{"window of 4096"}},
		{"make-text without -o", []string{"--make-text", "-m", bin, "--tokenizer", tok}, []string{"-o"}},
		{"no model", []string{"--text", evalCorpus}, []string{"-m MODEL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "", append([]string{"eval"}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}
