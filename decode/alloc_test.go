package decode_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tensor"
)

// TestDecodeStepDoesNotAllocate: once warm, one step of the engine
// (Loop.Step: plan, expand, reserve, the embedding, every block, the head,
// settle: each session samples, streams its token's text and checks its stop
// rules) allocates nothing, for every weight type, with one and two kernel
// threads, with one session and with several sharing each step while one of
// them finishes and a queued one takes its place. Loop.Step runs the phases
// the engine's stages run, without the graph.
func TestDecodeStepDoesNotAllocate(t *testing.T) {
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1 // profile every allocation, to say where on failure
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
		path := synthfile.Path(t, synthfile.Options{DType: dt, Seed: 1})
		for _, threads := range []int{1, 2} {
			for _, seqs := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%dthreads/%dseqs", dt, threads, seqs), func(t *testing.T) {
					testStepAllocs(t, path, threads, seqs, false)
				})
			}
			// With the prefix cache, a decode step publishes each page
			// its session fills (hashing it, indexing it) and still
			// allocates nothing. (Admitting and retiring sessions do:
			// prompt keys, ristretto's items; with one session those
			// steps are outside the measured ones.)
			t.Run(fmt.Sprintf("%s/%dthreads/1seqs/prefix", dt, threads), func(t *testing.T) {
				testStepAllocs(t, path, threads, 1, true)
			})
		}
	}
}

