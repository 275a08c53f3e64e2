package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/stages"
)

type benchStats struct {
	Median, Min, Max float64
}

type benchReport struct {
	Model        string             `json:"model"`
	Kernels      string             `json:"kernels"`
	Threads      int                `json:"threads"`
	PromptTokens int                `json:"prompt_tokens"`
	GenTokens    int                `json:"gen_tokens"`
	Runs         int                `json:"runs"`
	PrefillTokS  float64            `json:"prefill_tok_s"`
	DecodeTokS   float64            `json:"decode_tok_s"`
	Prefill      benchStats         `json:"prefill"`
	Decode       benchStats         `json:"decode"`
	PeakRSSBytes int64              `json:"peak_rss_bytes"`
	BusyShare    map[string]float64 `json:"stage_busy_share"`
}

func stats(xs []float64) benchStats {
	s := slices.Clone(xs)
	slices.Sort(s)
	return benchStats{Median: s[len(s)/2], Min: s[0], Max: s[len(s)-1]}
}

// cmdBench measures prefill and decode through the same graph generate uses:
// random prompt tokens (fixed seed), greedy decoding that ignores stop tokens.
func cmdBench(ctx context.Context, e *env, args []string) error {
	fs := e.flags("bench")
	mf := addModelFlags(fs, "m")
	promptTokens := fs.Int("prompt-tokens", 512, "prompt length in tokens (prefill)")
	genTokens := fs.Int("gen-tokens", 128, "tokens to generate (decode)")
	runs := fs.Int("runs", 5, "runs; figures are the median, min and max")
	asJSON := fs.Bool("json", false, "print one JSON object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the runs to this file")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *promptTokens < 1 || *genTokens < 1 || *runs < 1 {
		return fmt.Errorf("bench: --prompt-tokens, --gen-tokens and --runs must be ≥ 1: %w", errUsage)
	}
	p, err := pipelines.Preset("greedy")
	if err != nil {
		return err
	}
	mf.apply(p)
	l, err := loadModel(ctx, e, p)
	if err != nil {
		return err
	}
	defer l.Close()
	a := l.Model.Arch()
	if *promptTokens+*genTokens > a.Context {
		return fmt.Errorf("bench: %d prompt + %d generated tokens exceed the model's context of %d", *promptTokens, *genTokens, a.Context)
	}
	o := p.EngineOptions()
	o.MaxNewTokens, o.NoStop, o.PrefillChunk, o.MaxSeqs = *genTokens, true, *promptTokens, 1
	o.Context = *promptTokens + *genTokens
	rng := rand.New(rand.NewPCG(1, 2))
	prompt := make([]int32, *promptTokens)
	for i := range prompt {
		prompt[i] = int32(rng.IntN(a.Vocab))
	}
	var prefill, dec []float64
	busy := map[string]time.Duration{}
	var total time.Duration
	for range *runs {
		eng, err := decode.New(l, o)
		if err != nil {
			return err
		}
		var res stages.Result
		g, err := pipelines.Build(p, pipelines.BuildOptions{
			Engine: eng,
			Requests: func(ctx context.Context, emit graph.Emit[decode.Request]) error {
				return emit(ctx, decode.Request{Tokens: prompt})
			},
			Results: func(_ context.Context, r stages.Result) error { res = r; return nil },
			Logger:  e.log,
		})
		if err != nil {
			return err
		}
		if err := g.Run(ctx); err != nil {
			return err
		}
		s := res.Seq
		if s == nil || s.Err != nil {
			return fmt.Errorf("bench: generation failed: %v", s.Err)
		}
		prefill = append(prefill, float64(len(prompt))/s.FirstToken.Sub(s.Start).Seconds())
		// The first token comes with the prefill; decode is the rest.
		dec = append(dec, float64(s.Generated()-1)/s.End.Sub(s.FirstToken).Seconds())
		for _, st := range g.Stats() {
			busy[st.Name] += st.Busy
			total += st.Busy
		}
	}
	r := benchReport{
		Model: p.Model.Path, Kernels: kernels.Impl(), Threads: l.Pool.Threads(), PromptTokens: *promptTokens, GenTokens: *genTokens, Runs: *runs,
		Prefill: stats(prefill), Decode: stats(dec), PeakRSSBytes: peakRSS(), BusyShare: map[string]float64{},
	}
	r.PrefillTokS, r.DecodeTokS = r.Prefill.Median, r.Decode.Median
	for k, v := range busy {
		if total > 0 {
			r.BusyShare[k] = float64(v) / float64(total)
		}
	}
	if *asJSON {
		return json.NewEncoder(e.stdout).Encode(r)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "model\t%s (%s kernels, %d threads)\n", r.Model, r.Kernels, r.Threads)
	fmt.Fprintf(tw, "prefill\t%.1f tok/s\t(min %.1f, max %.1f; %d tokens, %d runs)\n", r.Prefill.Median, r.Prefill.Min, r.Prefill.Max, r.PromptTokens, r.Runs)
	fmt.Fprintf(tw, "decode\t%.1f tok/s\t(min %.1f, max %.1f; %d tokens)\n", r.Decode.Median, r.Decode.Min, r.Decode.Max, r.GenTokens)
	fmt.Fprintf(tw, "peak rss\t%s\n", humanBytes(r.PeakRSSBytes))
	names := make([]string, 0, len(r.BusyShare))
	for k := range r.BusyShare {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int {
		if r.BusyShare[a] > r.BusyShare[b] {
			return -1
		}
		return 1
	})
	for _, k := range names[:min(len(names), 8)] {
		fmt.Fprintf(tw, "busy %s\t%.1f%%\n", k, 100*r.BusyShare[k])
	}
	return tw.Flush()
}

// peakRSS reads VmHWM from /proc (0 where unavailable).
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
