package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func draftModel(t *testing.T) string {
	dir := filepath.Dir(filepath.Dir(func() string { b, _, _, _ := stories(t); return b }()))
	return filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin")
}

// The CLI's speculative decoding: specexec, chain and lookup print the greedy
// golden; --json carries the ids; bad flags and a draft with another
// vocabulary are clear errors.
func TestGenerateSpec(t *testing.T) {
	bin, tok, _, dir := stories(t)
	want := readFile(t, filepath.Join(dir, "stories260K", "expected-greedy-256.txt"))
	base := []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "256"}
	for _, extra := range [][]string{
		{"--draft", draftModel(t), "--spec", "specexec", "--budget", "32"},
		{"--draft", draftModel(t), "--spec", "chain", "--draft-max", "4"},
		{"--spec", "lookup", "--draft-max", "3"},
	} {
		out, stderr, err := cli(t, "", append(append([]string{}, base...), extra...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		if out != want {
			t.Fatalf("%v: text differs from the greedy golden:\n%s", extra, out)
		}
	}

	out, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "20", "-p", "Lily", "--json",
		"--draft", draftModel(t), "--spec", "specexec", "--budget", "16")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var j struct {
		PromptIDs    []int32 `json:"prompt_ids"`
		GeneratedIDs []int32 `json:"generated_ids"`
		Text         string  `json:"text"`
		Finish       string  `json:"finish_reason"`
		Spec         *struct {
			TargetPasses  int64   `json:"target_passes"`
			TokensPerPass float64 `json:"tokens_per_target_pass"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	if len(j.PromptIDs) < 2 || len(j.GeneratedIDs) != 20 || !strings.HasPrefix(j.Text, "Lily") || j.Finish != "length" || j.Spec == nil || j.Spec.TokensPerPass <= 1 {
		t.Fatalf("--json: %+v", j)
	}

	tmp := t.TempDir()
	other := filepath.Join(tmp, "other.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "f32", "-o", other); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec", "specexec"}, "--spec specexec needs a draft model"},
		{[]string{"--spec", "chain"}, "--spec chain needs a draft model"},
		{[]string{"--draft", draftModel(t), "--spec", "specexec", "--budget", "0"}, "budget: 0 is less than 1"},
		{[]string{"--draft", draftModel(t), "--spec", "specexec", "--max-depth", "0"}, "max_depth: 0 is less than 1"},
		{[]string{"--draft", draftModel(t), "--spec", "beam"}, `"beam" is not a mode`},
		{[]string{"--budget", "8"}, "--budget needs --spec"},
		{[]string{"--draft", other, "--draft-tokenizer", "", "--spec", "specexec"}, "vocabulary differs"},
	} {
		_, _, err := cli(t, "", append(append([]string{}, base...), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// Beam search through the CLI: --beams 1 is greedy; --json returns the
// ranked sequences with scores; more beams than the vocabulary, or
// --num-return above --beams, are clear errors.
func TestGenerateBeams(t *testing.T) {
	bin, tok, _, dir := stories(t)
	want := readFile(t, filepath.Join(dir, "stories260K", "expected-greedy-256.txt"))
	base := []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "256"}
	out, stderr, err := cli(t, "", append(base, "--beams", "1")...)
	if err != nil || out != want {
		t.Fatalf("--beams 1: %v %s\n%s", err, stderr, out)
	}
	out, stderr, err = cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "-n", "20", "-p", "Lily and", "--beams", "4", "--num-return", "3", "--early-stopping", "never", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var j generateJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if len(j.Beams) != 3 || j.Beams[0].Score < j.Beams[1].Score || j.Beams[1].Score < j.Beams[2].Score || !strings.HasPrefix(j.Text, "Lily and"+j.Beams[0].Text[:0]) {
		t.Fatalf("beams: %+v", j.Beams)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--beams", "600"}, "more beams than tokens"},
		{[]string{"--beams", "2", "--num-return", "3"}, "num-return ≤ beams"},
		{[]string{"--num-return", "2"}, "--num-return needs --beams"},
		{[]string{"--beams", "2", "--early-stopping", "maybe"}, "want true, false or never"},
	} {
		_, _, err := cli(t, "", append(append([]string{}, base...), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}
