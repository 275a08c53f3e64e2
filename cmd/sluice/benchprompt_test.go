package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bench --prompt: the prompt is the text's tokens, the report carries the
// MD5 of the generated text, which SpecExec repeats and another prompt
// changes; --prompt-file reads the same; conflicting flags are errors.
func TestBenchPrompt(t *testing.T) {
	bin, tok, _, _ := stories(t)
	const text = "Once upon a time, there was a little girl named Lily."
	type rep struct {
		PromptTokens int    `json:"prompt_tokens"`
		PromptText   bool   `json:"prompt_text"`
		TextMD5      string `json:"text_md5"`
		Spec         *struct {
			TokensPerPass float64 `json:"tokens_per_target_pass"`
		} `json:"spec"`
	}
	bench := func(extra ...string) rep {
		t.Helper()
		args := append([]string{"bench", "-m", bin, "--tokenizer", tok, "--gen-tokens", "24", "--runs", "2", "--threads", "1", "--json"}, extra...)
		out, stderr, err := cli(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		var r rep
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
		return r
	}
	plain := bench("--prompt", text)
	// BOS, then at least one token per word.
	if !plain.PromptText || plain.PromptTokens < 1+len(strings.Fields(text)) || len(plain.TextMD5) != 32 {
		t.Fatalf("--prompt: %+v", plain)
	}
	spec := bench("--prompt", text, "--draft", draftModel(t), "--spec", "specexec", "--budget", "16")
	if spec.TextMD5 != plain.TextMD5 || spec.PromptTokens != plain.PromptTokens || spec.Spec == nil || spec.Spec.TokensPerPass <= 1 {
		t.Fatalf("specexec on the same prompt: %+v, plain %+v", spec, plain)
	}
	f := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := bench("--prompt-file", f); got != plain {
		t.Fatalf("--prompt-file: %+v, --prompt: %+v", got, plain)
	}
	if other := bench("--prompt", "Tom had a big red ball."); other.TextMD5 == plain.TextMD5 {
		t.Fatalf("another prompt generated the same text (md5 %s)", other.TextMD5)
	}
	if random := bench("--prompt-tokens", "8"); random.PromptText || random.PromptTokens != 8 {
		t.Fatalf("random prompt: %+v", random)
	}
	for _, bad := range [][]string{
		{"--prompt", text, "--prompt-tokens", "8"},
		{"--prompt", text, "--prompt-file", f},
		{"--prompt", ""},
		{"--prompt-file", filepath.Join(t.TempDir(), "absent.txt")},
	} {
		args := append([]string{"bench", "-m", bin, "--tokenizer", tok, "--gen-tokens", "4", "--runs", "1"}, bad...)
		if _, stderr, err := cli(t, "", args...); err == nil || !strings.Contains(err.Error()+stderr, "prompt") {
			t.Fatalf("%v: want an error naming the prompt flag, got %v\n%s", bad, err, stderr)
		}
	}
}

// bench --temp samples with a seed: two runs repeat their text (bench
// checks it), another seed or greedy decoding writes another, the report
// names the temperature and seed and carries the CPU time; a negative
// temperature is an error.
func TestBenchSampled(t *testing.T) {
	bin, tok, _, _ := stories(t)
	type rep struct {
		TextMD5       string  `json:"text_md5"`
		Temperature   float64 `json:"temperature"`
		Seed          uint64  `json:"seed"`
		CPUSeconds    float64 `json:"cpu_seconds"`
		CPUMsPerToken float64 `json:"cpu_ms_per_token"`
	}
	bench := func(extra ...string) rep {
		t.Helper()
		args := append([]string{"bench", "-m", bin, "--tokenizer", tok, "--prompt", "Once upon a time", "--gen-tokens", "32", "--runs", "2", "--threads", "1", "--json"}, extra...)
		out, stderr, err := cli(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		var r rep
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
		return r
	}
	greedy := bench()
	if greedy.Temperature != 0 || greedy.Seed != 0 {
		t.Errorf("greedy report names sampling: %+v", greedy)
	}
	s3 := bench("--temp", "0.8", "--seed", "3")
	if s3.Temperature != 0.8 || s3.Seed != 3 || !(s3.CPUSeconds > 0) || !(s3.CPUMsPerToken > 0) {
		t.Fatalf("--temp 0.8 --seed 3: %+v", s3)
	}
	if s4 := bench("--temp", "0.8", "--seed", "4"); s4.TextMD5 == s3.TextMD5 {
		t.Errorf("seeds 3 and 4 wrote the same text (md5 %s)", s3.TextMD5)
	}
	if s3.TextMD5 == greedy.TextMD5 {
		t.Errorf("--temp 0.8 wrote the greedy text (md5 %s)", s3.TextMD5)
	}
	if _, _, err := cli(t, "", "bench", "-m", bin, "--tokenizer", tok, "--temp", "-1"); err == nil || !strings.Contains(err.Error(), "--temp") {
		t.Errorf("--temp -1: %v", err)
	}
}
