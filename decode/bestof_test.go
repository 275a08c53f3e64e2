package decode_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
)

func storiesEngine(t *testing.T, inFlight int) (*sluice.Engine, *model.Loaded) {
	t.Helper()
	dir := testutil.Models(t)
	l, err := model.Load(context.Background(), model.LoadOptions{
		Path: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = inFlight, 24
	e, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, l
}

// best_of: the k candidates come back ranked by the sum of their tokens'
// log-probabilities, each sum equal to the one recomputed along the
// candidate's tokens by plain decoding (every prefix's logits, log-softmax
// in float64); the candidate that draws as plain decoding does is plain
// decoding's text; the result does not depend on what else runs in the
// batch; best_of = 1 is plain decoding.
func TestBestOf(t *testing.T) {
	e, _ := storiesEngine(t, 16)
	ctx := context.Background()
	so := &sample.Options{Temperature: 0.9, Seed: 3}
	req := func(k int, index uint64) sluice.Request {
		return sluice.Request{Prompt: "Lily and Tom", Index: index, Sampling: so, BestOf: k, MaxNewTokens: 16}
	}
	plain, err := e.Complete(ctx, req(1, 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Beams) != 0 {
		t.Fatalf("best_of = 1 returned %d candidates, want plain decoding", len(plain.Beams))
	}
	alone, err := e.Complete(ctx, req(4, 7))
	if err != nil {
		t.Fatal(err)
	}
	if len(alone.Beams) != 4 {
		t.Fatalf("best_of = 4 returned %d candidates", len(alone.Beams))
	}
	gen := plain.Tokens[plain.PromptTokens:]
	found := false
	for i, h := range alone.Beams {
		if i > 0 && h.Score > alone.Beams[i-1].Score {
			t.Errorf("candidates out of order: %v after %v", h.Score, alone.Beams[i-1].Score)
		}
		toks := h.Tokens
		if n := len(toks); n > 0 && n < 16 && len(toks) == len(gen)+1 && slices.Equal(toks[:n-1], gen) {
			found = true // plain decoding's, with the stop token that ended it
		}
		if slices.Equal(toks, gen) {
			found = true
		}
		// The score, recomputed along the candidate's tokens.
		var sum float64
		hist := slices.Clone(plain.Tokens[:plain.PromptTokens])
		for _, tok := range toks {
			var last []float32
			if _, err := e.Complete(ctx, sluice.Request{Tokens: hist, MaxNewTokens: 1,
				OnLogits: func(_ int32, lg []float32) { last = slices.Clone(lg) }}); err != nil {
				t.Fatal(err)
			}
			sum += logSoftmax64(last, tok)
			hist = append(hist, tok)
		}
		if d := sum - h.Score; d > 1e-9 || d < -1e-9 {
			t.Errorf("candidate %d %v: score %v, recomputed %v", i, toks, h.Score, sum)
		}
	}
	if !found {
		t.Errorf("no candidate is plain decoding's %v: %v", gen, alone.Beams)
	}
	if alone.Text != alone.Beams[0].Text && alone.Completion != alone.Beams[0].Text {
		t.Errorf("the result's text %q is not the best candidate's %q", alone.Completion, alone.Beams[0].Text)
	}
	// Among 8 other requests (best_of and plain), the same candidates.
	var wg sync.WaitGroup
	res := make([]sluice.Result, 9)
	for i := range res {
		wg.Go(func() {
			k, index := 1+i%2, uint64(100+i) // 16 KV sequences in all
			if i == 4 {
				k, index = 4, 7
			}
			r, err := e.Complete(ctx, req(k, index))
			if err != nil {
				t.Error(err)
			}
			res[i] = r
		})
	}
	wg.Wait()
	if len(res[4].Beams) != len(alone.Beams) {
		t.Fatalf("batched: %d candidates, alone %d", len(res[4].Beams), len(alone.Beams))
	}
	for i := range alone.Beams {
		if !slices.Equal(res[4].Beams[i].Tokens, alone.Beams[i].Tokens) || res[4].Beams[i].Score != alone.Beams[i].Score {
			t.Errorf("candidate %d batched %v (%v), alone %v (%v)", i, res[4].Beams[i].Tokens, res[4].Beams[i].Score, alone.Beams[i].Tokens, alone.Beams[i].Score)
		}
	}
}

// logSoftmax64 is ln softmax(x)[tok], all in float64.
func logSoftmax64(x []float32, tok int32) float64 {
	mx := float64(x[0])
	for _, v := range x {
		mx = max(mx, float64(v))
	}
	var s float64
	for _, v := range x {
		s += exp(float64(v) - mx)
	}
	return float64(x[tok]) - mx - log(s)
}

var (
	exp = math.Exp
	log = math.Log
)
