package graph_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
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

func ints(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func double() graph.Stage[int, int] {
	return graph.Map(func(_ context.Context, v int) (int, error) { return 2 * v, nil })
}

// sleepSink returns a sink function that takes d per item (fake time under synctest).
func sleepSink[T any](d time.Duration, seen *atomic.Int64) func(context.Context, T) error {
	return func(context.Context, T) error {
		time.Sleep(d)
		seen.Add(1)
		return nil
	}
}

func TestChain(t *testing.T) {
	tests := []struct {
		name string
		n    int
		opts []graph.NodeOption
	}{
		{"empty", 0, nil},
		{"one", 1, nil},
		{"many", 100, nil},
		{"rendezvous", 50, []graph.NodeOption{graph.Buffer(0)}},
		{"wide buffers", 50, []graph.NodeOption{graph.Buffer(16)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{Name: "chain"})
				p := graphtest.FromSlice(g, "src", ints(tc.n), tc.opts...)
				p = graph.Then("a", p, double(), tc.opts...)
				p = graph.Then("b", p, graph.StageFunc[int, int](func(ctx context.Context, v int, emit graph.Emit[int]) error {
					// 0..n emissions per input: drop multiples of 3, duplicate multiples of 5.
					if v%3 == 0 {
						return nil
					}
					if v%5 == 0 {
						if err := emit(ctx, v); err != nil {
							return err
						}
					}
					return emit(ctx, v)
				}), tc.opts...)
				got := graphtest.Collect(p)
				stats := graphtest.Run(t, g)

				var want []int
				for i := range tc.n {
					v := 2 * i
					if v%3 == 0 {
						continue
					}
					if v%5 == 0 {
						want = append(want, v)
					}
					want = append(want, v)
				}
				if diff := cmp.Diff(want, got()); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
				b := graphtest.Stat(t, stats, "b")
				if b.In != int64(tc.n) || b.Out != int64(len(want)) {
					t.Errorf("node b: In=%d Out=%d, want %d and %d", b.In, b.Out, tc.n, len(want))
				}
			})
		})
	}
}

func TestBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 20
		const per = time.Second
		g := graph.New(graph.Options{})
		var emitted, sunk atomic.Int64
		var maxInFlight int64
		src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
			for i := range n {
				if f := emitted.Load() - sunk.Load(); f > maxInFlight {
					maxInFlight = f
				}
				if err := emit(ctx, i); err != nil {
					return err
				}
				emitted.Add(1)
			}
			return nil
		})
		mid := graph.Then("mid", src, double(), graph.Buffer(2))
		graph.Sink("slow", mid, sleepSink[int](per, &sunk))
		start := time.Now()
		stats := graphtest.Run(t, g)

		if got, want := time.Since(start), n*per; got != want {
			t.Errorf("run took %v of fake time, want %v", got, want)
		}
		slow, s := graphtest.Stat(t, stats, "slow"), graphtest.Stat(t, stats, "src")
		if slow.Busy != n*per {
			t.Errorf("sink Busy = %v, want %v", slow.Busy, n*per)
		}
		if slow.BlockedOnRecv != 0 {
			t.Errorf("sink BlockedOnRecv = %v, want 0 (it is the bottleneck)", slow.BlockedOnRecv)
		}
		// The source fills the buffers in no time, then waits one sink step per item.
		capSum := 0
		for _, st := range stats {
			capSum += st.Capacity
		}
		if min := time.Duration(n-capSum-3) * per; s.BlockedOnSend < min {
			t.Errorf("source BlockedOnSend = %v, want >= %v", s.BlockedOnSend, min)
		}
		if s.Busy != 0 {
			t.Errorf("source Busy = %v, want 0 (all its time is backpressure)", s.Busy)
		}
		// In flight: the channel capacities plus one item in the hands of each consumer.
		if limit := int64(capSum + 2); maxInFlight > limit {
			t.Errorf("max items in flight = %d, want <= %d", maxInFlight, limit)
		}
		if sunk.Load() != n {
			t.Errorf("sink saw %d items, want %d", sunk.Load(), n)
		}
	})
}

func TestStatsWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		var sunk atomic.Int64
		p := graphtest.FromSlice(g, "src", ints(10), graph.Buffer(3))
		graph.Sink("slow", p, sleepSink[int](time.Second, &sunk))
		errc := make(chan error)
		go func() { errc <- g.Run(t.Context()) }()
		time.Sleep(2500 * time.Millisecond)
		synctest.Wait()
		src := graphtest.Stat(t, g.Stats(), "src")
		// After 2.5 s the sink has finished 2 items and holds the third; the buffer is full.
		if src.Queued != 3 || src.Capacity != 3 || src.Out != 6 {
			t.Errorf("mid-run src stats: Queued=%d Capacity=%d Out=%d, want 3, 3, 6", src.Queued, src.Capacity, src.Out)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		if got := graphtest.Stat(t, g.Stats(), "slow").In; got != 10 {
			t.Errorf("sink In = %d, want 10", got)
		}
	})
}

func TestCancellation(t *testing.T) {
	errStop := errors.New("operator stop")
	tests := []struct {
		name string
		ctx  func(context.Context) (context.Context, func())
		want error
	}{
		{"cancel with cause", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancelCause(ctx)
			go func() { time.Sleep(5 * time.Second); cancel(errStop) }()
			return ctx, func() { cancel(nil) }
		}, errStop},
		{"plain cancel", func(ctx context.Context) (context.Context, func()) {
			ctx, cancel := context.WithCancel(ctx)
			go func() { time.Sleep(5 * time.Second); cancel() }()
			return ctx, cancel
		}, context.Canceled},
		{"deadline", func(ctx context.Context) (context.Context, func()) {
			return context.WithTimeout(ctx, 5*time.Second)
		}, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, stop := tc.ctx(t.Context())
				defer stop()
				g := graph.New(graph.Options{})
				closed := false
				src := graph.Source(g, "forever", func(ctx context.Context, emit graph.Emit[int]) error {
					for i := 0; ; i++ {
						if err := emit(ctx, i); err != nil {
							return err
						}
					}
				})
				p := graph.Then("stage", src, &lifecycleStage{close: func() { closed = true }})
				graph.Sink("slow", p, func(ctx context.Context, _ int) error {
					select { // a well-behaved slow sink stops waiting when the run ends
					case <-time.After(time.Second):
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				})
				start := time.Now()
				err := g.Run(ctx)
				if !errors.Is(err, tc.want) {
					t.Fatalf("Run = %v, want %v", err, tc.want)
				}
				if took := time.Since(start); took != 5*time.Second {
					t.Errorf("Run returned after %v, want 5s", took)
				}
				if !closed {
					t.Error("Close was not called after cancellation")
				}
				for _, s := range g.Stats() {
					if s.Errors != 0 {
						t.Errorf("node %q counted %d errors for a cancellation", s.Name, s.Errors)
					}
				}
			})
		})
	}
}

func TestFirstErrorWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errA, errB := errors.New("a broke"), errors.New("b broke")
		g := graph.New(graph.Options{})
		br := graph.Broadcast("fan", graphtest.FromSlice(g, "src", ints(100)), 2)
		// Both branches fail; a after 2 s, b after 3 s (its sleep ignores cancellation).
		failAfter := func(d time.Duration, err error) graph.Stage[int, int] {
			return graph.Map(func(_ context.Context, v int) (int, error) {
				time.Sleep(d)
				return 0, err
			})
		}
		graphtest.Collect(graph.Then("a", br[0], failAfter(2*time.Second, errA)))
		graphtest.Collect(graph.Then("b", br[1], failAfter(3*time.Second, errB)))
		err := g.Run(t.Context())
		if !errors.Is(err, errA) || errors.Is(err, errB) {
			t.Fatalf("Run = %v, want a's error only", err)
		}
		if want := `graph: node "a": a broke`; err.Error() != want {
			t.Errorf("error text = %q, want %q", err.Error(), want)
		}
		stats := g.Stats()
		for name, want := range map[string]int64{"a": 1, "b": 1, "src": 0, "fan": 0, "collect(a)": 0} {
			if got := graphtest.Stat(t, stats, name).Errors; got != want {
				t.Errorf("%s.Errors = %d, want %d", name, got, want)
			}
		}
	})
}

