package session_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/tensor"
)

// Request.StopTokens end a request like EOS: the completion stops before the
// first of them, with finish reason stop.
func TestStopTokens(t *testing.T) {
	l := enginetest.Synth(t, 1, tensor.Q8_0, 0)
	e := enginetest.Engine(t, l, enginetest.Pipeline(t, 0, 2, 16, 12))
	ctx := context.Background()
	full, err := e.Complete(ctx, sluice.Request{Prompt: "once upon a time"})
	if err != nil {
		t.Fatal(err)
	}
	gen := full.Tokens[full.PromptTokens:]
	if len(gen) < 4 {
		t.Fatalf("only %d tokens generated", len(gen))
	}
	stop := gen[3]
	at := slices.Index(gen, stop) // the first occurrence ends it
	r, err := e.Complete(ctx, sluice.Request{Prompt: "once upon a time", StopTokens: []int32{-5, stop}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Finish != sluice.FinishStop || !slices.Equal(r.Tokens, full.Tokens[:full.PromptTokens+at]) {
		t.Fatalf("stop at %d: finish %q, tokens %v; want stop and %v", stop, r.Finish, r.Tokens, full.Tokens[:full.PromptTokens+at])
	}
}
