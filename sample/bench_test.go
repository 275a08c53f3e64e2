package sample

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkNext measures one decode step's sampling by vocabulary size (the
// sizes of stories260K, Llama 2 and Llama 3) for the usual option sets.
func BenchmarkNext(b *testing.B) {
	configs := []struct {
		name string
		o    Options
	}{
		{"greedy", Options{}},
		{"greedy+penalty", Options{RepeatPenalty: 1.1}},
		{"topk40+topp0.95", Options{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1}},
		{"topp0.9", Options{Temperature: 0.8, TopP: 0.9}},
		{"minp0.05", Options{Temperature: 0.8, MinP: 0.05}},
		{"temperature", Options{Temperature: 1}},
	}
	for _, vocab := range []int{512, 32000, 128000} {
		rng := rand.New(rand.NewPCG(uint64(vocab), 1))
		logits := randomLogits(rng, vocab, "peaked")
		history := make([]int32, 64)
		for i := range history {
			history[i] = int32(rng.IntN(vocab))
		}
		for _, cfg := range configs {
			b.Run(fmt.Sprintf("vocab=%d/%s", vocab, cfg.name), func(b *testing.B) {
				s, err := New(cfg.o)
				if err != nil {
					b.Fatal(err)
				}
				var sc Scratch
				var t uint64
				for b.Loop() {
					if _, err := s.Next(logits, history, 0, t, &sc); err != nil {
						b.Fatal(err)
					}
					t++
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

func BenchmarkUniform(b *testing.B) {
	var t uint64
	var sink float64
	for b.Loop() {
		sink += Uniform(42, 7, t)
		t++
	}
	_ = sink
}
