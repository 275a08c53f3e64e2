// Package graphtest helps test graphs: a recording sink, a slice source, a Run that
// fails the test, and a goroutine-leak check for tests that cannot use synctest.
//
// Graph tests should run inside synctest.Test: fake time makes backpressure and
// blocking instant and deterministic, and the bubble reports leaked goroutines.
package graphtest

import (
	"context"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/graph"
)

// Collect consumes p with a sink named "collect(<port>)" that records every item.
// The returned function gives a copy of what was recorded so far; after Run has
// returned it is the complete output, in arrival order.
func Collect[T any](p graph.Port[T]) func() []T {
	var (
		mu  sync.Mutex
		got []T
	)
	graph.Sink("collect("+p.Name()+")", p, func(_ context.Context, v T) error {
		mu.Lock()
		got = append(got, v)
		mu.Unlock()
		return nil
	})
	return func() []T {
		mu.Lock()
		defer mu.Unlock()
		return append([]T(nil), got...)
	}
}

// FromSlice adds a source that emits items in order, then closes.
func FromSlice[T any](g *graph.Graph, name string, items []T, o ...graph.NodeOption) graph.Port[T] {
	return graph.Source(g, name, func(ctx context.Context, emit graph.Emit[T]) error {
		for _, v := range items {
			if err := emit(ctx, v); err != nil {
				return err
			}
		}
		return nil
	}, o...)
}

// Run runs g with t.Context() and fails the test on error. It returns g's stats.
func Run(t testing.TB, g *graph.Graph) []graph.NodeStats {
	t.Helper()
	if err := g.Run(t.Context()); err != nil {
		t.Fatalf("graph %q: Run: %v", g.Name(), err)
	}
	return g.Stats()
}

// Stat returns the stats of the node called name, failing the test if there is none.
func Stat(t testing.TB, stats []graph.NodeStats, name string) graph.NodeStats {
	t.Helper()
	for _, s := range stats {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no node %q in stats", name)
	return graph.NodeStats{}
}

// NoLeaks fails the test if goroutines started during it are still running when it
// ends. Use it where synctest cannot be (real files, mmap, network).
func NoLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
