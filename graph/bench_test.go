package graph_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/graph"
)

// BenchmarkChain measures the engine's per-item cost: items pass through a chain of
// identity stages, so almost all of the time is channel hand-off, clock reads and
// accounting. ns/item is per item per stage (divide the chain's cost by depth).
func BenchmarkChain(b *testing.B) {
	const items = 10_000
	for _, tc := range []struct {
		depth, buffer, workers int
	}{
		{10, 1, 1}, {10, 16, 1}, {10, 64, 1}, {1, 1, 1}, {10, 16, 2},
	} {
		b.Run(fmt.Sprintf("stages=%d/buffer=%d/workers=%d", tc.depth, tc.buffer, tc.workers), func(b *testing.B) {
			id := graph.StageFunc[int, int](func(ctx context.Context, v int, emit graph.Emit[int]) error {
				return emit(ctx, v)
			})
			for b.Loop() {
				g := graph.New(graph.Options{})
				p := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error {
					for i := range items {
						if err := emit(ctx, i); err != nil {
							return err
						}
					}
					return nil
				}, graph.Buffer(tc.buffer))
				for i := range tc.depth {
					p = graph.Then(fmt.Sprint("s", i), p, id, graph.Buffer(tc.buffer), graph.Workers(tc.workers))
				}
				sum := 0
				graph.Sink("sink", p, func(_ context.Context, v int) error { sum += v; return nil })
				if err := g.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				if sum != items*(items-1)/2 {
					b.Fatalf("sum %d", sum)
				}
			}
			perItem := float64(b.Elapsed().Nanoseconds()) / float64(b.N*items)
			b.ReportMetric(perItem, "ns/item")
			b.ReportMetric(perItem/float64(tc.depth), "ns/item/stage")
			b.ReportMetric(1e9/perItem, "items/s")
		})
	}
}
