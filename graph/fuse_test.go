package graph_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/graph/graphtest"
)

// dropAndDup emits 0, 1 or 2 items per input: it drops multiples of 3 and
// duplicates multiples of 5.
func dropAndDup() graph.Stage[int, int] {
	return graph.StageFunc[int, int](func(ctx context.Context, v int, emit graph.Emit[int]) error {
		if v%3 == 0 {
			return nil
		}
		if v%5 == 0 {
			if err := emit(ctx, v); err != nil {
				return err
			}
		}
		return emit(ctx, v)
	})
}

// flushTail is a stage that passes items through and emits tail from Flush.
type flushTail struct{ tail []int }

func (s *flushTail) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	return emit(ctx, v)
}

func (s *flushTail) Flush(ctx context.Context, emit graph.Emit[int]) error {
	for _, v := range s.tail {
		if err := emit(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// fusedChainGraph is src → a → b → flush → route, with route's two sides
// collected; fuse marks a, b, flush and route Fused.
func fusedChainGraph(n int, fuse bool, buf int) (*graph.Graph, func() []int, func() []int) {
	var o []graph.NodeOption
	if fuse {
		o = append(o, graph.Fused())
	}
	o = append(o, graph.Buffer(buf))
	g := graph.New(graph.Options{Name: "chain"})
	p := graphtest.FromSlice(g, "src", ints(n), graph.Buffer(buf))
	p = graph.Then("a", p, double(), o...)
	p = graph.Then("b", p, dropAndDup(), o...)
	p = graph.Then("flush", p, &flushTail{tail: []int{-1, -2}}, o...)
	even, odd := graph.Split("route", p, func(v int) bool { return v%4 == 0 }, o...)
	return g, graphtest.Collect(even), graphtest.Collect(odd)
}

func TestFusedChainSameOutput(t *testing.T) {
	for _, n := range []int{0, 1, 100} {
		for _, buf := range []int{0, 1, 8} {
			t.Run(fmt.Sprintf("n=%d,buffer=%d", n, buf), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					run := func(fuse bool) ([]int, []int, []graph.NodeStats) {
						g, even, odd := fusedChainGraph(n, fuse, buf)
						stats := graphtest.Run(t, g)
						return even(), odd(), stats
					}
					wantEven, wantOdd, plain := run(false)
					gotEven, gotOdd, fused := run(true)
					if diff := cmp.Diff(wantEven, gotEven, cmpNilEmpty); diff != "" {
						t.Errorf("route.yes, fused vs unfused (-want +got):\n%s", diff)
					}
					if diff := cmp.Diff(wantOdd, gotOdd, cmpNilEmpty); diff != "" {
						t.Errorf("route.no, fused vs unfused (-want +got):\n%s", diff)
					}
					if n == 100 && (len(wantEven) == 0 || len(wantOdd) < 2 || wantOdd[len(wantOdd)-2] != -1) {
						t.Fatalf("the unfused chain's output is not the test's: even %v odd %v", wantEven, wantOdd)
					}
					for i, p := range plain {
						f := fused[i]
						if p.Name != f.Name || p.In != f.In || p.Out != f.Out || p.Errors != f.Errors {
							t.Errorf("node %q: fused In/Out/Errors = %d/%d/%d, unfused %d/%d/%d",
								p.Name, f.In, f.Out, f.Errors, p.In, p.Out, p.Errors)
						}
						wantFused := p.Name == "a" || p.Name == "b" || p.Name == "flush" || p.Name == "route"
						if p.Fused || f.Fused != wantFused {
							t.Errorf("node %q: Fused = %v (unfused run: %v), want %v", p.Name, f.Fused, p.Fused, wantFused)
						}
						if f.Fused && f.BlockedOnRecv != 0 {
							t.Errorf("fused node %q: BlockedOnRecv = %v, want 0", f.Name, f.BlockedOnRecv)
						}
					}
					// The source's edge to a fused node has no channel.
					if src := graphtest.Stat(t, fused, "src"); src.Capacity != 0 {
						t.Errorf("src Capacity = %d with a fused consumer, want 0", src.Capacity)
					}
				})
			})
		}
	}
}

