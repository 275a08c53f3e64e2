package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/sluicehq/sluice/etl/sluicebeam"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

func TestMain(m *testing.M) { ptest.Main(m) }

// The example pipeline reads a prompts file and writes one JSON result per
// line: completions, and error records for the lines it cannot run.
func TestExamplePipeline(t *testing.T) {
	tmp := t.TempDir()
	model := filepath.Join(tmp, "tiny.gguf")
	f, _ := os.Create(model)
	preset, _ := synth.LookupPreset("tiny")
	if err := synth.Write(f, synth.Options{Preset: preset, DType: tensor.Q8_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in, out := filepath.Join(tmp, "prompts.jsonl"), filepath.Join(tmp, "results.jsonl")
	os.WriteFile(in, []byte(`{"custom_id":"a","prompt":"once upon a time","max_tokens":5}
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"hello"}}
{"prompt":"no id"}
not json
{"custom_id":"c","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}]}}
`), 0o644)
	cfg := sluicebeam.Config{Model: model, MaxNewTokens: 7, Threads: 1}
	if err := ptest.Run(build(cfg, in, out)); err != nil {
		t.Fatal(err)
	}
	got := map[string]sluicebeam.Result{}
	for _, line := range strings.Split(strings.TrimSpace(readAll(t, out)), "\n") {
		var r sluicebeam.Result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[r.CustomID] = r
	}
	if len(got) != 5 {
		t.Fatalf("%d results, want 5: %v", len(got), got)
	}
	if r := got["a"]; r.CompletionTokens != 5 || r.Error != "" {
		t.Errorf("a: %+v", r)
	}
	if r := got["b"]; r.CompletionTokens != 7 || r.Error != "" {
		t.Errorf("b: %+v", r)
	}
	if r := got["c"]; !strings.Contains(r.Error, "chat lines are not supported") {
		t.Errorf("c: %+v", r)
	}
	errs := 0
	for _, r := range got {
		if r.Error != "" {
			errs++
		}
	}
	if errs != 3 {
		t.Errorf("%d error records, want 3: %v", errs, got)
	}
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
