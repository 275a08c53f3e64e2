package decode_test

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// TestDecodeStepDoesNotAllocate: once warm, one decode step (plan, forward
// through every block and the head, sample) allocates nothing, for every
// weight type and with two kernel threads. Issue #3: "nothing allocates in
// the decode loop".
func TestDecodeStepDoesNotAllocate(t *testing.T) {
	defer func(r int) { runtime.MemProfileRate = r }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1 // record every allocation, from the start
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
		for _, threads := range []int{1, 2} {
			t.Run(dt.String()+"/"+map[int]string{1: "1thread", 2: "2threads"}[threads], func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "m.gguf")
				if err := synth.WriteFile(path, synth.Options{Preset: p, DType: dt, Seed: 1, Workers: 1}); err != nil {
					t.Fatal(err)
				}
				l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: threads})
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				eng, err := decode.New(l, decode.Options{AddBOS: true, MaxNewTokens: 200, NoStop: true, PrefillChunk: 4})
				if err != nil {
					t.Fatal(err)
				}
				prompt := decode.Request{Prompt: "hello world, once upon a time"}
				run := func(s *decode.Seq, steps int) {
					for range steps {
						st, err := eng.Plan(t.Context(), s)
						if err != nil {
							t.Fatal(err)
						}
						if err := eng.Forward(t.Context(), st); err != nil {
							t.Fatal(err)
						}
						if err := eng.Advance(s, st); err != nil {
							t.Fatal(err)
						}
					}
					if s.Done() {
						t.Fatalf("sequence finished early (%s): the test measured fewer steps", s.Finish)
					}
				}
				// A first sequence grows every buffer (KV pages, scratch) to
				// the length the second one reaches; the second one's steps,
				// prefill included, must not allocate.
				first := eng.Start(prompt)
				run(first, 60)
				eng.Release(first)
				second := eng.Start(prompt)
				if n, where := ownAllocs(func() { run(second, 50) }); n != 0 {
					t.Errorf("%d allocations in 50 steps of a warm engine, want 0; first at:\n%s", n, where)
				}
			})
		}
	}
}

// ownAllocs runs f and returns how many allocations made during it have
// sluice code (not this test's) on their stack, and the stack of one. The runtime's own
// (a sudog when a parked pool helper's channel cache is empty after a GC,
// scavenger timers, GC workers) are not the decode loop's and are left out;
// testing.AllocsPerRun and MemStats.Mallocs count them too, which made a
// zero-allocation check flaky with two threads.
func ownAllocs(f func()) (n int64, where string) {
	snapshot := func() map[[32]uintptr]int64 {
		runtime.GC() // the profile is published at the end of a GC cycle
		runtime.GC()
		recs := make([]runtime.MemProfileRecord, 4096)
		for {
			k, ok := runtime.MemProfile(recs, true)
			if ok {
				recs = recs[:k]
				break
			}
			recs = make([]runtime.MemProfileRecord, 2*k)
		}
		m := make(map[[32]uintptr]int64, len(recs))
		for _, r := range recs {
			m[r.Stack0] += r.AllocObjects
		}
		return m
	}
	before := snapshot()
	f()
	after := snapshot()
	for stack, c := range after {
		d := c - before[stack]
		if d == 0 {
			continue
		}
		ours, helper, text := false, false, ""
		frames := runtime.CallersFrames(stack[:])
		for more := true; more; {
			var fr runtime.Frame
			fr, more = frames.Next()
			if strings.HasPrefix(fr.Function, "github.com/sluicehq/sluice/kernels.(*Pool).helper") {
				// A kernel pool helper's goroutine: what it allocates is a
				// sudog when it parks on its wake channel, which the runtime
				// refills after a GC (this test's own runtime.GC calls). The
				// kernels it runs are covered by the kernels package's
				// AllocsPerRun tests.
				helper = true
			}
			if strings.HasPrefix(fr.Function, "github.com/sluicehq/sluice/") && !strings.Contains(fr.Function, "_test.") {
				ours = true
			}
			text += fmt.Sprintf("  %s\n    %s:%d\n", fr.Function, fr.File, fr.Line)
		}
		ours = ours && !helper
		if ours {
			n += d
			where = text
		}
	}
	return n, where
}