// sleepStage takes d of (fake) time per item, then emits it.
func sleepStage(d time.Duration) graph.Stage[int, int] {
	return graph.Map(func(_ context.Context, v int) (int, error) {
		time.Sleep(d)
		return v, nil
	})
}

// Busy stays per node: a producer's Busy leaves out the time its fused
// consumers spend, and each fused node has its own.
func TestFusedBusyPerNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		g := graph.New(graph.Options{})
		src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
			for i := range n {
				time.Sleep(time.Second) // the source's own work
				if err := emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		})
		a := graph.Then("a", src, sleepStage(2*time.Second), graph.Fused())
		b := graph.Then("b", a, sleepStage(3*time.Second), graph.Fused())
		var sunk atomic.Int64
		graph.Sink("slow", b, sleepSink[int](10*time.Second, &sunk))
		start := time.Now()
		stats := graphtest.Run(t, g)
		for name, want := range map[string]time.Duration{"src": n * time.Second, "a": n * 2 * time.Second, "b": n * 3 * time.Second, "slow": n * 10 * time.Second} {
			if got := graphtest.Stat(t, stats, name).Busy; got != want {
				t.Errorf("%s.Busy = %v, want %v", name, got, want)
			}
		}
		// b waits for the slow sink (backpressure on b, not on its producers).
		if got := graphtest.Stat(t, stats, "b").BlockedOnSend; got == 0 {
			t.Error("b.BlockedOnSend = 0, want the time it waited for the slow sink")
		}
		for _, name := range []string{"src", "a"} {
			if got := graphtest.Stat(t, stats, name).BlockedOnSend; got != 0 {
				t.Errorf("%s.BlockedOnSend = %v, want 0 (its consumer is fused)", name, got)
			}
		}
		// One goroutine runs src, a and b: 6 s per item; the sink beside it takes
		// 10 s per item from the first item's arrival on.
		if got, want := time.Since(start), 6*time.Second+n*10*time.Second; got != want {
			t.Errorf("run took %v, want %v", got, want)
		}
	})
}

func TestFusedLifecycleOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var events []string
		logf := func(format string, args ...any) {
			mu.Lock()
			events = append(events, fmt.Sprintf(format, args...))
			mu.Unlock()
		}
		g := graph.New(graph.Options{})
		p := graphtest.FromSlice(g, "src", []int{1, 2})
		p = graph.Then("a", p, &namedLifecycle{name: "a", log: logf, tail: 10}, graph.Fused())
		p = graph.Then("b", p, &namedLifecycle{name: "b", log: logf, tail: 20}, graph.Fused())
		got := graphtest.Collect(p)
		graphtest.Run(t, g)
		want := []string{
			"a setup", "b setup",
			"a process 1", "b process 1", "a process 2", "b process 2",
			"a flush", "b process 10", "a close",
			"b flush", "b close",
		}
		if diff := cmp.Diff(want, events); diff != "" {
			t.Errorf("lifecycle (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]int{1, 2, 10, 20}, got()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
	})
}

// namedLifecycle logs its lifecycle calls and emits tail from Flush.
type namedLifecycle struct {
	name string
	log  func(format string, args ...any)
	tail int
}

func (s *namedLifecycle) Setup(context.Context) error { s.log("%s setup", s.name); return nil }
func (s *namedLifecycle) Close() error                { s.log("%s close", s.name); return nil }
func (s *namedLifecycle) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	s.log("%s process %d", s.name, v)
	return emit(ctx, v)
}
func (s *namedLifecycle) Flush(ctx context.Context, emit graph.Emit[int]) error {
	s.log("%s flush", s.name)
	return emit(ctx, s.tail)
}

