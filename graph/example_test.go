package graph_test

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/graph"
)

// upper is a Stage with a Flush: it emits a trailer once its input ends.
type upper struct{ n int }

func (u *upper) Process(ctx context.Context, s string, emit graph.Emit[string]) error {
	u.n++
	return emit(ctx, strings.ToUpper(s))
}

func (u *upper) Flush(ctx context.Context, emit graph.Emit[string]) error {
	return emit(ctx, fmt.Sprintf("(%d words)", u.n))
}

func Example() {
	g := graph.New(graph.Options{Name: "shout"})
	words := graph.Source(g, "words", func(ctx context.Context, emit graph.Emit[string]) error {
		for _, w := range strings.Fields("stages joined by bounded channels") {
			if err := emit(ctx, w); err != nil {
				return err
			}
		}
		return nil
	})
	loud := graph.Then("upper", words, &upper{})
	graph.Sink("print", loud, func(_ context.Context, s string) error {
		fmt.Println(s)
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	for _, s := range g.Stats() {
		fmt.Printf("%s: in=%d out=%d\n", s.Name, s.In, s.Out)
	}
	// Output:
	// STAGES
	// JOINED
	// BY
	// BOUNDED
	// CHANNELS
	// (5 words)
	// words: in=0 out=5
	// upper: in=5 out=6
	// print: in=6 out=0
}

// A decode loop: each sequence goes round until it has its tokens, and at most two
// sequences are inside the loop at once.
func ExampleLoop() {
	type seq struct {
		id     int
		tokens []string
	}
	g := graph.New(graph.Options{})
	prompts := graph.Source(g, "prompts", func(ctx context.Context, emit graph.Emit[*seq]) error {
		for id := range 3 {
			if err := emit(ctx, &seq{id: id}); err != nil {
				return err
			}
		}
		return nil
	})
	loop := graph.NewLoop[*seq](g, "decode", 2)
	stepped := graph.Then("step", loop.Enter(prompts), graph.Map(func(_ context.Context, s *seq) (*seq, error) {
		s.tokens = append(s.tokens, fmt.Sprintf("t%d", len(s.tokens)))
		return s, nil
	}))
	more, done := graph.Split("finished?", stepped, func(s *seq) bool { return len(s.tokens) < s.id+2 })
	loop.Return(more)
	var out []string
	graph.Sink("collect", loop.Exit(done), func(_ context.Context, s *seq) error {
		out = append(out, fmt.Sprintf("seq %d: %s", s.id, strings.Join(s.tokens, " ")))
		return nil
	})
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	slices.Sort(out)
	fmt.Println(strings.Join(out, "\n"))
	// Output:
	// seq 0: t0 t1
	// seq 1: t0 t1 t2
	// seq 2: t0 t1 t2 t3
}

func ExampleThenAny() {
	g := graph.New(graph.Options{})
	words := graph.Source(g, "words", func(ctx context.Context, emit graph.Emit[string]) error {
		return emit(ctx, "hello")
	})
	count := graph.Erase(graph.Map(func(_ context.Context, s string) (int, error) { return len(s), nil }))
	// A loader knows stages only by kind; a wrong edge is caught before Run.
	if _, err := graph.ThenAny("twice", graph.Port[int]{}.Any(), count); err != nil {
		fmt.Println(err)
	}
	lens, err := graph.ThenAny("count", words.Any(), count)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = graph.ThenAny("again", lens, count)
	fmt.Println(err)
	// Output:
	// graph: node "twice": input is the zero AnyPort
	// graph: node "again": type mismatch: port "count" carries int, stage takes string
}
