package sluicebeam_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/ptest"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/etl/sluicebeam"
)

// lineVerdict renders a result line's substance (ids and timings aside) so
// passert can compare it with what the engine gives.
func lineVerdict(line string) string {
	var v struct {
		CustomID string `json:"custom_id"`
		Text     string `json:"text"`
		Error    any    `json:"error"`
		Response *struct {
			StatusCode int `json:"status_code"`
			Body       struct {
				Object  string `json:"object"`
				Choices []struct {
					Text string `json:"text"`
				} `json:"choices"`
			} `json:"body"`
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(line), &v); err != nil {
		return "not JSON: " + line
	}
	switch {
	case v.Response != nil && len(v.Response.Body.Choices) == 1:
		return fmt.Sprintf("%s openai %d %s %q", v.CustomID, v.Response.StatusCode, v.Response.Body.Object, v.Response.Body.Choices[0].Text)
	case v.Error != nil && v.Error != "":
		return fmt.Sprintf("%s error", v.CustomID)
	}
	return fmt.Sprintf("%s sluice %q", v.CustomID, v.Text)
}

func init() { register.Function1x1(lineVerdict) }

// GenerateLines runs batch-file lines as sluice run does (the same
// jobs.Batch): a JSONL line gives sluice's result line with the engine's
// completion, an OpenAI Batch line an OpenAI Batch output line with a
// text_completion body, a line that is no request its error line.
func TestGenerateLines(t *testing.T) {
	cfg := sluicebeam.Config{Model: synthModel(t), MaxNewTokens: 8, MaxInFlight: 4, Threads: 1}
	eng, err := sluicebeam.Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	complete := func(prompt string, maxNew int) string {
		r, err := eng.Complete(t.Context(), sluiceRequest(prompt, maxNew))
		if err != nil {
			t.Fatal(err)
		}
		return r.Completion
	}
	a, b := complete("once upon a time", 6), complete("the little dog", 8)
	eng.Close()
	lines := []string{
		`{"custom_id":"a","prompt":"once upon a time","max_tokens":6}`,
		`{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"model":"tiny","prompt":"the little dog","max_tokens":8}}`,
		`{"custom_id":"c","prompt":"x","logprobs":true}`,
	}
	want := []any{
		fmt.Sprintf("a sluice %q", a),
		fmt.Sprintf("b openai 200 text_completion %q", b),
		"c error",
	}
	if strings.Contains(a+b, "error") {
		t.Fatalf("the engine failed: %q %q", a, b)
	}
	p, s := beam.NewPipelineWithRoot()
	out := beam.ParDo(s, lineVerdict, sluicebeam.GenerateLines(s, cfg, beam.CreateList(s, lines)))
	passert.Equals(s, out, want...)
	ptest.RunAndValidate(t, p)
}

func sluiceRequest(prompt string, maxNew int) sluice.Request {
	return sluice.Request{Prompt: prompt, MaxNewTokens: maxNew}
}