// The lifecycle cases of TestLifecycle, with the stage fused to the source.
func TestFusedLifecycle(t *testing.T) {
	tests := []struct {
		name       string
		stage      *lifecycleStage
		wantEvents []string
		wantOut    []int
		wantErr    string
	}{
		{"ok with flush emitting", &lifecycleStage{flushEmit: []int{100, 101}},
			[]string{"setup", "process 1", "process 2", "process 3", "flush", "close"}, []int{1, 2, 3, 100, 101}, ""},
		{"process error skips flush, still closes", &lifecycleStage{failAt: 2, flushEmit: []int{100}},
			[]string{"setup", "process 1", "process 2", "close"}, []int{1}, `graph: node "stage": process failed`},
		{"setup error skips process, still closes", &lifecycleStage{failSetup: true},
			[]string{"setup", "close"}, nil, `graph: node "stage": setup failed`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{})
				p := graphtest.FromSlice(g, "src", []int{1, 2, 3})
				p = graph.Then("stage", p, tc.stage, graph.Fused())
				got := graphtest.Collect(p)
				err := g.Run(t.Context())
				if gotErr := fmt.Sprint(err); (err != nil || tc.wantErr != "") && gotErr != tc.wantErr {
					t.Errorf("Run = %v, want %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantEvents, tc.stage.events); diff != "" {
					t.Errorf("lifecycle (-want +got):\n%s", diff)
				}
				// A failed run may drop what is still in the collecting sink's buffer.
				out := got()
				if tc.wantErr != "" && len(out) < len(tc.wantOut) {
					tc.wantOut = tc.wantOut[:len(out)]
				}
				if diff := cmp.Diff(tc.wantOut, out, cmpNilEmpty); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				stats := g.Stats()
				wantErrs := int64(0)
				if tc.wantErr != "" {
					wantErrs = 1
				}
				if s := graphtest.Stat(t, stats, "stage"); s.Errors != wantErrs {
					t.Errorf("stage.Errors = %d, want %d", s.Errors, wantErrs)
				}
				if s := graphtest.Stat(t, stats, "src"); s.Errors != 0 {
					t.Errorf("src.Errors = %d, want 0 (the failure is the fused stage's)", s.Errors)
				}
			})
		})
	}
}

func TestFusedErrors(t *testing.T) {
	errBad := errors.New("bad")
	tests := []struct {
		name, node string
		build      func(g *graph.Graph)
		panics     bool
	}{
		{"process error mid-chain", "b", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(10))
			p = graph.Then("a", p, double(), graph.Fused())
			p = graph.Then("b", p, graph.Map(func(_ context.Context, v int) (int, error) {
				if v == 8 {
					return 0, errBad
				}
				return v, nil
			}), graph.Fused())
			graphtest.Collect(graph.Then("c", p, double(), graph.Fused()))
		}, false},
		{"process panic", "a", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(10))
			p = graph.Then("a", p, graph.Map(func(_ context.Context, v int) (int, error) {
				if v == 3 {
					panic(errBad)
				}
				return v, nil
			}), graph.Fused())
			graphtest.Collect(p)
		}, true},
		{"split predicate panic", "route", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(10))
			yes, no := graph.Split("route", p, func(v int) bool {
				if v == 7 {
					panic(errBad)
				}
				return v%2 == 0
			}, graph.Fused())
			graphtest.Collect(yes)
			graphtest.Collect(no)
		}, true},
		{"flush error", "f", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(3))
			graphtest.Collect(graph.Then("f", p, flushFails{errBad}, graph.Fused()))
		}, false},
		{"close error", "c", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(3))
			p = graph.Then("c", p, closeFailsWith{errBad}, graph.Fused())
			graphtest.Collect(p)
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{})
				tc.build(g)
				err := g.Run(t.Context())
				if !errors.Is(err, errBad) {
					t.Fatalf("Run = %v, want %v", err, errBad)
				}
				if tc.panics != errors.Is(err, graph.ErrPanic) {
					t.Errorf("Run = %v: ErrPanic %v, want %v", err, errors.Is(err, graph.ErrPanic), tc.panics)
				}
				if prefix := fmt.Sprintf("graph: node %q: ", tc.node); !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("error %q does not start with %q", err, prefix)
				}
				for _, s := range g.Stats() {
					want := int64(0)
					if s.Name == tc.node {
						want = 1
					}
					if s.Errors != want {
						t.Errorf("%s.Errors = %d, want %d", s.Name, s.Errors, want)
					}
				}
			})
		})
	}
}

type flushFails struct{ err error }

func (s flushFails) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	return emit(ctx, v)
}
func (s flushFails) Flush(context.Context, graph.Emit[int]) error { return s.err }

type closeFailsWith struct{ err error }

