package sluice_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
)

// specEngine is stories260K with llama2xs-260k as the draft, under the
// specexec or chain preset with the given sampler and tree settings.
func specEngine(t *testing.T, preset string, temp float64, seed uint64, budget, threads int) *sluice.Engine {
	t.Helper()
	dir := testutil.Models(t)
	p, err := pipelines.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 16, 32
	if temp > 0 {
		*p.Sampler() = *pipelines.DefaultSampleParams()
		p.Sampler().Temperature, p.Sampler().TopP, p.Sampler().Seed = temp, 0.95, &seed
	}
	for i := range p.Stages {
		if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok && budget > 0 {
			dp.Budget = budget
		}
	}
	p.Model.Threads = threads
	p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: threads}
	e, err := sluice.Open(context.Background(), sluice.Options{
		Pipeline: p,
		Model:    filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func plainEngine(t *testing.T, l *model.Loaded, temp float64, seed uint64) *sluice.Engine {
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 16, 32
	if temp > 0 {
		*p.Sampler() = *pipelines.DefaultSampleParams()
		p.Sampler().Temperature, p.Sampler().TopP, p.Sampler().Seed = temp, 0.95, &seed
	}
	return engine(t, l, p)
}

// Same seed, same text: SpecExec at budgets 8, 64 and 512 gives text
// byte-identical to plain decoding, greedy and for 20 seeds at temperature 0.8
// with top-p 0.95, at 1 and 2 threads; chain and lookup are identical under
// greedy. Every (prompt, seed) is one request, so one engine per setting runs
// them all in its continuous batch.
func TestSpecExecSameText(t *testing.T) {
	prompts := []string{"", "Lily and Tom"}
	nSeeds, budgets := 20, []int{8, 64, 512}
	// The whole grid in the default build; the generic (purego) and archsimd
	// builds, and -short, check a corner of it.
	if impl := kernels.Impl(); testing.Short() || impl == "generic" || strings.Contains(impl, "archsimd") {
		nSeeds, budgets = 3, []int{8, 64}
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
		l := stories(t, threads)
		want := run(t, plainEngine(t, l, 0, 0), false)
		for _, budget := range budgets {
			e := specEngine(t, "specexec", 0, 0, budget, threads)
			got := run(t, e, false)
			for i, j := range jobs {
				if got[i].Text != want[i].Text {
					t.Fatalf("threads=%d budget=%d prompt %q sampling %+v:\nspecexec %q\n   plain %q", threads, budget, j.prompt, j.sampling, got[i].Text, want[i].Text)
				}
			}
			if st := e.SpecStats(); st.Rounds == 0 || st.TokensPerPass() <= 1 {
				t.Fatalf("threads=%d budget=%d: %d rounds, %.2f tokens per target pass: the draft did nothing", threads, budget, st.Rounds, st.TokensPerPass())
			}
			e.Close()
		}
		for _, mode := range []string{"chain", "lookup"} {
			var e *sluice.Engine
			if mode == "chain" {
				e = specEngine(t, "chain", 0, 0, 0, threads)
			} else {
				e = lookupEngine(t, l)
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

// lookupEngine is prompt-lookup decoding (no draft model) on l, greedy.
func lookupEngine(t *testing.T, l *model.Loaded) *sluice.Engine {
	p, err := pipelines.Preset("chain")
	if err != nil {
		t.Fatal(err)
	}
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 16, 32
	for i := range p.Stages {
		if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok {
			dp.Mode, dp.DraftMax = "lookup", 4
		}
	}
	return engine(t, l, p)
}
