package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/server"
)

// Over a SpecExec pipeline (stories260K with llama2xs drafting), greedy and
// seeded text through the server are plain decoding's, streamed or not, stop
// strings still cut, and logprobs are a clear 400.
func TestSpeculativePipeline(t *testing.T) {
	dir := testutil.Models(t)
	tok := filepath.Join(dir, "stories260K", "tok512.bin")
	open := func(preset string) *sluice.Engine {
		p, err := pipelines.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 4, 48
		p.Model.Threads = 1
		if preset != "greedy" {
			p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: tok, Threads: 1}
		}
		e, err := sluice.Open(context.Background(), sluice.Options{Pipeline: p, Model: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	plain := newFixture(t, server.Options{Engine: open("greedy")})
	spec := newFixture(t, server.Options{Engine: open("specexec")})
	ctx := context.Background()
	for _, seed := range []int64{-1, 5} {
		p := completionParams("Lily and Tom", 48)
		if seed >= 0 {
			p.Seed, p.Temperature, p.TopP = openai.Int(seed), openai.Float(0.8), openai.Float(0.95)
		}
		want, err := plain.client.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got, err := spec.client.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Choices[0].Text != want.Choices[0].Text {
			t.Fatalf("seed %d: speculative %q, plain %q", seed, got.Choices[0].Text, want.Choices[0].Text)
		}
		st := spec.client.Completions.NewStreaming(ctx, p)
		var text strings.Builder
		for st.Next() {
			for _, c := range st.Current().Choices {
				text.WriteString(c.Text)
			}
		}
		if err := st.Err(); err != nil || text.String() != want.Choices[0].Text {
			t.Fatalf("seed %d streamed: %q (%v), plain %q", seed, text.String(), err, want.Choices[0].Text)
		}
	}
	p := completionParams("Lily and Tom", 48)
	p.Stop = openai.CompletionNewParamsStopUnion{OfString: openai.String("park")}
	r, err := spec.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].Text != " were playing in the " || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("stop at park: %q (%s)", r.Choices[0].Text, r.Choices[0].FinishReason)
	}
	p.Logprobs = openai.Int(2)
	_, err = spec.client.Completions.New(ctx, p)
	apiErr(t, err, 400, "logprobs", "")
}
