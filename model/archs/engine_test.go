package archs_test

import (
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/ref"
	"github.com/sluicehq/sluice/pipelines"
)

// Through the whole engine (three prompts in flight in one batch, prefill in
// chunks of 3), every position's logits of every architecture equal the
// oracle's: bit for bit on the generic kernels, within 1e-3 relative
// otherwise (F32 files).
func TestEngineMatchesRef(t *testing.T) {
	dir := t.TempDir()
	exact := kernels.Impl() == "generic"
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			path := c.write(t, dir, f32col)
			l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			p := pipelines.Greedy()
			sc := p.Scheduler()
			sc.MaxInFlight, sc.PrefillChunk, sc.MaxNewTokens, sc.StopAtEOS = 3, 3, 24, false
			e, err := sluice.New(l, sluice.Options{Pipeline: p})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompts := []string{"", "the dog", "once upon a time there was"}
			var mu sync.Mutex
			logits := map[string]map[int32][]float32{}
			res := map[string]sluice.Result{}
			for _, pr := range prompts {
				logits[pr] = map[int32][]float32{} // before any callback runs
			}
			var wg sync.WaitGroup
			for i, pr := range prompts {
				wg.Add(1)
				req := sluice.Request{ID: pr, Index: uint64(i), Prompt: pr, AllLogits: true,
					OnLogits: func(pos int32, lg []float32) { mu.Lock(); logits[pr][pos] = slices.Clone(lg); mu.Unlock() }}
				if err := e.Submit(t.Context(), req, func(r sluice.Result) { mu.Lock(); res[pr] = r; mu.Unlock(); wg.Done() }); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			for _, pr := range prompts {
				r := res[pr]
				if r.Err != nil {
					t.Fatal(r.Err)
				}
				if r.CompletionTokens != 24 {
					t.Fatalf("prompt %q: %d tokens generated, want 24", pr, r.CompletionTokens)
				}
				tr, err := ref.New(t.Context(), l.Source, l.Store, 0)
				if err != nil {
					t.Fatal(err)
				}
				for pos := range len(r.Tokens) - 1 {
					want, err := tr.Forward(r.Tokens[pos], pos)
					if err != nil {
						t.Fatal(err)
					}
					got, ok := logits[pr][int32(pos)]
					if !ok {
						t.Fatalf("prompt %q: no logits at position %d", pr, pos)
					}
					for i := range want {
						if exact && math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("prompt %q position %d logit %d: ref %v, engine %v (bit-identical with generic kernels)", pr, pos, i, want[i], got[i])
						}
						if !exact && math.Abs(float64(want[i]-got[i])) > 1e-3*(1+math.Abs(float64(want[i]))) {
							t.Fatalf("prompt %q position %d logit %d: ref %v, engine %v", pr, pos, i, want[i], got[i])
						}
					}
				}
			}
		})
	}
}
