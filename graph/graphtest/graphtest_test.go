package graphtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/graph/graphtest"
)

func TestCollectAndRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := graph.New(graph.Options{})
		p := graphtest.FromSlice(g, "src", []string{"a", "b", "c"})
		got := graphtest.Collect(p)
		if len(got()) != 0 {
			t.Errorf("collected %v before Run", got())
		}
		stats := graphtest.Run(t, g)
		if diff := cmp.Diff([]string{"a", "b", "c"}, got()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if s := graphtest.Stat(t, stats, "collect(src)"); s.In != 3 || s.Kind != "sink" {
			t.Errorf("collector stats %+v", s)
		}
	})
}

// TestNoLeaks runs a graph on real time, outside synctest, with a cancelled run in
// the middle: every goroutine must be gone when the test ends.
func TestNoLeaks(t *testing.T) {
	graphtest.NoLeaks(t)
	g := graph.New(graph.Options{})
	p := graph.Source(g, "forever", func(ctx context.Context, emit graph.Emit[int]) error {
		for i := 0; ; i++ {
			if err := emit(ctx, i); err != nil {
				return err
			}
		}
	})
	fail := errors.New("stop here")
	p = graph.Then("stop", p, graph.Map(func(_ context.Context, v int) (int, error) {
		if v == 1000 {
			return 0, fail
		}
		return v, nil
	}), graph.Workers(3), graph.Ordered())
	br := graph.Broadcast("fan", p, 2)
	graphtest.Collect(br[0])
	graphtest.Collect(br[1])
	if err := g.Run(t.Context()); !errors.Is(err, fail) {
		t.Fatalf("Run = %v, want %v", err, fail)
	}
}

func ExampleCollect() {
	g := graph.New(graph.Options{})
	squares := graph.Then("square", graphtest.FromSlice(g, "n", []int{1, 2, 3}),
		graph.Map(func(_ context.Context, v int) (int, error) { return v * v, nil }))
	got := graphtest.Collect(squares)
	if err := g.Run(context.Background()); err != nil {
		fmt.Println(err)
	}
	fmt.Println(got())
	// Output: [1 4 9]
}
