package graph_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/graph/graphtest"
)

// seq stands for a sequence being decoded: it loops until it has done want steps.
type seq struct {
	id, want, iter int
}

// loopBody wires one decode-like loop body between Enter and Return/Exit and
// returns the port of sequences after one step.
type loopBody func(in graph.Port[*seq], step graph.Stage[*seq, *seq], maxInFlight int, buf graph.NodeOption) graph.Port[*seq]

var loopBodies = map[string]loopBody{
	// Enter ─▶ step ─▶ split
	"chain": func(in graph.Port[*seq], step graph.Stage[*seq, *seq], _ int, buf graph.NodeOption) graph.Port[*seq] {
		return graph.Then("step", in, step, buf)
	},
	// Enter ─▶ gather (Seq → Batch) ─▶ decode (Batch → Seq) ─▶ split: the body changes types.
	"batched": func(in graph.Port[*seq], step graph.Stage[*seq, *seq], maxInFlight int, buf graph.NodeOption) graph.Port[*seq] {
		batches := graph.Gather("batch", in, maxInFlight, buf)
		return graph.Then("decode", batches, graph.StageFunc[[]*seq, *seq](
			func(ctx context.Context, b []*seq, emit graph.Emit[*seq]) error {
				for _, s := range b {
					if err := step.Process(ctx, s, emit); err != nil {
						return err
					}
				}
				return nil
			}), buf)
	},
	// Enter ─▶ step ×2 workers ─▶ relay ─▶ split
	"workers": func(in graph.Port[*seq], step graph.Stage[*seq, *seq], _ int, buf graph.NodeOption) graph.Port[*seq] {
		p := graph.Then("step", in, step, graph.Workers(2), buf)
		return graph.Then("relay", p, graph.Map(func(_ context.Context, s *seq) (*seq, error) { return s, nil }), buf)
	},
}

type loopResult struct {
	got      []*seq
	inside   int64 // most sequences seen inside the body at once
	elapsed  time.Duration
	stats    []graph.NodeStats
	runError error
}

// runLoop sends n sequences through a loop bounded by maxInFlight. Sequence i needs
// want(i) steps, and each step takes stepTime of fake time. Every node inside the
// loop has Buffer(buf).
func runLoop(t *testing.T, body loopBody, maxInFlight, buf, n int, want func(int) int, stepTime time.Duration) loopResult {
	t.Helper()
	g := graph.New(graph.Options{Name: "decode"})
	src := graph.Source(g, "prompts", func(ctx context.Context, emit graph.Emit[*seq]) error {
		for i := range n {
			if err := emit(ctx, &seq{id: i, want: want(i)}); err != nil {
				return err
			}
		}
		return nil
	})
	var inside, maxInside atomic.Int64
	step := graph.Map(func(_ context.Context, s *seq) (*seq, error) {
		if s.iter == 0 {
			if v := inside.Add(1); v > maxInside.Load() {
				maxInside.Store(v)
			}
		}
		time.Sleep(stepTime)
		s.iter++
		return s, nil
	})
	loop := graph.NewLoop[*seq](g, "loop", maxInFlight)
	stepped := body(loop.Enter(src, graph.Buffer(buf)), step, maxInFlight, graph.Buffer(buf))
	again, done := graph.Split("more", stepped, func(s *seq) bool {
		if s.iter < s.want {
			return true
		}
		inside.Add(-1)
		return false
	}, graph.Buffer(buf))
	loop.Return(again)
	got := graphtest.Collect(loop.Exit(done))
	start := time.Now()
	err := g.Run(t.Context())
	return loopResult{got: got(), inside: maxInside.Load(), elapsed: time.Since(start), stats: g.Stats(), runError: err}
}

func checkLoop(t *testing.T, r loopResult, n, maxInFlight int, want func(int) int) {
	t.Helper()
	if r.runError != nil {
		t.Fatalf("Run: %v", r.runError)
	}
	seen := make([]int, n)
	for _, s := range r.got {
		seen[s.id]++
		if s.iter != want(s.id) {
			t.Errorf("sequence %d left after %d steps, want %d", s.id, s.iter, want(s.id))
		}
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("sequence %d left the loop %d times, want once", id, c)
		}
	}
	if r.inside > int64(maxInFlight) {
		t.Errorf("%d sequences inside the loop at once, want <= %d", r.inside, maxInFlight)
	}
}

