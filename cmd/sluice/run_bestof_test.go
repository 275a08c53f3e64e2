package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A batch line's best_of: the line's text is one of its candidates', and its
// completion_tokens counts every candidate (more than the text's own); a
// best_of out of range is refused naming the key.
func TestRunBestOf(t *testing.T) {
	tmp := t.TempDir()
	synth := filepath.Join(tmp, "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "-o", synth); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	in := filepath.Join(tmp, "in.jsonl")
	os.WriteFile(in, []byte(`{"custom_id":"one","prompt":"hello","max_tokens":6,"temperature":0.9,"seed":3}
{"custom_id":"three","prompt":"hello","max_tokens":6,"temperature":0.9,"seed":3,"best_of":3}
{"custom_id":"bad","prompt":"hello","best_of":0}
`), 0o644)
	out := filepath.Join(tmp, "out.jsonl")
	_, stderr, err := cli(t, "", "run", "sample", "-m", synth, "--prompts", in, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "1 line(s) failed") {
		t.Fatalf("%v\n%s", err, stderr)
	}
	res := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatal(err)
		}
		res[v["custom_id"].(string)] = v
	}
	if e, _ := json.Marshal(res["bad"]); !strings.Contains(string(e), "best_of") {
		t.Errorf("best_of 0: %s, want an error naming best_of", e)
	}
	one, three := res["one"], res["three"]
	if one["completion_tokens"].(float64) != 6 {
		t.Fatalf("plain line: %v", one)
	}
	if n := three["completion_tokens"].(float64); n <= 6 || n > 18 {
		t.Errorf("best_of 3 line counts %v completion tokens, want the three candidates' (7 to 18)", n)
	}
}
