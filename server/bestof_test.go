package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// best_of through the official client: the n choices are the engine's n best
// candidates of the same best_of request (seeded: request index = the
// prompt's), in order, and usage counts every candidate's tokens; best_of
// below n, or with stream, is a 400 naming best_of.
func TestCompletionBestOf(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	p := completionParams("once upon a time", 12)
	p.N, p.BestOf, p.Seed, p.Temperature = openai.Int(2), openai.Int(3), openai.Int(5), openai.Float(0.9)
	got, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	so := f.eng.Pipeline().SessionOptions().Sampling // the server's defaults
	so.Temperature, so.Seed = 0.9, 5
	want, err := f.eng.Complete(ctx, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 12, BestOf: 3, Sampling: &so})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 2 || len(want.Beams) != 3 {
		t.Fatalf("%d choices, engine %d candidates", len(got.Choices), len(want.Beams))
	}
	ntok := 0
	for _, h := range want.Beams {
		ntok += len(h.Tokens)
		if n := len(h.Tokens); n < 12 {
			ntok-- // ended on a stop token, which is not counted
		}
	}
	for i, c := range got.Choices {
		if c.Text != want.Beams[i].Text {
			t.Errorf("choice %d: %q, engine's candidate %q", i, c.Text, want.Beams[i].Text)
		}
	}
	if got.Usage.CompletionTokens != int64(ntok) {
		t.Errorf("usage counts %d completion tokens, the candidates have %d", got.Usage.CompletionTokens, ntok)
	}
	for _, body := range []string{
		`{"prompt":"a","max_tokens":4,"n":3,"best_of":2}`,
		`{"prompt":"a","max_tokens":4,"best_of":2,"stream":true}`,
	} {
		code, resp := f.post(t, "/v1/completions", body)
		if code != 400 || !strings.Contains(resp, "best_of") {
			t.Errorf("%s: %d %s, want a 400 naming best_of", body, code, resp)
		}
	}
}

// logit_bias through the official client: -100 on the greedy completion's
// first token makes the server avoid it (the engine's own completion with
// the same bias), and a key that is no token id is a 400 naming logit_bias.
func TestCompletionLogitBias(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	free := complete(t, f.eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 8})
	first := free.Tokens[free.PromptTokens]
	want := complete(t, f.eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 8, LogitBias: map[int32]float32{first: -100}})
	p := completionParams("once upon a time", 8)
	p.LogitBias = map[string]int64{fmt.Sprint(first): -100}
	got, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want.Completion || want.Completion == free.Completion {
		t.Errorf("with the bias: %q, engine %q, without %q", got.Choices[0].Text, want.Completion, free.Completion)
	}
	if want.Tokens[want.PromptTokens] == first {
		t.Errorf("the banned token %d came first anyway", first)
	}
	if code, resp := f.post(t, "/v1/completions", `{"prompt":"a","max_tokens":2,"logit_bias":{"x":1}}`); code != 400 || !strings.Contains(resp, "logit_bias") {
		t.Errorf("bad key: %d %s", code, resp)
	}
}
