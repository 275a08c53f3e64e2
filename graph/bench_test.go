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
		fused                  bool
	}{
		{10, 1, 1, false}, {10, 16, 1, false}, {10, 64, 1, false}, {1, 1, 1, false}, {10, 16, 2, false}, {10, 1, 1, true},
	} {
		opts := []graph.NodeOption{graph.Buffer(tc.buffer), graph.Workers(tc.workers)}
		name := fmt.Sprintf("stages=%d/buffer=%d/workers=%d", tc.depth, tc.buffer, tc.workers)
		if tc.fused {
			opts, name = append(opts, graph.Fused()), name+"/fused"
		}
		b.Run(name, func(b *testing.B) {
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
					p = graph.Then(fmt.Sprint("s", i), p, id, opts...)
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

// BenchmarkLoopStep measures one item going round a loop (Enter → stages →
// Split → Return), the shape of the decode loop with one step in flight: no
// two stages ever have work at once, so each unfused edge is a hand-off to a
// goroutine that was asleep. ns/step is one turn of the loop.
func BenchmarkLoopStep(b *testing.B) {
	const steps = 2000
	for _, depth := range []int{5} {
		for _, fused := range []bool{false, true} {
			b.Run(fmt.Sprintf("stages=%d/fused=%v", depth, fused), func(b *testing.B) {
				var opts []graph.NodeOption
				if fused {
					opts = append(opts, graph.Fused())
				}
				id := graph.StageFunc[int, int](func(ctx context.Context, v int, emit graph.Emit[int]) error {
					return emit(ctx, v+1)
				})
				for b.Loop() {
					g := graph.New(graph.Options{})
					src := graph.Source(g, "src", func(ctx context.Context, emit graph.Emit[int]) error { return emit(ctx, 0) })
					loop := graph.NewLoop[int](g, "loop", 1)
					p := loop.Enter(src)
					for i := range depth {
						p = graph.Then(fmt.Sprint("s", i), p, id, opts...)
					}
					again, done := graph.Split("more", p, func(v int) bool { return v < steps*depth }, opts...)
					loop.Return(again)
					var last int
					graph.Sink("sink", loop.Exit(done), func(_ context.Context, v int) error { last = v; return nil })
					if err := g.Run(context.Background()); err != nil {
						b.Fatal(err)
					}
					if last != steps*depth {
						b.Fatalf("last %d, want %d", last, steps*depth)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/step")
			})
		}
	}
}
