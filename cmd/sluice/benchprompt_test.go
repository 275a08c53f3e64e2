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