func (s closeFailsWith) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	return emit(ctx, v)
}
func (s closeFailsWith) Close() error { return s.err }

// A fused chain stops when the run is cancelled: Close runs, nothing counts an
// error, and no goroutine is left (synctest reports leaks).
func TestFusedCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		g := graph.New(graph.Options{})
		closed := 0
		src := graph.Source(g, "forever", func(ctx context.Context, emit graph.Emit[int]) error {
			for i := 0; ; i++ {
				if err := emit(ctx, i); err != nil {
					return err
				}
			}
		})
		p := graph.Then("stage", src, &lifecycleStage{close: func() { closed++ }}, graph.Fused())
		p = graph.Then("slow", p, graph.Map(func(ctx context.Context, v int) (int, error) {
			select { // a well-behaved slow stage stops waiting when the run ends
			case <-time.After(time.Second):
				return v, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}), graph.Fused())
		yes, no := graph.Split("route", p, func(v int) bool { return v%2 == 0 }, graph.Fused())
		graphtest.Collect(yes)
		graphtest.Collect(no)
		start := time.Now()
		err := g.Run(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run = %v, want DeadlineExceeded", err)
		}
		if took := time.Since(start); took != 5*time.Second {
			t.Errorf("Run returned after %v, want 5s", took)
		}
		if closed != 1 {
			t.Errorf("Close ran %d times, want once", closed)
		}
		for _, s := range g.Stats() {
			if s.Errors != 0 {
				t.Errorf("node %q counted %d errors for a cancellation", s.Name, s.Errors)
			}
		}
	})
}

// A fused node sees a cancelled producer ctx as an unfused one does: emit
// returns ctx's error and the item is not handled.
func TestFusedEmitWithOtherContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		var emitErr error
		src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
			short, cancel := context.WithTimeout(ctx, 2500*time.Millisecond)
			defer cancel()
			for i := 0; ; i++ {
				if emitErr = emit(short, i); emitErr != nil {
					return nil
				}
			}
		})
		got := graphtest.Collect(graph.Then("slow", src, sleepStage(time.Second), graph.Fused()))
		graphtest.Run(t, g)
		if !errors.Is(emitErr, context.DeadlineExceeded) {
			t.Errorf("emit with an expiring ctx returned %v, want DeadlineExceeded", emitErr)
		}
		if n := len(got()); n != 3 {
			t.Errorf("the fused stage handled %d items of 1 s each before a 2.5 s deadline, want 3", n)
		}
	})
}

// The decode loop fused all the way round: Enter → step → split, with the
// back edge the only channel inside the loop.
func TestFusedLoop(t *testing.T) {
	for _, maxInFlight := range []int{1, 3} {
		for _, fuseSplit := range []bool{false, true} {
			t.Run(fmt.Sprintf("max=%d,fuse split=%v", maxInFlight, fuseSplit), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					const n = 7
					want := func(i int) int { return i%4 + 1 }
					g := graph.New(graph.Options{Name: "decode"})
					src := graph.Source(g, "prompts", func(ctx context.Context, emit graph.Emit[*seq]) error {
						for i := range n {
							if err := emit(ctx, &seq{id: i, want: want(i)}); err != nil {
								return err
							}
						}
						return nil
					})
					loop := graph.NewLoop[*seq](g, "loop", maxInFlight)
					stepped := graph.Then("step", loop.Enter(src), graph.Map(func(_ context.Context, s *seq) (*seq, error) {
						time.Sleep(time.Second)
						s.iter++
						return s, nil
					}), graph.Fused())
					var so []graph.NodeOption
					if fuseSplit {
						so = append(so, graph.Fused())
					}
					again, done := graph.Split("more", stepped, func(s *seq) bool { return s.iter < s.want }, so...)
					loop.Return(again)
					got := graphtest.Collect(loop.Exit(done))
					start := time.Now()
					err := g.Run(t.Context())
					r := loopResult{got: got(), elapsed: time.Since(start), stats: g.Stats(), runError: err}
					checkLoop(t, r, n, maxInFlight, want)
					total := 0
					for i := range n {
						total += want(i)
					}
					if s := graphtest.Stat(t, r.stats, "step"); s.In != int64(total) || !s.Fused {
						t.Errorf("step: In = %d, Fused = %v; want %d steps, fused", s.In, s.Fused, total)
					}
					// One goroutine runs every step, one after another.
					if r.elapsed != time.Duration(total)*time.Second {
						t.Errorf("the loop took %v, want %v (the steps in sequence)", r.elapsed, time.Duration(total)*time.Second)
					}
				})
			})
		}
	}
}

