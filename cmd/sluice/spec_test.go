package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
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

	// Must show 3 of issue 24: tokens_per_target_pass counts only the
	// tokens kept, so passes × tokens per pass never passes the tokens
	// generated (+1: the token a prompt's pass samples); -n and an
	// --eos-id cut a pass's emitted tokens short.
	type specJSON struct {
		GeneratedIDs []int32 `json:"generated_ids"`
		Spec         struct {
			TargetPasses  int64   `json:"target_passes"`
			TokensPerPass float64 `json:"tokens_per_target_pass"`
			DraftPasses   int64   `json:"draft_passes"`
			MaxAccepted   int     `json:"max_accepted_depth"`
		} `json:"spec"`
	}
	specRun := func(extra ...string) specJSON {
		t.Helper()
		args := append([]string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "--json", "--draft", draftModel(t), "--spec", "specexec"}, extra...)
		out, stderr, err := cli(t, "", args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		var j specJSON
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, out)
		}
		return j
	}
	for _, extra := range [][]string{{"-n", "3"}, {"-n", "1"}, {"-n", "40", "--eos-id", "261"}, {"-n", "40"}} {
		j := specRun(extra...)
		kept := float64(j.Spec.TargetPasses) * j.Spec.TokensPerPass
		if j.Spec.TargetPasses < 1 || kept > float64(len(j.GeneratedIDs)+1)+1e-9 {
			t.Errorf("%v: %d passes × %.3f tokens per pass = %.3f, but %d tokens generated", extra, j.Spec.TargetPasses, j.Spec.TokensPerPass, kept, len(j.GeneratedIDs))
		}
	}
	// --max-passes is SpecExec's max_beam_len: one pass a tree reaches depth
	// 1 (one draft pass per target pass), three reach depth 3; the text is
	// plain decoding's either way.
	plain := specRun("-n", "40")
	for _, passes := range []int{1, 3} {
		j := specRun("-n", "40", "--max-passes", fmt.Sprint(passes))
		if !slices.Equal(j.GeneratedIDs, plain.GeneratedIDs) || j.Spec.MaxAccepted > passes || j.Spec.DraftPasses > int64(passes)*j.Spec.TargetPasses {
			t.Errorf("--max-passes %d: %d draft passes for %d target passes, depth %d; ids equal %v", passes, j.Spec.DraftPasses, j.Spec.TargetPasses, j.Spec.MaxAccepted, slices.Equal(j.GeneratedIDs, plain.GeneratedIDs))
		}
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
		{[]string{"--max-passes", "2"}, "--max-passes needs --spec"},
		{[]string{"--draft", draftModel(t), "--spec", "specexec", "--max-passes", "-1"}, "max_passes: -1 is less than 0"},
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
