package sched_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
)

// sharedPrompts are n prompts that share a long opening (a "system prompt"
// of several KV pages) and differ after it.
func sharedPrompts(n int) []string {
	system := strings.Repeat("once upon a time there was a little girl named Lily who liked to play in the park with her dog. ", 3)
	ends := strings.Fields("Tom Lily the sun a dog her friend every day when school")
	out := make([]string, n)
	for i := range out {
		out[i] = system + strings.Join(ends[:1+i%len(ends)], " ")
	}
	return out
}

// prefixJob is one request of the identity tests.
type prefixJob struct {
	prompt   string
	sampling *sample.Options // nil: greedy
	beam     *beamsearch.Options
	noLogits bool // a speculative pipeline refuses OnLogits
}

// prefixOut is what a request produced: its result and a hash of the bits
// of every row of logits it saw.
type prefixOut struct {
	res    sluice.Result
	logits []uint64
}

// runJobs submits every job at once and returns the outputs by index.
func runJobs(t *testing.T, e *sluice.Engine, jobs []prefixJob) []prefixOut {
	t.Helper()
	out := make([]prefixOut, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		req := sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: j.prompt, Sampling: j.sampling, Beam: j.beam}
		if j.beam == nil && !j.noLogits {
			req.OnLogits = func(_ int32, lg []float32) { out[i].logits = append(out[i].logits, logitsHash(lg)) }
		}
		if err := e.Submit(context.Background(), req, func(r sluice.Result) { out[i].res = r; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, o := range out {
		if o.res.Err != nil {
			t.Fatalf("request %d: %v", i, o.res.Err)
		}
	}
	return out
}

func logitsHash(lg []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, x := range lg {
		u := math.Float32bits(x)
		b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		h.Write(b[:])
	}
	return h.Sum64()
}

// prefixPipeline is the greedy preset (sampling per request) with the
// prefix cache on or off.
func prefixPipeline(cache bool, inFlight int) *pipelines.Pipeline {
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = inFlight, 32
	p.Cache.NoPrefixCache = !cache
	return p
}

// Issue 22, must show 4: eight prompts sharing a four-page opening, each
// greedy and with two seeds at temperature 0.8, give the same text and
// logits bit for bit with the prefix cache as without it, at 1 and 2
// threads; with it, the requests after the first map the shared pages
// (cached_tokens) instead of computing them. A chat's next turn (the first
// answer plus a question) then maps the answer's pages too.
func TestPrefixCacheSameText(t *testing.T) {
	var jobs []prefixJob
	for _, pr := range sharedPrompts(8) {
		jobs = append(jobs, prefixJob{prompt: pr})
		for s := range uint64(2) {
			jobs = append(jobs, prefixJob{prompt: pr, sampling: &sample.Options{Temperature: 0.8, TopP: 0.95, Seed: s + 1}})
		}
	}
	for _, threads := range []int{1, 2} {
		l := enginetest.Stories(t, threads)
		want := runJobs(t, enginetest.Engine(t, l, prefixPipeline(false, 8)), jobs)
		e := enginetest.Engine(t, l, prefixPipeline(true, 8))
		got := runJobs(t, e, jobs)
		mapped := 0
		for i := range jobs {
			w, g := want[i], got[i]
			if g.res.Text != w.res.Text {
				t.Fatalf("threads=%d job %d: with the prefix cache %q, without %q", threads, i, g.res.Text, w.res.Text)
			}
			if !slices.Equal(g.logits, w.logits) {
				t.Fatalf("threads=%d job %d: logits differ from the cold run's (%d rows, %d rows)", threads, i, len(g.logits), len(w.logits))
			}
			if w.res.CachedTokens != 0 {
				t.Fatalf("threads=%d job %d: %d cached tokens with the cache off", threads, i, w.res.CachedTokens)
			}
			if g.res.CachedTokens >= 64 {
				mapped++
			}
		}
		if mapped < len(jobs)-1 {
			t.Fatalf("threads=%d: %d of %d requests mapped the shared 4 pages: the prefix cache did not serve them", threads, mapped, len(jobs))
		}
		st := e.Stats().Cache
		if st.PagesInUse != 0 || st.Prefix.HitTokens < int64(64*(len(jobs)-1)) {
			t.Fatalf("threads=%d: %d pages in use after the requests, prefix counters %+v", threads, st.PagesInUse, st.Prefix)
		}
		// The next turn of job 0's conversation: its prompt, its answer and
		// a question. The answer's full pages were published with it.
		first := got[0].res
		turn := append(slices.Clone(first.Tokens), l.Tokenizer.Encode(" and then", tokenizer.EncodeOptions{})...)
		r2, err := e.Complete(context.Background(), sluice.Request{Tokens: turn})
		if err != nil {
			t.Fatal(err)
		}
		cold, err := enginetest.Engine(t, l, prefixPipeline(false, 1)).Complete(context.Background(), sluice.Request{Tokens: turn})
		if err != nil {
			t.Fatal(err)
		}
		if r2.Text != cold.Text {
			t.Fatalf("threads=%d: next turn %q, cold %q", threads, r2.Text, cold.Text)
		}
		if wantMin := (len(first.Tokens) - 1) / 16 * 16; r2.CachedTokens < wantMin || r2.CachedTokens <= first.PromptTokens {
			t.Fatalf("threads=%d: next turn mapped %d tokens; the first turn held %d (prompt %d): want ≥ %d, past its prompt", threads, r2.CachedTokens, len(first.Tokens), first.PromptTokens, wantMin)
		}
	}
}

// Under a KV budget that spills, cached pages are frames like any other
// (and an idle page whose frame the budget evicts is dropped): the text is
// still the unbounded cold run's, requests still map the shared opening,
// and what stays in memory is within the budget.
func TestPrefixCacheUnderKVBudget(t *testing.T) {
	l := enginetest.Stories(t, 2)
	var jobs []prefixJob
	for _, pr := range sharedPrompts(12) {
		jobs = append(jobs, prefixJob{prompt: pr})
	}
	cold := prefixPipeline(false, 4)
	cold.Model.Context = 128
	want := runJobs(t, enginetest.Engine(t, l, cold), jobs)
	a := l.Model.Arch()
	p := prefixPipeline(true, 4)
	// A 128-token context (8 pages) and 30 frames (one layer of one page
	// each): a step pins up to 13, the rest is the budget's ristretto share,
	// far below the 4 sequences' and the cached pages' frames.
	p.Model.Context = 128
	frame := a.KVBytesPerToken() / int64(a.Layers) * 16
	p.Cache.KVBudget = 30 * frame
	p.Cache.SpillDir = t.TempDir()
	e := enginetest.Engine(t, l, p)
	got := runJobs(t, e, jobs)
	mapped := 0
	for i := range jobs {
		if got[i].res.Text != want[i].res.Text {
			t.Fatalf("job %d under the budget: %q, cold and unbounded %q", i, got[i].res.Text, want[i].res.Text)
		}
		if got[i].res.CachedTokens >= 64 {
			mapped++
		}
	}
	st := e.Stats().Cache
	t.Logf("budget %d bytes (%d frames): %d mapped; prefix %+v; spill: %d spilled, %d reloaded", st.Spill.Budget, st.Spill.Frames, mapped, st.Prefix, st.Spill.Spills, st.Spill.Reloads)
	if mapped < len(jobs)/2 {
		t.Fatalf("%d of %d requests mapped the shared opening under the budget", mapped, len(jobs))
	}
	if st.Spill.Budget == 0 || st.Spill.Spills == 0 || st.Spill.Resident > st.Spill.Frames {
		t.Fatalf("budget counters %+v: want a budget that spilled and at most its frames in memory", st.Spill)
	}
}

// Draft trees (SpecExec), chains and beam search fork, truncate and commit KV pages over
// mapped, cached ones; a cached page is copied before it is written, so
// their text with the prefix cache is what it is without. The draft model's
// cache maps the shared opening too.
func TestPrefixCacheSpecExecAndBeams(t *testing.T) {
	dir := testutil.Models(t)
	prompts := sharedPrompts(6)
	specRun := func(preset string, cache bool) []prefixOut {
		p, err := pipelines.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 8, 32
		p.Cache.NoPrefixCache = !cache
		p.Model.Threads = 2
		p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: 2}
		e, err := sluice.Open(context.Background(), sluice.Options{
			Pipeline: p,
			Model:    filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		var jobs []prefixJob
		for _, pr := range prompts {
			jobs = append(jobs, prefixJob{prompt: pr, noLogits: true})
			if preset == "specexec" { // chain is identical under greedy only
				jobs = append(jobs, prefixJob{prompt: pr, sampling: &sample.Options{Temperature: 0.8, TopP: 0.95, Seed: 3}, noLogits: true})
			}
		}
		out := runJobs(t, e, jobs)
		st := e.SpecStats()
		if st.Rounds == 0 {
			t.Fatalf("%s: no verifying rounds", preset)
		}
		// The draft's cache maps the opening the earlier requests left
		// (SpecExec's 12 jobs on 8 sequences: the last 4 start after others
		// ended; chain's 6 all start at once).
		if cache && preset == "specexec" && st.Prefix.HitPages == 0 {
			t.Errorf("%s: the draft's cache mapped no page (%+v)", preset, st.Prefix)
		}
		return out
	}
	for _, preset := range []string{"specexec", "chain"} {
		want, got := specRun(preset, false), specRun(preset, true)
		hits := 0
		for i := range want {
			if got[i].res.Text != want[i].res.Text {
				t.Fatalf("%s job %d: with the prefix cache %q, without %q", preset, i, got[i].res.Text, want[i].res.Text)
			}
			if got[i].res.CachedTokens > 0 {
				hits++
			}
		}
		if hits < len(want)-1 {
			t.Fatalf("%s: %d of %d requests mapped cached pages", preset, hits, len(want))
		}
	}

	l := enginetest.Stories(t, 2)
	beamRun := func(cache bool) []prefixOut {
		p, err := pipelines.Preset("beam")
		if err != nil {
			t.Fatal(err)
		}
		p.Scheduler().MaxInFlight = 12
		p.Cache.NoPrefixCache = !cache
		var jobs []prefixJob
		for _, pr := range prompts[:3] {
			jobs = append(jobs, prefixJob{prompt: pr, beam: &beamsearch.Options{NumBeams: 4, NumReturn: 2, LengthPenalty: 1, MaxNewTokens: 12}})
		}
		return runJobs(t, enginetest.Engine(t, l, p), jobs)
	}
	bwant, bgot := beamRun(false), beamRun(true)
	for i := range bwant {
		w, g := bwant[i].res, bgot[i].res
		if len(w.Beams) != len(g.Beams) || w.Text != g.Text {
			t.Fatalf("beam job %d: with the prefix cache %q (%d beams), without %q (%d beams)", i, g.Text, len(g.Beams), w.Text, len(w.Beams))
		}
		for k := range w.Beams {
			if !slices.Equal(w.Beams[k].Tokens, g.Beams[k].Tokens) || w.Beams[k].Score != g.Beams[k].Score {
				t.Fatalf("beam job %d sequence %d: with the prefix cache %v (%v), without %v (%v)", i, k, g.Beams[k].Tokens, g.Beams[k].Score, w.Beams[k].Tokens, w.Beams[k].Score)
			}
		}
	}
}