func TestLoop(t *testing.T) {
	want := func(i int) int { return (i*7)%5 + 1 } // 1..5 steps, mixed
	const n = 25
	total := 0
	for i := range n {
		total += want(i)
	}
	type loopCase struct {
		body             string
		maxInFlight, buf int
		stepTime         time.Duration
	}
	var cases []loopCase
	for body := range loopBodies {
		for _, maxInFlight := range []int{1, 2, 3, 4, 8} {
			for buf := range 2 {
				for _, stepTime := range []time.Duration{0, time.Millisecond} {
					cases = append(cases, loopCase{body, maxInFlight, buf, stepTime})
				}
			}
		}
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s/max=%d/buffer=%d/step=%v", tc.body, tc.maxInFlight, tc.buf, tc.stepTime)
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := runLoop(t, loopBodies[tc.body], tc.maxInFlight, tc.buf, n, want, tc.stepTime)
				checkLoop(t, r, n, tc.maxInFlight, want)
				// Enter passes each sequence once per step: n admissions plus
				// total-n returns.
				if enter := graphtest.Stat(t, r.stats, "loop.enter"); enter.In != int64(total) || enter.Out != int64(total) {
					t.Errorf("loop.enter In=%d Out=%d, want %d", enter.In, enter.Out, total)
				}
				if exit := graphtest.Stat(t, r.stats, "loop.exit"); exit.In != n || exit.Out != n {
					t.Errorf("loop.exit In=%d Out=%d, want %d", exit.In, exit.Out, n)
				}
			})
		})
	}
}

func TestLoopBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// One sequence at a time: the loop is strictly serial, so the run takes exactly
		// the sum of all steps and the source spends that time blocked.
		const n = 10
		want := func(i int) int { return i%3 + 1 }
		r := runLoop(t, loopBodies["chain"], 1, 1, n, want, time.Second)
		checkLoop(t, r, n, 1, want)
		var total time.Duration
		for i := range n {
			total += time.Duration(want(i)) * time.Second
		}
		if r.elapsed != total {
			t.Errorf("serial loop took %v, want %v", r.elapsed, total)
		}
		if ids := seqIDs(r.got); !cmp.Equal(ids, ints(n)) {
			t.Errorf("with one in flight sequences must leave in order, got %v", ids)
		}
		src := graphtest.Stat(t, r.stats, "prompts")
		if src.BlockedOnSend < total-5*time.Second {
			t.Errorf("source BlockedOnSend = %v, want close to %v", src.BlockedOnSend, total)
		}
	})
}

func seqIDs(s []*seq) []int {
	ids := make([]int, len(s))
	for i, v := range s {
		ids[i] = v.id
	}
	return ids
}

func TestLoopSlowExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A consumer after Exit that is slower than the loop must not deadlock it.
		g := graph.New(graph.Options{})
		src := graphtest.FromSlice(g, "src", ints(12))
		loop := graph.NewLoop[int](g, "loop", 2)
		again, done := graph.Split("more", graph.Then("step", loop.Enter(src), graph.Map(
			func(_ context.Context, v int) (int, error) { return v + 100, nil })), func(v int) bool { return v < 300 })
		loop.Return(again)
		var sunk atomic.Int64
		graph.Sink("slow", loop.Exit(done), sleepSink[int](time.Hour, &sunk))
		graphtest.Run(t, g)
		if sunk.Load() != 12 {
			t.Errorf("sink saw %d, want 12", sunk.Load())
		}
	})
}

func TestLoopError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		src := graphtest.FromSlice(g, "src", ints(10))
		loop := graph.NewLoop[int](g, "loop", 3)
		stepped := graph.Then("step", loop.Enter(src), graph.Map(func(_ context.Context, v int) (int, error) {
			if v == 205 {
				return 0, fmt.Errorf("sequence %d diverged", v%100)
			}
			return v + 100, nil
		}))
		again, done := graph.Split("more", stepped, func(v int) bool { return v < 300 })
		loop.Return(again)
		graphtest.Collect(loop.Exit(done))
		err := g.Run(t.Context())
		if want := `graph: node "step": sequence 5 diverged`; fmt.Sprint(err) != want {
			t.Fatalf("Run = %v, want %s", err, want)
		}
	})
}

// FuzzLoop checks the no-deadlock and exactly-once properties for arbitrary bounds,
// item counts and step counts; synctest turns a deadlock into a test failure.
func FuzzLoop(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(1), uint8(0), uint8(1))
	f.Add(uint8(4), uint8(30), uint8(7), uint8(1), uint8(0))
	f.Add(uint8(2), uint8(0), uint8(3), uint8(2), uint8(1))
	f.Add(uint8(7), uint8(39), uint8(1), uint8(2), uint8(0))
	f.Fuzz(func(t *testing.T, maxInFlight, n, steps, bodyPick, buf uint8) {
		m := int(maxInFlight%8) + 1
		items := int(n % 40)
		want := func(i int) int { return (i*int(steps)+int(steps))%7 + 1 }
		names := []string{"chain", "batched", "workers"}
		body := loopBodies[names[int(bodyPick)%len(names)]]
		synctest.Test(t, func(t *testing.T) {
			r := runLoop(t, body, m, int(buf%3), items, want, time.Duration(steps%2)*time.Millisecond)
			checkLoop(t, r, items, m, want)
		})
	})
}
