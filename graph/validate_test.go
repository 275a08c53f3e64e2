package graph_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/graph/graphtest"
)

func nop[T any](context.Context, T) error { return nil }

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		build func(g *graph.Graph)
		want  []string // one message per expected *WiringError, in order
		nodes []string // the Node of each
	}{
		{
			name:  "empty graph",
			build: func(*graph.Graph) {},
			want:  []string{`graph: graph "v" has no nodes`},
			nodes: []string{""},
		},
		{
			name: "duplicate name",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "x", ints(1))
				graph.Sink("x", p, nop[int])
			},
			want:  []string{`graph: node "x": duplicate node name (a source and a sink)`},
			nodes: []string{"x"},
		},
		{
			name: "empty name",
			build: func(g *graph.Graph) {
				graph.Sink("", graphtest.FromSlice(g, "src", ints(1)), nop[int])
			},
			want:  []string{`graph: a sink node has an empty name`},
			nodes: []string{""},
		},
		{
			name: "port consumed twice",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1))
				graph.Sink("first", p, nop[int])
				graph.Sink("second", p, nop[int])
			},
			want:  []string{`graph: node "second": port "src" is already consumed by "first" (use Broadcast to fan out)`},
			nodes: []string{"second"},
		},
		{
			name: "dangling ports",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1))
				yes, _ := graph.Split("route", p, func(int) bool { return true })
				graph.Sink("sink", yes, nop[int])
			},
			want:  []string{`graph: node "route": output port "route.no" (int) is never consumed`},
			nodes: []string{"route"},
		},
		{
			name: "bad options",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1), graph.Workers(2), graph.Buffer(-1))
				p = graph.Then("w0", p, double(), graph.Workers(0))
				graph.Sink("sink", p, nop[int], graph.Ordered(), graph.Buffer(3))
			},
			want: []string{
				`graph: node "src": Buffer(-1): capacity must be >= 0`,
				`graph: node "src": Workers applies only to Then and Sink nodes, not a source`,
				`graph: node "w0": Workers(0): need at least 1`,
				`graph: node "sink": Ordered applies only to Then nodes, not a sink`,
				`graph: node "sink": Buffer does not apply to a sink (it has no output)`,
			},
			nodes: []string{"src", "src", "w0", "sink", "sink"},
		},
		{
			name: "nil functions",
			build: func(g *graph.Graph) {
				p := graph.Source[int](g, "src", nil)
				p = graph.Then[int, int]("stage", p, nil)
				yes, no := graph.Split("route", p, nil)
				graph.Sink("sink", graph.Merge("merge", yes, no), nil)
			},
			want: []string{
				`graph: node "src": nil generator`,
				`graph: node "stage": nil stage`,
				`graph: node "route": nil predicate`,
				`graph: node "sink": nil sink function`,
			},
			nodes: []string{"src", "stage", "route", "sink"},
		},
		{
			name: "bad counts",
			build: func(g *graph.Graph) {
				p := graphtest.FromSlice(g, "src", ints(1))
				graph.Broadcast("fan", p, 0)
				q := graphtest.FromSlice(g, "src2", ints(1))
				graph.Sink("sink", graph.Gather("batch", q, 0), nop[[]int])
			},
			want: []string{
				`graph: node "fan": Broadcast to 0 branches: need at least 1`,
				`graph: node "batch": Gather of at most 0 items: need at least 1`,
			},
			nodes: []string{"fan", "batch"},
		},
		{
			name: "port from another graph",
			build: func(g *graph.Graph) {
				other := graph.New(graph.Options{Name: "other"})
				foreign := graphtest.FromSlice(other, "foreign", ints(1))
				local := graphtest.FromSlice(g, "local", ints(1))
				graph.Sink("sink", graph.Merge("merge", local, foreign), nop[int])
			},
			want:  []string{`graph: node "merge": input port "foreign" belongs to graph "other", not "v"`},
			nodes: []string{"merge"},
		},
		{
			name: "loop without Return and Exit",
			build: func(g *graph.Graph) {
				loop := graph.NewLoop[int](g, "loop", 2)
				graph.Sink("sink", loop.Enter(graphtest.FromSlice(g, "src", ints(1))), nop[int])
			},
			want: []string{
				`graph: node "loop": loop Return is never called`,
				`graph: node "loop": loop Exit is never called`,
			},
			nodes: []string{"loop", "loop"},
		},
		{
			name: "loop wired twice and from another graph",
			build: func(g *graph.Graph) {
				other := graph.New(graph.Options{Name: "other"})
				loop := graph.NewLoop[int](g, "loop", 0)
				in := loop.Enter(graphtest.FromSlice(g, "src", ints(1)))
				again, done := graph.Split("more", in, func(int) bool { return false })
				loop.Return(again)
				loop.Return(graphtest.FromSlice(other, "foreign", ints(1)))
				graph.Sink("sink", loop.Exit(done), nop[int])
			},
			want: []string{
				`graph: node "loop": loop with maxInFlight 0: need at least 1`,
				`graph: node "loop": loop Return called twice`,
			},
			nodes: []string{"loop", "loop"},
		},
		{
			name: "loop Return before Enter",
			build: func(g *graph.Graph) {
				loop := graph.NewLoop[int](g, "loop", 1)
				src := graphtest.FromSlice(g, "src", ints(1))
				loop.Return(src)
				graph.Sink("sink", loop.Exit(loop.Enter(graphtest.FromSlice(g, "src2", ints(1)))), nop[int])
			},
			want: []string{
				`graph: node "loop": loop Return before Enter`,
				`graph: node "src": output port "src" (int) is never consumed`,
				`graph: node "loop": loop Return is never called`,
			},
			nodes: []string{"loop", "src", "loop"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := graph.New(graph.Options{Name: "v"})
			tc.build(g)
			err := g.Validate()
			checkWiring(t, err, tc.want, tc.nodes)
			// Run refuses the same graph without starting anything.
			if runErr := g.Run(t.Context()); runErr == nil || runErr.Error() != err.Error() {
				t.Errorf("Run = %v, want the validation error", runErr)
			}
		})
	}
}