func TestSinkAndSourceErrors(t *testing.T) {
	errBad := errors.New("bad")
	tests := []struct {
		name, node string
		build      func(g *graph.Graph)
	}{
		{"source", "src", func(g *graph.Graph) {
			p := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
				if err := emit(ctx, 1); err != nil {
					return err
				}
				return errBad
			})
			graph.Sink("sink", p, func(context.Context, int) error { return nil })
		}},
		{"sink", "sink", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(10))
			graph.Sink("sink", p, func(_ context.Context, v int) error {
				if v == 4 {
					return errBad
				}
				return nil
			}, graph.Workers(3))
		}},
		{"split predicate panic", "route", func(g *graph.Graph) {
			p := graphtest.FromSlice(g, "src", ints(10))
			yes, no := graph.Split("route", p, func(v int) bool {
				if v == 7 {
					panic(errBad)
				}
				return v%2 == 0
			})
			graphtest.Collect(yes)
			graphtest.Collect(no)
		}},
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
				if prefix := fmt.Sprintf("graph: node %q: ", tc.node); !strings.HasPrefix(err.Error(), prefix) {
					t.Errorf("error %q does not start with %q", err, prefix)
				}
			})
		})
	}
}

func TestPanicRecovery(t *testing.T) {
	errVal := errors.New("value error")
	tests := []struct {
		name   string
		value  any
		isErr  error
		inText string
	}{
		{"string", "boom", nil, "panic: boom"},
		{"error value", errVal, errVal, "panic: value error"},
		{"runtime error", nil, nil, "index out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{})
				p := graphtest.FromSlice(g, "src", ints(5))
				p = graph.Then("fragile", p, graph.Map(func(_ context.Context, v int) (int, error) {
					if v == 2 {
						if tc.value == nil {
							var s []int
							return s[v], nil
						}
						panic(tc.value)
					}
					return v, nil
				}))
				graphtest.Collect(p)
				err := g.Run(t.Context())
				if !errors.Is(err, graph.ErrPanic) {
					t.Fatalf("Run = %v, want ErrPanic", err)
				}
				if tc.isErr != nil && !errors.Is(err, tc.isErr) {
					t.Errorf("errors.Is(err, %v) = false", tc.isErr)
				}
				msg := err.Error()
				if !strings.HasPrefix(msg, `graph: node "fragile": panic: `) || !strings.Contains(msg, tc.inText) {
					t.Errorf("message head %q lacks node name or %q", firstLine(msg), tc.inText)
				}
				if !strings.Contains(msg, "goroutine ") || !strings.Contains(msg, "graph_test.go") {
					t.Errorf("message tail has no stack:\n%s", msg)
				}
			})
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// lifecycleStage records its lifecycle calls and can be told to fail at any step.
type lifecycleStage struct {
	mu        sync.Mutex
	events    []string
	failSetup bool
	failAt    int // Process fails on this input (0 = never)
	flushEmit []int
	close     func()
}

func (s *lifecycleStage) log(e string) {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

func (s *lifecycleStage) Setup(context.Context) error {
	s.log("setup")
	if s.failSetup {
		return errors.New("setup failed")
	}
	return nil
}

func (s *lifecycleStage) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	s.log(fmt.Sprint("process ", v))
	if s.failAt != 0 && v == s.failAt {
		return errors.New("process failed")
	}
	return emit(ctx, v)
}

func (s *lifecycleStage) Flush(ctx context.Context, emit graph.Emit[int]) error {
	s.log("flush")
	for _, v := range s.flushEmit {
		if err := emit(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *lifecycleStage) Close() error {
	s.log("close")
	if s.close != nil {
		s.close()
	}
	return nil
}

var (
	_ graph.Stage[int, int] = (*lifecycleStage)(nil)
	_ graph.Setupper        = (*lifecycleStage)(nil)
	_ graph.Flusher[int]    = (*lifecycleStage)(nil)
	_ graph.Closer          = (*lifecycleStage)(nil)
)

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name       string
		stage      *lifecycleStage
		wantEvents []string
		wantOut    []int
		partial    bool // a failed run may drop items still in buffers: got is a prefix of wantOut
		wantErr    string
	}{
		{
			name:       "ok with flush emitting",
			stage:      &lifecycleStage{flushEmit: []int{100, 101}},
			wantEvents: []string{"setup", "process 1", "process 2", "process 3", "flush", "close"},
			wantOut:    []int{1, 2, 3, 100, 101},
		},
		{
			name:       "process error skips flush, still closes",
			stage:      &lifecycleStage{failAt: 2, flushEmit: []int{100}},
			wantEvents: []string{"setup", "process 1", "process 2", "close"},
			wantOut:    []int{1},
			partial:    true,
			wantErr:    `graph: node "stage": process failed`,
		},
		{
			name:       "setup error skips process, still closes",
			stage:      &lifecycleStage{failSetup: true},
			wantEvents: []string{"setup", "close"},
			wantErr:    `graph: node "stage": setup failed`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{})
				p := graphtest.FromSlice(g, "src", []int{1, 2, 3})
				p = graph.Then("stage", p, tc.stage)
				got := graphtest.Collect(p)
				err := g.Run(t.Context())
				if gotErr := fmt.Sprint(err); (err != nil || tc.wantErr != "") && gotErr != tc.wantErr {
					t.Errorf("Run = %v, want %q", err, tc.wantErr)
				}
				if diff := cmp.Diff(tc.wantEvents, tc.stage.events); diff != "" {
					t.Errorf("lifecycle (-want +got):\n%s", diff)
				}
				out := got()
				if tc.partial && len(out) < len(tc.wantOut) {
					tc.wantOut = tc.wantOut[:len(out)]
				}
				if diff := cmp.Diff(tc.wantOut, out, cmpNilEmpty); diff != "" {
					t.Errorf("output (-want +got):\n%s", diff)
				}
			})
		})
	}
}

func TestCloseErrorReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		p := graphtest.FromSlice(g, "src", ints(3))
		p = graph.Then("stage", p, closeFails{})
		graphtest.Collect(p)
		err := g.Run(t.Context())
		if want := `graph: node "stage": close failed`; fmt.Sprint(err) != want {
			t.Fatalf("Run = %v, want %q", err, want)
		}
	})
}

type closeFails struct{}

func (closeFails) Process(ctx context.Context, v int, emit graph.Emit[int]) error {
	return emit(ctx, v)
}
func (closeFails) Close() error { return errors.New("close failed") }

func TestWorkers(t *testing.T) {
	const n, workers = 40, 4
	// Item i takes (i*7)%5+1 seconds, so later items often finish first.
	cost := func(i int) time.Duration { return time.Duration((i*7)%5+1) * time.Second }
	var total time.Duration
	for i := range n {
		total += cost(i)
	}
	tests := []struct {
		name    string
		opts    []graph.NodeOption
		ordered bool
	}{
		{"unordered", []graph.NodeOption{graph.Workers(workers)}, false},
		{"ordered", []graph.NodeOption{graph.Workers(workers), graph.Ordered()}, true},
		{"ordered wide buffer", []graph.NodeOption{graph.Workers(workers), graph.Ordered(), graph.Buffer(8)}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := graph.New(graph.Options{})
				p := graphtest.FromSlice(g, "src", ints(n))
				var busyNow, maxBusy atomic.Int64
				p = graph.Then("work", p, graph.StageFunc[int, int](func(ctx context.Context, v int, emit graph.Emit[int]) error {
					if b := busyNow.Add(1); b > maxBusy.Load() {
						maxBusy.Store(b)
					}
					time.Sleep(cost(v))
					busyNow.Add(-1)
					// Two outputs per input, to check that they stay together in order.
					if err := emit(ctx, 2*v); err != nil {
						return err
					}
					return emit(ctx, 2*v+1)
				}), tc.opts...)
				got := graphtest.Collect(p)
				start := time.Now()
				stats := graphtest.Run(t, g)
				elapsed := time.Since(start)

				out := got()
				want := ints(2 * n)
				if tc.ordered {
					if diff := cmp.Diff(want, out); diff != "" {
						t.Errorf("ordered output (-want +got):\n%s", diff)
					}
				} else {
					if slices.Equal(want, out) {
						t.Error("unordered workers kept input order exactly; the test costs do not exercise reordering")
					}
					slices.Sort(out)
					if diff := cmp.Diff(want, out); diff != "" {
						t.Errorf("output multiset (-want +got):\n%s", diff)
					}
				}
				if maxBusy.Load() != workers {
					t.Errorf("max concurrent Process calls = %d, want %d", maxBusy.Load(), workers)
				}
				if elapsed > total/workers+2*5*time.Second {
					t.Errorf("run took %v, want about %v (total %v over %d workers)", elapsed, total/workers, total, workers)
				}
				w := graphtest.Stat(t, stats, "work")
				if w.Workers != workers || w.Busy != total || w.In != n || w.Out != 2*n {
					t.Errorf("work stats: Workers=%d Busy=%v In=%d Out=%d, want %d, %v, %d, %d",
						w.Workers, w.Busy, w.In, w.Out, workers, total, n, 2*n)
				}
			})
		})
	}
}

func TestOrderedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		p := graphtest.FromSlice(g, "src", ints(50))
		p = graph.Then("work", p, graph.Map(func(_ context.Context, v int) (int, error) {
			time.Sleep(time.Duration(v%3) * time.Second)
			if v == 20 {
				return 0, errors.New("item 20")
			}
			return v, nil
		}), graph.Workers(3), graph.Ordered())
		got := graphtest.Collect(p)
		err := g.Run(t.Context())
		if fmt.Sprint(err) != `graph: node "work": item 20` {
			t.Fatalf("Run = %v", err)
		}
		// Whatever got out before the failure is an in-order prefix.
		out := got()
		if diff := cmp.Diff(ints(len(out)), out); diff != "" || len(out) > 20 {
			t.Errorf("output before the error is not an in-order prefix of at most 20 (-want +got):\n%s", diff)
		}
	})
}

func TestBroadcastSlowBranch(t *testing.T) {
	for _, buf := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("buffer=%d", buf), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 20
				g := graph.New(graph.Options{})
				src := graphtest.FromSlice(g, "src", ints(n), graph.Buffer(n))
				br := graph.Broadcast("fan", src, 2, graph.Buffer(buf))
				var slowSeen atomic.Int64
				graph.Sink("slow", br[0], sleepSink[int](time.Hour, &slowSeen))
				fast := graphtest.Collect(br[1])
				errc := make(chan error)
				go func() { errc <- g.Run(t.Context()) }()
				time.Sleep(time.Second)
				synctest.Wait()
				// The slow sink holds item 0, its buffer holds buf more, and the
				// broadcast is blocked handing item buf+1 to it: the fast branch got
				// exactly items 0..buf.
				if got := len(fast()); got != buf+1 {
					t.Errorf("fast branch has %d items while the slow one is stuck, want %d", got, buf+1)
				}
				if err := <-errc; err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(ints(n), fast()); diff != "" {
					t.Errorf("fast branch (-want +got):\n%s", diff)
				}
				if slowSeen.Load() != n {
					t.Errorf("slow branch saw %d, want %d", slowSeen.Load(), n)
				}
				if out := graphtest.Stat(t, g.Stats(), "fan").Out; out != 2*n {
					t.Errorf("fan.Out = %d, want %d", out, 2*n)
				}
			})
		})
	}
}

func TestMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		var ins []graph.Port[int]
		sizes := []int{0, 5, 17, 1}
		for i, size := range sizes {
			items := make([]int, size)
			for j := range items {
				items[j] = i*1000 + j
			}
			ins = append(ins, graphtest.FromSlice(g, fmt.Sprint("src", i), items))
		}
		got := graphtest.Collect(graph.Merge("merge", ins...))
		graphtest.Run(t, g)
		perInput := make([][]int, len(sizes))
		for _, v := range got() {
			perInput[v/1000] = append(perInput[v/1000], v%1000)
		}
		for i, size := range sizes {
			if diff := cmp.Diff(ints(size), perInput[i], cmpNilEmpty); diff != "" {
				t.Errorf("input %d order (-want +got):\n%s", i, diff)
			}
		}
	})
}

