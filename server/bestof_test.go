package server_test

import (
	"context"
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
