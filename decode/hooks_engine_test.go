package decode_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sample"
)

// A beam search's OnToken sees the best hypothesis's tokens, in order, when
// the search ends (its text is the result's completion); speculative
// decoding's sees every accepted token. What a beam search or a speculative
// pipeline would ignore is refused, naming it: OnLogits there, a sampling
// temperature or a repeat penalty for beams.
func TestHooksOnBeamAndSpeculative(t *testing.T) {
	l := enginetest.Stories(t, 2)
	eng := enginetest.Beam(t, l, 4)
	prompt := []int32{l.Tokenizer.BOS(), 317, 269}
	beam := &beamsearch.Options{NumBeams: 3, LengthPenalty: 1}
	var toks []int32
	var text strings.Builder
	r, err := eng.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: 10, Beam: beam,
		OnToken: func(tok int32, s string) {
			if tok >= 0 {
				toks = append(toks, tok)
			}
			text.WriteString(s)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(toks, r.Tokens[len(prompt):]) || text.String() != r.Completion || len(toks) == 0 {
		t.Errorf("beam OnToken saw %v %q; the result is %v %q", toks, text.String(), r.Tokens[len(prompt):], r.Completion)
	}

	sp := enginetest.Spec(t, "specexec", 0, 0, 16, 2)
	toks = toks[:0]
	r, err = sp.Complete(context.Background(), sluice.Request{Prompt: "Lily and", MaxNewTokens: 20, OnToken: func(tok int32, _ string) { toks = append(toks, tok) }})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(toks, r.Tokens[r.PromptTokens:]) || len(toks) != 20 {
		t.Errorf("speculative OnToken saw %v; the result is %v", toks, r.Tokens[r.PromptTokens:])
	}

	onLogits := func(int32, []float32) {}
	for _, c := range []struct {
		name string
		eng  *sluice.Engine
		req  sluice.Request
		want string
	}{
		{"beam OnLogits", eng, sluice.Request{Tokens: prompt, Beam: beam, OnLogits: onLogits}, "OnLogits"},
		{"beam temperature", eng, sluice.Request{Tokens: prompt, Beam: beam, Sampling: &sample.Options{Temperature: 0.7}}, "temperature = 0.7"},
		{"beam repeat penalty", eng, sluice.Request{Tokens: prompt, Beam: beam, Sampling: &sample.Options{RepeatPenalty: 1.3}}, "repeat_penalty = 1.3"},
		{"greedy beam repeat penalty", eng, sluice.Request{Tokens: prompt, Beam: &beamsearch.Options{NumBeams: 1}, Sampling: &sample.Options{RepeatPenalty: 1.3}}, "repeat_penalty = 1.3"},
		{"speculative OnLogits", sp, sluice.Request{Prompt: "Lily", OnLogits: onLogits}, "verifies drafts"},
	} {
		r, err := c.eng.Complete(context.Background(), c.req)
		if err == nil {
			err = r.Err
		}
		if err == nil || !strings.Contains(err.Error(), c.want) || r.Finish != sluice.FinishError {
			t.Errorf("%s: %v (finish %s), want an error naming %q", c.name, err, r.Finish, c.want)
		}
	}
	// OnLogits of a plain request on the beam pipeline still sees every row.
	rows := 0
	if _, err := eng.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: 4, OnLogits: func(int32, []float32) { rows++ }}); err != nil || rows != 4 {
		t.Errorf("plain request on the beam pipeline: %d rows (%v), want 4", rows, err)
	}
}
