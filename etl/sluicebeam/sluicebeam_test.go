package sluicebeam_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	_ "github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/etl/sluicebeam"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

func TestMain(m *testing.M) { ptest.Main(m) }

// format renders one keyed result for passert.
func format(id string, r sluicebeam.Result) string {
	return fmt.Sprintf("%s|%s|%q|%d/%d|%s|%s", id, r.CustomID, r.Text, r.PromptTokens, r.CompletionTokens, r.FinishReason, r.Error)
}

func init() { register.Function2x1(format) }

func synthModel(t *testing.T) string {
	t.Helper()
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synth.Write(f, synth.Options{Preset: p, DType: tensor.Q8_0, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// 100 prompts through Generate on the prism runner give, for every
// custom_id, exactly what the engine gives run directly; a prompt longer
// than the context is an error record, and the others still complete.
func TestGenerateMatchesEngine(t *testing.T) {
	cfg := sluicebeam.Config{Model: synthModel(t), MaxNewTokens: 12, MaxInFlight: 8, Threads: 1}
	words := strings.Fields("once upon a time there was a little girl named Lily who liked to play in the park")
	var prompts []sluicebeam.Prompt
	for i := range 100 {
		prompts = append(prompts, sluicebeam.Prompt{CustomID: fmt.Sprintf("p%03d", i), Prompt: strings.Join(words[:i%len(words)], " "), MaxTokens: 4 + i%9})
	}
	prompts[99].Prompt = strings.Repeat("hello world ", 300) // longer than the context

	eng, err := sluicebeam.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]any, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		err := eng.Submit(context.Background(), sluice.Request{ID: p.CustomID, Prompt: p.Prompt, MaxNewTokens: p.MaxTokens}, func(res sluice.Result) {
			defer wg.Done()
			r := sluicebeam.Result{CustomID: p.CustomID, Text: res.Completion, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, FinishReason: res.Finish}
			if res.Err != nil {
				r = sluicebeam.Result{CustomID: p.CustomID, FinishReason: res.Finish, Error: res.Err.Error()}
			}
			want[i] = format(p.CustomID, r)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	eng.Close()
	if w := want[99].(string); !strings.Contains(w, "prompt longer than the context") {
		t.Fatalf("the long prompt did not fail: %s", w)
	}

	p, s := beam.NewPipelineWithRoot()
	in := beam.CreateList(s, prompts)
	out := beam.ParDo(s, format, sluicebeam.Generate(s, cfg, in))
	passert.Equals(s, out, want...)
	ptest.RunAndValidate(t, p)
}

// verdict is a constrained result's check, as a string passert can compare.
func verdict(id string, r sluicebeam.Result) string {
	switch {
	case r.Error != "":
		return id + ": error: " + r.Error
	case r.FinishReason != "stop":
		return id + ": " + r.FinishReason
	case id == "own":
		return id + ": " + r.Text
	}
	var v struct {
		N *int `json:"n"`
	}
	if err := json.Unmarshal([]byte(r.Text), &v); err != nil || v.N == nil || *v.N < 0 || *v.N > 9 {
		return id + ": invalid " + r.Text
	}
	return id + ": valid"
}

func init() { register.Function2x1(verdict) }

// Config.JSONSchema constrains every element without its own constraint;
// an element's grammar replaces it; an element whose schema cannot be
// enforced is its own error result; a bad Config.JSONSchema fails Open.
func TestGenerateConstrained(t *testing.T) {
	const schema = `{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},"required":["n"],"additionalProperties":false}`
	cfg := sluicebeam.Config{Model: synthModel(t), MaxNewTokens: 40, MaxInFlight: 4, Threads: 1, JSONSchema: schema}
	prompts := []sluicebeam.Prompt{
		{CustomID: "a", Prompt: "once upon"},
		{CustomID: "b", Prompt: "a time"},
		{CustomID: "own", Prompt: "x", Grammar: `root ::= "yes"`},
		{CustomID: "bad", Prompt: "x", JSONSchema: `{"not":{}}`},
	}
	p, s := beam.NewPipelineWithRoot()
	out := beam.ParDo(s, verdict, sluicebeam.Generate(s, cfg, beam.CreateList(s, prompts)))
	passert.Equals(s, out, "a: valid", "b: valid", "own: yes", `bad: error: schema #: keyword "not": not supported (it cannot be enforced by the grammar)`)
	ptest.RunAndValidate(t, p)

	bad := cfg
	bad.JSONSchema = `{"enum":[]}`
	if _, err := sluicebeam.Open(t.Context(), bad); err == nil || !strings.Contains(err.Error(), `"enum"`) {
		t.Errorf("a bad Config.JSONSchema: %v", err)
	}
}