func TestZeroPortPanics(t *testing.T) {
	tests := map[string]func(){
		"Then":  func() { graph.Then("x", graph.Port[int]{}, double()) },
		"Sink":  func() { graph.Sink("x", graph.Port[int]{}, nop[int]) },
		"Merge": func() { graph.Merge[int]("x") },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, `"x"`) {
					t.Errorf("panic %v does not name the node", r)
				}
			}()
			f()
		})
	}
}

func TestAddAfterRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		p := graphtest.FromSlice(g, "src", ints(1))
		graph.Sink("sink", p, nop[int])
		graphtest.Run(t, g)
		graphtest.FromSlice(g, "late", ints(1))
		if err := g.Validate(); err == nil || !strings.Contains(err.Error(), `node "late": added after Run`) {
			t.Errorf("Validate after adding to a run graph = %v", err)
		}
	})
}

type strLen struct{}

func (strLen) Process(ctx context.Context, s string, emit graph.Emit[int]) error {
	return emit(ctx, len(s))
}

func TestThenAny(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		words := graphtest.FromSlice(g, "words", []string{"a", "bcd", ""}).Any()
		stage := graph.Erase[string, int](strLen{})
		if stage.In() != reflect.TypeFor[string]() || stage.Out() != reflect.TypeFor[int]() {
			t.Fatalf("erased types %v → %v", stage.In(), stage.Out())
		}
		if _, ok := stage.Stage().(strLen); !ok {
			t.Errorf("Stage() = %T, want strLen", stage.Stage())
		}
		lens, err := graph.ThenAny("len", words, stage)
		if err != nil {
			t.Fatal(err)
		}
		// Wiring the same erased stage onto an int port is refused, naming both types.
		_, err = graph.ThenAny("len2", lens, stage)
		if !errors.Is(err, graph.ErrTypeMismatch) {
			t.Fatalf("ThenAny on int port = %v, want ErrTypeMismatch", err)
		}
		if want := `graph: node "len2": type mismatch: port "len" carries int, stage takes string`; err.Error() != want {
			t.Errorf("error = %q, want %q", err, want)
		}
		if _, err := graph.PortOf[string](lens); !errors.Is(err, graph.ErrTypeMismatch) ||
			err.Error() != `graph: port "len": type mismatch: carries int, want string` {
			t.Errorf("PortOf[string] = %v", err)
		}
		if lens.Type() != reflect.TypeFor[int]() || lens.Name() != "len" {
			t.Errorf("AnyPort Type/Name = %v/%q", lens.Type(), lens.Name())
		}
		typed, err := graph.PortOf[int](lens)
		if err != nil {
			t.Fatal(err)
		}
		got := graphtest.Collect(typed)
		graphtest.Run(t, g)
		if diff := cmp.Diff([]int{1, 3, 0}, got()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestThenAnyBadInput(t *testing.T) {
	g := graph.New(graph.Options{})
	p := graphtest.FromSlice(g, "src", []string{"x"}).Any()
	tests := []struct {
		name  string
		in    graph.AnyPort
		stage graph.AnyStage
		want  string
	}{
		{"zero port", graph.AnyPort{}, graph.Erase[string, int](strLen{}), `graph: node "n": input is the zero AnyPort`},
		{"nil stage", p, nil, `graph: node "n": nil AnyStage`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := graph.ThenAny("n", tc.in, tc.stage); fmt.Sprint(err) != tc.want {
				t.Errorf("ThenAny = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := graph.PortOf[int](graph.AnyPort{}); err == nil {
		t.Error("PortOf of the zero AnyPort succeeded")
	}
}

// checkWiring holds err, from Validate, to be ErrInvalid joining one
// *WiringError per wanted message, in order, with the nodes they name.
func checkWiring(t *testing.T, err error, want, wantNodes []string) {
	t.Helper()
	if !errors.Is(err, graph.ErrInvalid) {
		t.Fatalf("Validate = %v, want ErrInvalid", err)
	}
	var msgs, nodes []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		we, ok := errors.AsType[*graph.WiringError](e)
		if !ok {
			t.Fatalf("%T %v is not a *WiringError", e, e)
		}
		msgs, nodes = append(msgs, we.Error()), append(nodes, we.Node)
	}
	if diff := cmp.Diff(want, msgs); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantNodes, nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
}
