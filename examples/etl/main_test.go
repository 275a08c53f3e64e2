package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

func TestETL(t *testing.T) {
	p, _ := synth.LookupPreset("tiny")
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, synth.Options{Preset: p, DType: tensor.Q8_0, Seed: 2}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	in := `{"id":"a","text":"hello"}
not json
{"id":"b","text":"world"}
{"id":"c","text":"hello"}
`
	var out bytes.Buffer
	if err := run(t.Context(), path, "", 6, 4, strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	var got []output
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var o output
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	if len(got) != 4 || got[0].ID != "a" || got[1].Error == "" || got[2].ID != "b" || got[3].ID != "c" {
		t.Fatalf("outputs out of order or missing: %+v", got)
	}
	if got[0].Tokens != 6 || got[0].Completion != got[3].Completion {
		t.Fatalf("same prompt, greedy: %q vs %q (%d tokens)", got[0].Completion, got[3].Completion, got[0].Tokens)
	}
}
