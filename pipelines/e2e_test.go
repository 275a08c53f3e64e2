package pipelines_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/model/ref"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/stages"
)

// runGraph runs prompts through the greedy preset and records every row of
// logits the graph computed, per request, by position.
func runGraph(t *testing.T, l *model.Loaded, prompts []string, n, inFlight int) (map[string]stages.Result, map[string]map[int32][]float32) {
	t.Helper()
	p, err := pipelines.Preset("greedy")
	if err != nil {
		t.Fatal(err)
	}
	o := p.EngineOptions()
	o.MaxNewTokens, o.MaxSeqs, o.AllLogits, o.PrefillChunk = n, inFlight, true, 3
	var mu sync.Mutex
	logits := map[string]map[int32][]float32{}
	o.OnLogits = func(s *decode.Seq, pos int32, lg []float32) {
		mu.Lock()
		defer mu.Unlock()
		if logits[s.Req.ID] == nil {
			logits[s.Req.ID] = map[int32][]float32{}
		}
		logits[s.Req.ID][pos] = slices.Clone(lg)
	}
	eng, err := decode.New(l, o)
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]stages.Result{}
	g, err := pipelines.Build(p, pipelines.BuildOptions{
		Engine: eng,
		Requests: func(ctx context.Context, emit graph.Emit[decode.Request]) error {
			for i, pr := range prompts {
				if err := emit(ctx, decode.Request{ID: pr, Index: uint64(i), Prompt: pr}); err != nil {
					return err
				}
			}
			return nil
		},
		Results: func(_ context.Context, r stages.Result) error { results[r.Seq.Req.ID] = r; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	return results, logits
}

// The graph pipeline (paged KV cache, prefill chunks, several sequences in
// flight at different layers) and model/ref (run.c in Go, one token at a time)
// give bit-identical logits at every position; with a SIMD kernel build the
// promise is a tolerance and identical tokens.
func TestGraphMatchesRef(t *testing.T) {
	dir := testutil.Models(t)
	for _, tc := range []struct{ name, model, tok string }{
		{"bin", "stories260K/stories260K.bin", "stories260K/tok512.bin"},
		{"gguf", "stories260K-gguf/stories260K.gguf", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lo := model.LoadOptions{Path: filepath.Join(dir, tc.model), Threads: 2}
			if tc.tok != "" {
				lo.Tokenizer = filepath.Join(dir, tc.tok)
			}
			l, err := model.Load(t.Context(), lo)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			n := 256
			if testing.Short() {
				n = 40
			}
			prompts := []string{"", "Lily and Tom", "The cat sat on the mat."}
			results, logits := runGraph(t, l, prompts, n, 2)
			if tc.name == "bin" && !testing.Short() {
				want, err := os.ReadFile(filepath.Join(dir, "stories260K", "expected-greedy-256.txt"))
				if err != nil {
					t.Fatal(err)
				}
				if got := results[""].Text + "\n"; got != string(want) {
					t.Fatalf("graph greedy text differs from llama2.c's:\n got %q\nwant %q", got, want)
				}
			}
			exact := kernels.Impl() == "generic"
			for _, pr := range prompts {
				r := results[pr]
				if r.Seq.Err != nil {
					t.Fatal(r.Seq.Err)
				}
				tr, err := ref.New(t.Context(), l.Source, l.Store, 0)
				if err != nil {
					t.Fatal(err)
				}
				toks := r.Seq.Tokens
				for pos := range len(toks) - 1 {
					want, err := tr.Forward(toks[pos], pos)
					if err != nil {
						t.Fatal(err)
					}
					got, ok := logits[pr][int32(pos)]
					if !ok {
						t.Fatalf("prompt %q: no graph logits at position %d", pr, pos)
					}
					compare(t, pr, pos, want, got, exact)
				}
			}
		})
	}
}

func compare(t *testing.T, prompt string, pos int, want, got []float32, exact bool) {
	t.Helper()
	for i := range want {
		if exact && math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("prompt %q position %d logit %d: ref %v, graph %v (must be bit-identical with %s kernels)", prompt, pos, i, want[i], got[i], kernels.Impl())
		}
		if !exact && math.Abs(float64(want[i]-got[i])) > 1e-3*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("prompt %q position %d logit %d: ref %v, graph %v", prompt, pos, i, want[i], got[i])
		}
	}
}