func testStepAllocs(t *testing.T, path string, threads, seqs int, prefix bool) {
	// A session that ends early would leave Plan waiting for work: bound it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	l, err := model.Load(ctx, model.LoadOptions{Path: path, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := l.Model.Arch()
	sc, err := sched.New(a, sched.Options{MaxSeqs: seqs, PrefillChunk: 4, Context: a.Context, PrefixCache: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if prefix {
		// Page memory is allocated on a page's first use. With the prefix
		// cache the warm cohort's pages stay cached instead of going back
		// to the free list, so the measured session takes pages never used
		// before: give every page its memory now, so that what is measured
		// is the cache's bookkeeping.
		sc.Cache.Reserve(sc.Cache.Stats().Pages)
	}
	// Tokens whose streamed text is not their vocabulary piece as is: the
	// session assembled it (a character from byte pieces, U+FFFD).
	var streamed, assembled int
	so := session.Options{
		Sampling:     sample.Options{Temperature: 0.9, TopK: 40, TopP: 0.95, MinP: 0.01, RepeatPenalty: 1.1, Seed: 3},
		MaxNewTokens: 200, AddBOS: true, NoStop: true, Context: a.Context,
	}
	var index uint64
	newSession := func(maxNew int) *session.Session {
		index++
		var q *session.Session
		q = session.New(session.Request{
			ID: fmt.Sprint(index), Index: index, Prompt: "hello world, once upon a time", MaxNewTokens: maxNew,
			OnToken: func(tok int32, text string) {
				streamed++
				if tok >= 0 && text != l.Tokenizer.Piece(q.Tokens[len(q.Tokens)-2], tok) {
					assembled++
				}
			},
		}, l.Tokenizer, so)
		if q.Done() {
			t.Fatalf("session %d: %v", index, q.Err)
		}
		if err := sc.Admit(ctx, q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	loop := decode.NewLoop(sc, decode.Options{Model: l.Model, Store: l.Store})
	st := sched.NewStep()
	var failed error
	step := func() {
		if err := loop.Step(ctx, st); err != nil || st.Done || st.Err != nil {
			failed = fmt.Errorf("Step: %v, done %v, step %v", err, st.Done, st.Err)
			return
		}
		for _, sp := range st.Spans {
			if sp.S.Err != nil {
				failed = sp.S.Err
			}
		}
	}
	retired := func(want int) {
		t.Helper()
		for range want {
			select {
			case q := <-sc.Retired():
				if q.Finish != session.FinishLength {
					t.Fatalf("session %s finished with %q (%v), want length", q.Req.ID, q.Finish, q.Err)
				}
			default:
				t.Fatalf("fewer than %d sessions retired", want)
			}
		}
	}

	// A first cohort grows every buffer (KV pages, activations, sampler
	// scratch, the active list) to what the measured cohort reaches, and
	// leaves; its KV sequences are then reused.
	warm := make([]*session.Session, seqs)
	for i := range warm {
		warm[i] = newSession(110)
	}
	for n := 0; !allDone(warm); n++ {
		if n == 300 {
			t.Fatal("the warm-up sessions did not finish in 300 steps")
		}
		if step(); failed != nil {
			t.Fatal(failed)
		}
	}
	// The measured cohort. With several sessions, the first stops after 20
	// new tokens and a queued one takes its place in the step after.
	firstMax := 100
	if seqs > 1 {
		firstMax = 20
	}
	cohort := []*session.Session{newSession(firstMax)}
	for range seqs - 1 {
		cohort = append(cohort, newSession(100))
	}
	step() // retires the warm cohort, admits this one
	retired(seqs)
	if seqs > 1 {
		cohort = append(cohort, newSession(30)) // queued: every slot is taken
	}
	// AllocsPerRun divides by its run count, which would hide fewer
	// allocations than runs; one run of many steps counts every one. Its
	// warm-up call is the first half of the steps.
	const steps = 25
	run := func() {
		for range steps {
			if step(); failed != nil {
				return
			}
		}
	}
	// AllocsPerRun counts every allocation of the process, the runtime's
	// background ones too; with the profile of the same steps (and of the
	// warm-up run before them) those are told apart, so that a scavenger
	// timer on a loaded machine does not fail the test and nothing of ours
	// passes it.
	var allocs float64
	published := sc.Stats().Cache.Prefix.Published
	ours, runtimes, where := allocSites(func() { allocs = testing.AllocsPerRun(1, run) })
	if failed != nil {
		t.Fatal(failed)
	}
	switch {
	case ours > 0:
		t.Errorf("a warm engine allocates: %d allocations by sluice code in the profile of %d steps (AllocsPerRun: %v in the last %d), want none:\n%s", ours, 2*steps, allocs, steps, where)
	case allocs != 0:
		t.Logf("%v allocations in %d steps, all of them the runtime's own (%d in the profile)", allocs, steps, runtimes)
	}
	if seqs > 1 {
		if !cohort[0].Done() || cohort[len(cohort)-1].Cached == 0 {
			t.Errorf("the first session did not finish or the queued one did not start: the test measured less than it says")
		}
	}
	for _, q := range cohort[1:] {
		if q.Done() && q.Finish != session.FinishLength {
			t.Errorf("session %s: %s %v", q.Req.ID, q.Finish, q.Err)
		}
	}
	if n := sc.Stats().Cache.Prefix.Published - published; prefix && n < 2 {
		t.Errorf("%d pages published in the measured steps: the test measured less than it says", n)
	}
	if streamed == 0 || assembled == 0 {
		t.Errorf("%d tokens streamed, %d of them assembled text: the test measured less than it says", streamed, assembled)
	}
}

// allocSites runs f and returns the allocations the profile recorded during
// it: those made by sluice code (ours, where: the most frequent sites) and
// the runtime's own (background goroutines: scavenger timers, sudogs a parked
// goroutine takes after a GC), which testing.AllocsPerRun counts as well.
func allocSites(f func()) (ours, runtimes int64, where string) {
	snapshot := func() map[[32]uintptr]int64 {
		runtime.GC() // the profile is published at the end of a GC cycle
		runtime.GC()
		k, _ := runtime.MemProfile(nil, true)
		recs := make([]runtime.MemProfileRecord, k+64)
		k, _ = runtime.MemProfile(recs, true)
		m := make(map[[32]uintptr]int64, k)
		for _, r := range recs[:k] {
			m[r.Stack0] += r.AllocObjects
		}
		return m
	}
	before := snapshot()
	f()
	type site struct {
		n    int64
		text string
	}
	var sites []site
	for stack, c := range snapshot() {
		d := c - before[stack]
		if d <= 0 {
			continue
		}
		text, snap, sudog := "", false, false
		frames := runtime.CallersFrames(stack[:])
		for more := true; more; {
			var fr runtime.Frame
			fr, more = frames.Next()
			switch {
			case strings.Contains(fr.Function, "allocSites.func"):
				snap = true // the snapshot's own map
			case fr.Function == "runtime.acquireSudog":
				sudog = true // a goroutine parking: the runtime refills its cache after a GC
			case strings.HasPrefix(fr.Function, "github.com/sluicehq/sluice/"):
				text += fmt.Sprintf("    %s (%s:%d)\n", fr.Function, filepath.Base(fr.File), fr.Line)
			}
		}
		switch {
		case snap:
		case text == "" || sudog:
			runtimes += d
		default:
			ours += d
			sites = append(sites, site{d, text})
		}
	}
	slices.SortFunc(sites, func(a, b site) int { return int(b.n - a.n) })
	for _, s := range sites[:min(len(sites), 6)] {
		where += fmt.Sprintf("  %d at\n%s", s.n, s.text)
	}
	return ours, runtimes, where
}

func allDone(qs []*session.Session) bool {
	for _, q := range qs {
		if !q.Done() {
			return false
		}
	}
	return true
}
