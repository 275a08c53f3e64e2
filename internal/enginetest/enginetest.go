// Package enginetest builds the engines the tests of many packages run:
// the tiny synthetic model and stories260K loaded, the presets set up for a
// test, speculative and beam engines, and a way to submit many prompts at
// once. It imports the root package, so only external test packages
// (package x_test) may use it.
package enginetest

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/testutil/synthfile"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// Load loads a model for the test and closes it when the test ends.
func Load(t testing.TB, o model.LoadOptions) *model.Loaded {
	t.Helper()
	l, err := model.Load(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Synth loads the tiny synthetic llama (seed 3) with the given kernel
// threads and weight type; ctx > 0 sets the model's context (else 256).
func Synth(t testing.TB, threads int, dt tensor.DType, ctx int) *model.Loaded {
	t.Helper()
	return Load(t, model.LoadOptions{Path: synthfile.Path(t, synthfile.Options{DType: dt, Seed: 3, Context: ctx}), Threads: threads})
}

// Stories loads stories260K (llama2.c's checkpoint and tokenizer), or skips
// the test when the models are absent.
func Stories(t testing.TB, threads int) *model.Loaded {
	t.Helper()
	dir := testutil.Models(t)
	return Load(t, model.LoadOptions{
		Path: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: threads,
	})
}

// Pipeline is the greedy preset with the scheduler set as given, or with
// temp > 0 the sampling defaults at that temperature and seed 11.
func Pipeline(t testing.TB, temp float64, inFlight, chunk, maxNew int) *pipelines.Pipeline {
	t.Helper()
	p := pipelines.Greedy()
	sc := p.Scheduler()
	sc.MaxInFlight, sc.PrefillChunk, sc.MaxNewTokens = inFlight, chunk, maxNew
	if temp > 0 {
		seed := uint64(11)
		*p.Sampler() = *pipelines.DefaultSampleParams()
		p.Sampler().Temperature, p.Sampler().Seed = temp, &seed
	}
	return p
}

// Engine starts an engine of pipeline p over l, closed when the test ends.
func Engine(t testing.TB, l *model.Loaded, p *pipelines.Pipeline) *sluice.Engine {
	t.Helper()
	e, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// Plain is l under the greedy preset (16 in flight, 32 new tokens), or with
// temp > 0 the sampling defaults at temp with top-p 0.95 and the seed.
func Plain(t testing.TB, l *model.Loaded, temp float64, seed uint64) *sluice.Engine {
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 16, 32
	if temp > 0 {
		*p.Sampler() = *pipelines.DefaultSampleParams()
		p.Sampler().Temperature, p.Sampler().TopP, p.Sampler().Seed = temp, 0.95, &seed
	}
	return Engine(t, l, p)
}

// Spec is stories260K with llama2xs-260k as the draft, under the specexec
// or chain preset with the given sampler and tree budget (0: the preset's;
// pipelines.AutoBudget: auto).
func Spec(t testing.TB, preset string, temp float64, seed uint64, budget, threads int) *sluice.Engine {
	t.Helper()
	return SpecEdit(t, preset, temp, seed, budget, threads, nil)
}

// SpecEdit is Spec with edit (when not nil) applied to the pipeline last.
func SpecEdit(t testing.TB, preset string, temp float64, seed uint64, budget, threads int, edit func(*pipelines.Pipeline)) *sluice.Engine {
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
		if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok && budget != 0 {
			dp.Budget = pipelines.TreeBudget(budget)
		}
	}
	p.Model.Threads = threads
	p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: threads}
	if edit != nil {
		edit(p)
	}
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

// Lookup is prompt-lookup decoding (no draft model) on l, greedy.
func Lookup(t testing.TB, l *model.Loaded) *sluice.Engine { return LookupEdit(t, l, nil) }

// LookupEdit is Lookup with edit (when not nil) applied to the pipeline last.
func LookupEdit(t testing.TB, l *model.Loaded, edit func(*pipelines.Pipeline)) *sluice.Engine {
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
	if edit != nil {
		edit(p)
	}
	return Engine(t, l, p)
}

// Beam is l under the beam preset with inFlight sequences.
func Beam(t testing.TB, l *model.Loaded, inFlight int) *sluice.Engine {
	p, err := pipelines.Preset("beam")
	if err != nil {
		t.Fatal(err)
	}
	p.Scheduler().MaxInFlight = inFlight
	return Engine(t, l, p)
}

// Prompts32 are 32 prompts of different lengths (1 to ~40 tokens).
func Prompts32() []string {
	words := strings.Fields("once upon a time there was a little girl named Lily who liked to play in the park with her dog and her friend Tom every day after school when the sun was warm")
	var out []string
	for i := range 32 {
		out = append(out, strings.Join(words[:(i*7)%len(words)], " "))
	}
	return out
}

// RunAll submits every prompt at once and returns the results by index.
func RunAll(t testing.TB, e *sluice.Engine, prompts []string) []sluice.Result {
	t.Helper()
	res := make([]sluice.Result, len(prompts))
	var wg sync.WaitGroup
	for i, pr := range prompts {
		wg.Add(1)
		req := sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: pr}
		if err := e.Submit(context.Background(), req, func(r sluice.Result) { res[i] = r; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("prompt %d: %v", i, r.Err)
		}
	}
	return res
}
