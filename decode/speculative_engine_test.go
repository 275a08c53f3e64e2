package decode_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
)

// Same seed, same text: SpecExec at budgets 8, 64, 512 and auto gives text
// byte-identical to plain decoding, greedy and for 20 seeds at temperature 0.8
// with top-p 0.95, at 1 and 2 threads; chain and lookup are identical under
// greedy. Every (prompt, seed) is one request, so one engine per setting runs
// them all in its continuous batch.
func TestSpecExecSameText(t *testing.T) {
	prompts := []string{"", "Lily and Tom"}
	auto := int(pipelines.AutoBudget)
	nSeeds, budgets := 20, []int{8, 64, 512, auto}
	// The whole grid in the default build; the generic (purego) and archsimd
	// builds, and -short, check a corner of it.
	if impl := kernels.Impl(); testing.Short() || impl == "generic" || strings.Contains(impl, "archsimd") {
		nSeeds, budgets = 3, []int{8, 64, auto}
	}
	type job struct {
		prompt   string
		sampling *sample.Options // nil: greedy
	}
	var jobs []job
	for _, pr := range prompts {
		jobs = append(jobs, job{pr, nil})
		for s := range uint64(nSeeds) {
			jobs = append(jobs, job{pr, &sample.Options{Temperature: 0.8, TopP: 0.95, Seed: s + 1}})
		}
	}
	run := func(t *testing.T, e *sluice.Engine, greedyOnly bool) []sluice.Result {
		res := make([]sluice.Result, len(jobs))
		var wg sync.WaitGroup
		for i, j := range jobs {
			if greedyOnly && j.sampling != nil {
				continue
			}
			wg.Add(1)
			req := sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: j.prompt, Sampling: j.sampling}
			if err := e.Submit(context.Background(), req, func(r sluice.Result) { res[i] = r; wg.Done() }); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		for i, r := range res {
			if r.Err != nil {
				t.Fatalf("request %d: %v", i, r.Err)
			}
		}
		return res
	}
	for _, threads := range []int{1, 2} {
		l := enginetest.Stories(t, threads)
		want := run(t, enginetest.Plain(t, l, 0, 0), false)
		for _, budget := range budgets {
			e := enginetest.Spec(t, "specexec", 0, 0, budget, threads)
			got := run(t, e, false)
			for i, j := range jobs {
				if got[i].Text != want[i].Text {
					t.Fatalf("threads=%d budget=%d prompt %q sampling %+v:\nspecexec %q\n   plain %q", threads, budget, j.prompt, j.sampling, got[i].Text, want[i].Text)
				}
			}
			st := e.SpecStats()
			if st.Rounds == 0 || st.TokensPerPass() <= 1 {
				t.Fatalf("threads=%d budget=%d: %d rounds, %.2f tokens per target pass: the draft did nothing", threads, budget, st.Rounds, st.TokensPerPass())
			}
			// auto probes several budgets before it chooses; a fixed budget
			// is the only one used.
			if budget == auto && len(st.Budgets) < 2 || budget != auto && (len(st.Budgets) != 1 || st.Budgets[budget] != st.Rounds) {
				t.Fatalf("threads=%d budget=%d: rounds by budget %v", threads, budget, st.Budgets)
			}
			if budget == auto {
				t.Logf("threads=%d auto: rounds by budget %v, last %d", threads, st.Budgets, st.Budget)
			}
			e.Close()
		}
		for _, mode := range []string{"chain", "lookup"} {
			var e *sluice.Engine
			if mode == "chain" {
				e = enginetest.Spec(t, "chain", 0, 0, 0, threads)
			} else {
				e = enginetest.Lookup(t, l)
			}
			got := run(t, e, true)
			for i, j := range jobs {
				if j.sampling == nil && got[i].Text != want[i].Text {
					t.Fatalf("%s greedy, threads=%d: prompt %q:\n %s %q\n plain %q", mode, threads, j.prompt, mode, got[i].Text, want[i].Text)
				}
			}
			e.Close()
		}
	}
}
