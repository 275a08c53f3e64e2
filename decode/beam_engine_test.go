package decode_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sample"
)

// refBeam runs beamsearch.Search the slow way: every live beam's whole prefix
// recomputed by a plain engine for each step (batch-invariant logits, so
// they are the beam engine's bit for bit), no KV forks.
func refBeam(t *testing.T, plain *sluice.Engine, prompt []int32, o beamsearch.Options) []beamsearch.Hypothesis {
	t.Helper()
	b, err := beamsearch.New(o)
	if err != nil {
		t.Fatal(err)
	}
	live := [][]int32{slices.Clone(prompt)}
	for {
		lps := make([][]float32, len(live))
		for i, pre := range live {
			var last []float32
			if _, err := plain.Complete(context.Background(), sluice.Request{Tokens: pre, MaxNewTokens: 1,
				OnLogits: func(_ int32, lg []float32) { last = slices.Clone(lg) }}); err != nil {
				t.Fatal(err)
			}
			lps[i] = logSoftmax(last)
		}
		parents, tokens, done, err := b.Step(lps)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return b.Results()
		}
		next := make([][]int32, len(parents))
		for j, p := range parents {
			next[j] = append(slices.Clone(live[p]), tokens[j])
		}
		live = next
	}
}

func logSoftmax(x []float32) []float32 {
	out := make([]float32, len(x))
	sample.LogSoftmax(out, x)
	return out
}

// Beam search in the engine (a row per live beam, KV sequences forked
// copy-on-write) returns exactly what beamsearch.Search returns over the same
// model's logits recomputed from scratch, for 4 and 8 beams and each
// early_stopping mode; num_beams 1 is greedy; other requests in the same
// batch are untouched.
func TestBeamSearchEngine(t *testing.T) {
	l := enginetest.Stories(t, 2)
	plain := enginetest.Engine(t, l, enginetest.Pipeline(t, 0, 4, 64, 0))
	eng := enginetest.Beam(t, l, 9)
	prompt := []int32{1, 317, 269} // BOS "Lily and"
	const n = 12
	greedy, err := plain.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	one, err := eng.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: n, Beam: &beamsearch.Options{NumBeams: 1, LengthPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(one.Tokens, greedy.Tokens) {
		t.Fatalf("num_beams 1: %v, greedy %v", one.Tokens, greedy.Tokens)
	}
	for _, k := range []int{4, 8} {
		for _, es := range []beamsearch.EarlyStopping{beamsearch.EarlyStopHeuristic, beamsearch.EarlyStopTrue, beamsearch.EarlyStopNever} {
			t.Run(fmt.Sprintf("beams=%d/early=%d", k, es), func(t *testing.T) {
				o := beamsearch.Options{NumBeams: k, NumReturn: min(k, 3), LengthPenalty: 1, EarlyStopping: es, MaxNewTokens: n}
				// A plain request beside the beam search must not notice it.
				side := make(chan sluice.Result, 1)
				if err := eng.Submit(context.Background(), sluice.Request{ID: "side", Tokens: prompt, MaxNewTokens: n}, func(r sluice.Result) { side <- r }); err != nil {
					t.Fatal(err)
				}
				got, err := eng.Complete(context.Background(), sluice.Request{ID: "beam", Tokens: prompt, Beam: &o})
				if err != nil {
					t.Fatal(err)
				}
				if r := <-side; r.Text != greedy.Text {
					t.Fatalf("plain request beside the beam search: %q, want %q", r.Text, greedy.Text)
				}
				ro := o
				ro.Vocab, ro.EOS = l.Model.Arch().Vocab, []int32{l.Tokenizer.BOS(), l.Tokenizer.EOS()} // session.EndIDs: where plain decoding stops
				want := refBeam(t, plain, prompt, ro)
				if len(got.Beams) != len(want) {
					t.Fatalf("%d sequences returned, the reference %d", len(got.Beams), len(want))
				}
				for i := range want {
					if !slices.Equal(got.Beams[i].Tokens, want[i].Tokens) || got.Beams[i].Score != want[i].Score {
						t.Fatalf("sequence %d: %v (score %v), reference %v (score %v)", i, got.Beams[i].Tokens, got.Beams[i].Score, want[i].Tokens, want[i].Score)
					}
				}
				// The next step returns the lent beam sequences; after one more
				// request no KV page may be left in use.
				if _, err := eng.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: 1}); err != nil {
					t.Fatal(err)
				}
				if st := eng.Stats(); st.Cache.PagesInUse != 0 {
					t.Fatalf("after the beam search: %d KV pages in use, want 0", st.Cache.PagesInUse)
				}
			})
		}
	}
}
