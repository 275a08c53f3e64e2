package main

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// generate --prompt-ids: the ids of `-p` given as ids give the same ids out
// (no BOS added: the list carries its own); bad items and ids outside the
// vocabulary are errors naming them.
func TestGeneratePromptIDs(t *testing.T) {
	bin, tok, _, _ := stories(t)
	run := func(args ...string) (prompt, gen []int32) {
		t.Helper()
		out, stderr, err := cli(t, "", append([]string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "24", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, stderr)
		}
		var j struct {
			PromptIDs    []int32 `json:"prompt_ids"`
			GeneratedIDs []int32 `json:"generated_ids"`
		}
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return j.PromptIDs, j.GeneratedIDs
	}
	p, g := run("-p", "Once upon a time")
	ids := make([]string, len(p))
	for i, v := range p {
		ids[i] = strconv.Itoa(int(v))
	}
	p2, g2 := run("--prompt-ids", strings.Join(ids, ", "))
	if !slices.Equal(p, p2) || !slices.Equal(g, g2) {
		t.Fatalf("--prompt-ids %v: prompt %v, generated %v; -p gave %v, %v", ids, p2, g2, p, g)
	}
	for _, tc := range []struct{ ids, want string }{
		{"1 x2", `item 2 is "x2"`},
		{"1 -3", `item 2 is "-3"`},
		{" , ", "holds no token id"},
		{"1 9999", "prompt token 1 is id 9999, outside the vocabulary of 512"},
	} {
		_, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--prompt-ids", tc.ids)
		if err == nil || !strings.Contains(stderr+err.Error(), tc.want) {
			t.Errorf("--prompt-ids %q: err %v, stderr %q; want it to say %q", tc.ids, err, stderr, tc.want)
		}
	}
	if _, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "-p", "x", "--prompt-ids", "1"); err == nil || !strings.Contains(stderr+err.Error(), "replaces -p") {
		t.Errorf("-p with --prompt-ids: err %v, stderr %q", err, stderr)
	}
}
