package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/server"
)

// A chat's next turn repeats the last one: its request reports the first
// turn's prompt and answer as cached (usage.prompt_tokens_details, streamed
// usage too), gets the text the engine gives it cold, and /metrics counts
// the hits.
func TestNextTurnCachedTokens(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	first := strings.Repeat("the little dog ran to the park and saw a big red ball ", 6)
	r1, err := f.client.Completions.New(ctx, completionParams(first, 20))
	if err != nil {
		t.Fatal(err)
	}
	if c := r1.Usage.PromptTokensDetails.CachedTokens; c != 0 {
		t.Fatalf("first turn: %d cached tokens on an empty cache", c)
	}
	second := first + r1.Choices[0].Text + " and then"
	r2, err := f.client.Completions.New(ctx, completionParams(second, 20))
	if err != nil {
		t.Fatal(err)
	}
	// The first turn's full pages are cached, its answer's too: at least
	// the whole pages of its prompt (16 tokens a page).
	if c := r2.Usage.PromptTokensDetails.CachedTokens; c < r1.Usage.PromptTokens/16*16 || c >= r2.Usage.PromptTokens {
		t.Fatalf("second turn: %d cached of %d prompt tokens; the first turn had %d prompt and %d completion tokens", c, r2.Usage.PromptTokens, r1.Usage.PromptTokens, r1.Usage.CompletionTokens)
	}
	t.Logf("first turn %d+%d tokens; second turn %d prompt tokens, %d cached", r1.Usage.PromptTokens, r1.Usage.CompletionTokens, r2.Usage.PromptTokens, r2.Usage.PromptTokensDetails.CachedTokens)
	cold := complete(t, engine(t, synthModel(t), 1, 20), sluice.Request{Prompt: second, MaxNewTokens: 20})
	if r2.Choices[0].Text != cold.Completion {
		t.Fatalf("second turn: %q, cold engine %q", r2.Choices[0].Text, cold.Completion)
	}
	p := completionParams(second, 20)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	st := f.client.Completions.NewStreaming(ctx, p)
	var u openai.CompletionUsage
	for st.Next() {
		if c := st.Current(); c.Usage.TotalTokens > 0 {
			u = c.Usage
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if u.PromptTokensDetails.CachedTokens < r2.Usage.PromptTokensDetails.CachedTokens {
		t.Fatalf("streamed repeat of the second turn: usage %+v", u)
	}
	req, _ := http.NewRequest("GET", f.ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"sluice_prefix_cache_lookups_total 3", "sluice_prefix_cache_hits_total 2", "sluice_prefix_cache_hit_tokens_total ", "sluice_prefix_cache_bytes "} {
		if !strings.Contains(string(b), m) {
			t.Fatalf("metrics lack %q:\n%s", m, b)
		}
	}
}
