package sched_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// synthCtx is the tiny synthetic llama with a context of ctx tokens.
func synthCtx(t testing.TB, ctx int) *model.Loaded {
	t.Helper()
	path := synthfile.Path(t, synthfile.Options{DType: tensor.Q8_0, Seed: 9, Context: ctx})
	return enginetest.Load(t, model.LoadOptions{Path: path, Threads: 2})
}

// kvRun is what one request produced: its tokens and a hash of the bits of
// every row of logits it saw.
type kvRun struct {
	tokens []int32
	logits []uint64
}

// runKV generates from every prompt to the full context, all in flight, with
// the given KV budget (0 = none), and returns the outputs and the cache's
// counters.
func runKV(t *testing.T, l *model.Loaded, prompts [][]int32, budget int64) ([]kvRun, kvcache.Stats) {
	t.Helper()
	ctxLen := l.Model.Arch().Context
	p := enginetest.Pipeline(t, 0, len(prompts), 64, ctxLen)
	p.Scheduler().StopAtEOS = false
	p.Cache.KVBudget, p.Cache.SpillDir = budget, t.TempDir()
	e, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]kvRun, len(prompts))
	var wg sync.WaitGroup
	for i, pr := range prompts {
		wg.Add(1)
		req := sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Tokens: pr,
			OnLogits: func(_ int32, lg []float32) {
				h := fnv.New64a()
				var b [4]byte
				for _, x := range lg {
					u := math.Float32bits(x)
					b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
					h.Write(b[:])
				}
				out[i].logits = append(out[i].logits, h.Sum64())
			}}
		if err := e.Submit(context.Background(), req, func(r sluice.Result) {
			if r.Err != nil {
				t.Errorf("request %d: %v", i, r.Err)
			}
			out[i].tokens = r.Tokens
			wg.Done()
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	st := e.Stats()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Cache.PagesInUse != 0 {
		t.Errorf("%d KV pages still in use after every request ended", st.Cache.PagesInUse)
	}
	return out, st.Cache
}

// Issue 10, must show 4: eight sequences of 512 tokens under a KV budget of
// 10% of what they need give logits and tokens byte-identical to the
// unbounded run; frames went to the spill file and came back, one read per
// miss, and none is left behind. The short form has a 128-token context.
func TestKVBudgetSpillIdentical(t *testing.T) {
	ctx := 512
	if testing.Short() {
		ctx = 128
	}
	l := synthCtx(t, ctx)
	a := l.Model.Arch()
	rng := rand.New(rand.NewPCG(4, 5))
	prompts := make([][]int32, 8)
	for i := range prompts {
		prompts[i] = make([]int32, 8+4*i)
		for j := range prompts[i] {
			prompts[i][j] = int32(rng.IntN(a.Vocab))
		}
	}
	need := int64(len(prompts)) * int64(a.Context) * a.KVBytesPerToken()
	want, kvNone := runKV(t, l, prompts, 0)
	if none := kvNone.Spill; none.Budget != 0 || none.Spills != 0 {
		t.Fatalf("unbounded run spilled: %+v", none)
	}
	got, kv := runKV(t, l, prompts, need/10)
	sp := kv.Spill
	t.Logf("KV need %d bytes, budget %d: %d frames of %d bytes (a step pins ≤ %d); %d hits, %d misses, %d frames spilled (%d bytes), %d reloaded (%d bytes), %d evicted clean",
		need, sp.Budget, sp.Frames, sp.FrameBytes, sp.PassFrames-2, sp.Hits, sp.Misses, sp.Spills, sp.BytesWritten, sp.Reloads, sp.BytesRead, sp.CleanEvictions)
	for i := range prompts {
		if len(want[i].tokens) < a.Context {
			t.Fatalf("request %d: %d tokens, want the full context %d", i, len(want[i].tokens), a.Context)
		}
		if !slices.Equal(got[i].tokens, want[i].tokens) {
			t.Errorf("request %d: tokens differ under the budget", i)
		}
		if !slices.Equal(got[i].logits, want[i].logits) {
			t.Errorf("request %d: logits differ under the budget (%d and %d rows)", i, len(got[i].logits), len(want[i].logits))
		}
	}
	if sp.Budget != need/10 || sp.Spills == 0 || sp.Reloads == 0 || sp.Misses != sp.Reloads {
		t.Errorf("under a budget of 10%%: %+v, want spills and reloads (one per miss)", sp)
	}
	// What is left is the prefix cache's idle pages, every layer of each
	// in memory or in the file, and nothing else.
	if left := kv.PagesCached * a.Layers; sp.Resident+sp.Spilled != left {
		t.Errorf("after every sequence ended %d frames are in memory and %d in the spill file; the prefix cache holds %d pages (%d frames)", sp.Resident, sp.Spilled, kv.PagesCached, left)
	}
}

// A budget below what one step of one full-context sequence pins is refused
// when the engine is made, naming the budget and the minimum.
func TestKVBudgetTooSmall(t *testing.T) {
	l := synthCtx(t, 512)
	p := enginetest.Pipeline(t, 0, 2, 64, 16)
	p.Cache.KVBudget = 8192
	_, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err == nil {
		t.Fatal("New with an 8 KiB KV budget succeeded")
	}
	for _, s := range []string{"kv_budget = 8192 bytes", "below one step's need", "the minimum is 139264 bytes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// Issue 10: the draft model's KV counts against the same --kv-budget as
// the target's. SpecExec and chain speculation, greedy, with
// llama2xs-260k drafting for stories260K, give byte-identical text under a
// budget that makes both caches spill and without one; the budget is split
// between the two caches and neither goes over its share.
func TestDraftKVUnderBudget(t *testing.T) {
	dir := testutil.Models(t)
	prompts := []string{"", "Lily and Tom", "The cat sat on the mat.", "Once upon a time"}
	run := func(t *testing.T, preset string, budget int64) ([]string, kvcache.SpillStats, kvcache.SpillStats, float64) {
		p, err := pipelines.Preset(preset)
		if err != nil {
			t.Fatal(err)
		}
		p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = len(prompts), 64
		p.Cache.KVBudget, p.Cache.SpillDir = budget, t.TempDir()
		p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")}
		e, err := sluice.Open(context.Background(), sluice.Options{
			Pipeline: p, Model: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"),
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		texts := make([]string, len(prompts))
		var wg sync.WaitGroup
		for i, pr := range prompts {
			wg.Add(1)
			if err := e.Submit(context.Background(), sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: pr}, func(r sluice.Result) {
				if r.Err != nil {
					t.Errorf("%s, prompt %q: %v", preset, pr, r.Err)
				}
				texts[i] = r.Text
				wg.Done()
			}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		st := e.SpecStats()
		if st.Rounds == 0 {
			t.Fatalf("%s: no draft was verified", preset)
		}
		return texts, e.Stats().Cache.Spill, st.KV, st.TokensPerPass()
	}
	const budget = 512 << 10 // of about 2 × 2.3 MiB the two caches need whole
	presets := []string{"specexec", "chain"}
	if testing.Short() {
		presets = presets[:1]
	}
	for _, preset := range presets {
		t.Run(preset, func(t *testing.T) {
			want, tNone, dNone, perPass := run(t, preset, 0)
			if tNone.Budget != 0 || dNone.Budget != 0 {
				t.Fatalf("unbounded run has budgets %d and %d", tNone.Budget, dNone.Budget)
			}
			got, target, draft, perPassB := run(t, preset, budget)
			t.Logf("target: budget %d, %d spills, %d reloads; draft: budget %d, %d spills, %d reloads; tokens per target pass %.2f (%.2f unbounded)",
				target.Budget, target.Spills, target.Reloads, draft.Budget, draft.Spills, draft.Reloads, perPassB, perPass)
			for i := range prompts {
				if got[i] != want[i] {
					t.Errorf("prompt %q under the KV budget:\n%q\nwithout:\n%q", prompts[i], got[i], want[i])
				}
			}
			if target.Budget+draft.Budget > budget || target.Budget == 0 || draft.Budget == 0 {
				t.Errorf("the budget of %d split into %d (target) and %d (draft)", budget, target.Budget, draft.Budget)
			}
			if draft.Spills == 0 || draft.Reloads == 0 || target.Spills == 0 {
				t.Errorf("the draft's cache did not spill and reload: target %+v, draft %+v", target, draft)
			}
		})
	}
}

// A KV budget that cannot hold both caches' minimum is refused naming
// both.
func TestDraftKVBudgetTooSmall(t *testing.T) {
	dir := testutil.Models(t)
	p, err := pipelines.Preset("specexec")
	if err != nil {
		t.Fatal(err)
	}
	p.Cache.KVBudget, p.Cache.SpillDir = 200<<10, t.TempDir() // above the target's minimum alone
	p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")}
	e, err := sluice.Open(context.Background(), sluice.Options{
		Pipeline: p, Model: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"),
	})
	if err == nil {
		e.Close()
		t.Fatal("a KV budget below both caches' minimum was taken")
	}
	for _, w := range []string{"kv_budget = 200.0 KiB is below", "the target needs at least", "the draft"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