func TestFusedThenAny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		src := graphtest.FromSlice(g, "src", ints(4))
		out, err := graph.ThenAny("dbl", src.Any(), graph.Erase(double()), graph.Fused())
		if err != nil {
			t.Fatal(err)
		}
		p, err := graph.PortOf[int](out)
		if err != nil {
			t.Fatal(err)
		}
		got := graphtest.Collect(p)
		stats := graphtest.Run(t, g)
		if diff := cmp.Diff([]int{0, 2, 4, 6}, got()); diff != "" {
			t.Errorf("output (-want +got):\n%s", diff)
		}
		if !graphtest.Stat(t, stats, "dbl").Fused {
			t.Error("dbl is not reported fused")
		}
	})
}

func TestFusedLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		w := zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return buf.Write(p)
		}))
		g := graph.New(graph.Options{Name: "logged", Logger: zerolog.New(w).Level(zerolog.DebugLevel)})
		graphtest.Collect(graph.Then("dbl", graphtest.FromSlice(g, "src", ints(2)), double(), graph.Fused()))
		graphtest.Run(t, g)
		logs := buf.String()
		for _, want := range []string{
			`{"level":"debug","graph":"logged","node":"dbl","kind":"then","fused":true,"message":"node start"}`,
			`{"level":"debug","graph":"logged","node":"dbl","in":2,"out":2,"errors":0,"message":"node stop"}`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %s:\n%s", want, logs)
			}
		}
	})
}

func TestFusedValidate(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *graph.Graph)
		want  []string
		nodes []string
	}{
		{
			name: "not a Then or Split",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1), graph.Fused())
				b := graph.Gather("batch", p, 2, graph.Fused())
				graph.Sink("sink", b, nop[[]int], graph.Fused())
			},
			want: []string{
				`graph: node "src": Fused applies only to Then and Split nodes, not a source`,
				`graph: node "batch": Fused applies only to Then and Split nodes, not a gather`,
				`graph: node "sink": Fused applies only to Then and Split nodes, not a sink`,
			},
			nodes: []string{"src", "batch", "sink"},
		},
		{
			name: "workers and ordered",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1))
				p = graph.Then("w", p, double(), graph.Workers(2), graph.Fused())
				p = graph.Then("o", p, double(), graph.Ordered(), graph.Fused())
				graph.Sink("sink", p, nop[int])
			},
			want: []string{
				`graph: node "w": Fused runs the node on its producer's goroutine, so it takes one worker, not Workers(2)`,
				`graph: node "o": Fused and Ordered: a fused node runs on its producer's goroutine, in its producer's order; Ordered is for Workers(n>1)`,
				`graph: node "o": Fused: its producer "w" has Workers(2), so the node would run on several goroutines at once`,
			},
			nodes: []string{"w", "o", "o"},
		},
		{
			name: "producers that send from several goroutines or to several branches",
			build: func(g *graph.Graph) {
				br := graph.Broadcast("fan", graphtest.FromSlice(g, "src", ints(1)), 2)
				a := graph.Then("a", br[0], double(), graph.Fused())
				m := graph.Merge("merge", a, br[1])
				graph.Sink("sink", graph.Then("b", m, double(), graph.Fused()), nop[int])
			},
			want: []string{
				`graph: node "a": Fused: its producer "fan" is a broadcast, whose branches would then run one after another on its goroutine (a slow branch would stall the others)`,
				`graph: node "b": Fused: its producer "merge" is a merge, which sends from one goroutine per input, so the node would run on several goroutines at once`,
			},
			nodes: []string{"a", "b"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.New(graph.Options{Name: "v"})
			tc.build(g)
			err := g.Validate()
			checkWiring(t, err, tc.want, tc.nodes)
		})
	}
}