var cmpNilEmpty = cmp.Comparer(func(a, b []int) bool { return slices.Equal(a, b) })

func TestSplit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		src := graphtest.FromSlice(g, "src", ints(30))
		even, odd := graph.Split("parity", src, func(v int) bool { return v%2 == 0 })
		if even.Name() != "parity.yes" || odd.Name() != "parity.no" {
			t.Errorf("port names %q, %q", even.Name(), odd.Name())
		}
		gotEven, gotOdd := graphtest.Collect(even), graphtest.Collect(odd)
		graphtest.Run(t, g)
		var wantEven, wantOdd []int
		for i := range 30 {
			if i%2 == 0 {
				wantEven = append(wantEven, i)
			} else {
				wantOdd = append(wantOdd, i)
			}
		}
		if diff := cmp.Diff(wantEven, gotEven()); diff != "" {
			t.Errorf("yes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(wantOdd, gotOdd()); diff != "" {
			t.Errorf("no (-want +got):\n%s", diff)
		}
	})
}

func TestGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		// The source emits bursts of 7 items, then pauses: batches never mix bursts
		// and never exceed 3.
		src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
			for i := range 21 {
				if i > 0 && i%7 == 0 {
					time.Sleep(time.Second)
				}
				if err := emit(ctx, i); err != nil {
					return err
				}
			}
			return nil
		}, graph.Buffer(10))
		var sunk atomic.Int64
		batches := graph.Gather("gather", src, 3)
		slow := graph.Then("slow", batches, graph.Map(func(_ context.Context, b []int) ([]int, error) {
			time.Sleep(time.Millisecond)
			sunk.Add(1)
			return b, nil
		}))
		got := graphtest.Collect(slow)
		graphtest.Run(t, g)
		var flat []int
		for _, b := range got() {
			if len(b) == 0 || len(b) > 3 {
				t.Errorf("batch %v: size outside 1..3", b)
			}
			if b[0]/7 != b[len(b)-1]/7 {
				t.Errorf("batch %v mixes bursts", b)
			}
			flat = append(flat, b...)
		}
		if diff := cmp.Diff(ints(21), flat); diff != "" {
			t.Errorf("items (-want +got):\n%s", diff)
		}
		if len(got()) >= 21 {
			t.Errorf("%d batches for 21 items: nothing was gathered", len(got()))
		}
	})
}

func TestRunTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		graphtest.Collect(graphtest.FromSlice(g, "src", ints(3)))
		graphtest.Run(t, g)
		if err := g.Run(t.Context()); !errors.Is(err, graph.ErrAlreadyRun) {
			t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
		}
	})
}

func TestEmitWithOtherContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		var emitErr error
		src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
			short, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			for i := 0; ; i++ {
				if emitErr = emit(short, i); emitErr != nil {
					return nil // the source decides the deadline ends its stream
				}
			}
		})
		var sunk atomic.Int64
		graph.Sink("slow", src, sleepSink[int](time.Second, &sunk))
		graphtest.Run(t, g)
		if !errors.Is(emitErr, context.DeadlineExceeded) {
			t.Errorf("emit with an expiring ctx returned %v, want DeadlineExceeded", emitErr)
		}
		if got := sunk.Load(); got < 3 || got > 6 {
			t.Errorf("sink saw %d items, want about 3 s worth plus buffers", got)
		}
	})
}

func TestLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var mu sync.Mutex
		w := zerolog.SyncWriter(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return buf.Write(p)
		}))
		g := graph.New(graph.Options{Name: "logged", Logger: zerolog.New(w).Level(zerolog.DebugLevel)})
		graphtest.Collect(graph.Then("dbl", graphtest.FromSlice(g, "src", ints(2)), double()))
		graphtest.Run(t, g)
		logs := buf.String()
		for _, want := range []string{
			`{"level":"debug","graph":"logged","node":"dbl","kind":"then","message":"node start"}`,
			`{"level":"debug","graph":"logged","node":"dbl","in":2,"out":2,"errors":0,"message":"node stop"}`,
			`"node":"src"`, `"node":"collect(dbl)"`,
		} {
			if !strings.Contains(logs, want) {
				t.Errorf("log lacks %s:\n%s", want, logs)
			}
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
