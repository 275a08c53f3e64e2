package sluice_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
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
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 4, 64
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
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 4, 64
	if temp > 0 {
		*p.Sampler() = *pipelines.DefaultSampleParams()
		p.Sampler().Temperature, p.Sampler().TopP, p.Sampler().Seed = temp, 0.95, &seed
	}
	return engine(t, l, p)
}

// Same seed, same text: SpecExec at budgets 8, 64 and 512 gives text
// byte-identical to plain decoding, greedy and at temperature 0.8 with top-p
// 0.95, at 1 and 2 threads; chain is identical under greedy.
func TestSpecExecSameText(t *testing.T) {
	prompts := []string{"", "Lily and Tom", "Once upon a time, there was a", "The cat"}
	seeds := []uint64{1, 2, 3}
	if !testing.Short() {
		seeds = nil
		for s := range uint64(20) {
			seeds = append(seeds, s+1)
		}
	}
	for _, threads := range []int{1, 2} {
		l := stories(t, threads)
		type cfg struct {
			temp float64
			seed uint64
		}
		cfgs := []cfg{{0, 0}}
		for _, s := range seeds {
			cfgs = append(cfgs, cfg{0.8, s})
		}
		for _, c := range cfgs {
			want := runAll(t, plainEngine(t, l, c.temp, c.seed), prompts, c.temp > 0)
			for _, budget := range []int{8, 64, 512} {
				if testing.Short() && budget == 512 {
					continue
				}
				name := fmt.Sprintf("threads=%d/temp=%g/seed=%d/budget=%d", threads, c.temp, c.seed, budget)
				e := specEngine(t, "specexec", c.temp, c.seed, budget, threads)
				got := runAll(t, e, prompts, c.temp > 0)
				for i := range prompts {
					if got[i].Text != want[i].Text {
						t.Fatalf("%s: prompt %q:\nspecexec %q\n   plain %q", name, prompts[i], got[i].Text, want[i].Text)
					}
				}
				if st := e.SpecStats(); st.Rounds == 0 || st.TokensPerPass() <= 1 {
					t.Fatalf("%s: %d rounds, %.2f tokens per target pass: the draft did nothing", name, st.Rounds, st.TokensPerPass())
				}
				e.Close()
			}
			if c.temp == 0 {
				for _, mode := range []string{"chain", "lookup"} {
					e := specEngine(t, "chain", 0, 0, 0, threads)
					if mode == "lookup" {
						e.Close()
						e = lookupEngine(t, l)
					}
					got := runAll(t, e, prompts, false)
					for i := range prompts {
						if got[i].Text != want[i].Text {
							t.Fatalf("%s greedy: prompt %q:\n %s %q\n plain %q", mode, prompts[i], mode, got[i].Text, want[i].Text)
						}
					}
				}
			}
		}
	}
}

// lookupEngine is prompt-lookup decoding (no draft model) on l, greedy.
func lookupEngine(t *testing.T, l *model.Loaded) *sluice.Engine {
	p, err := pipelines.Preset("chain")
	if err != nil {
		t.Fatal(err)
	}
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 4, 64
	for i := range p.Stages {
		if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok {
			dp.Mode, dp.DraftMax = "lookup", 4
		}
	}
	return engine(t, l, p)
}
