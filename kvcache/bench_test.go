package kvcache

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/model/input"
)

// BenchmarkDecodeStep is the cache's share of one decode step of a 1B-shaped
// model (16 layers, 8 KV heads of 64): Begin, Put and View in every layer, End.
// The context is rewound every 1024 steps so the cache stays warm.
func BenchmarkDecodeStep(b *testing.B) {
	for _, seqs := range []int{1, 8} {
		b.Run(fmt.Sprintf("seqs=%d", seqs), func(b *testing.B) {
			const layers, heads, dim, ctxLen = 16, 8, 64, 1024
			c, err := New(Options{Layers: layers, KVHeads: heads, HeadDim: dim, MaxTokens: seqs * ctxLen})
			if err != nil {
				b.Fatal(err)
			}
			// Touch every page once so the loop measures the warm cache.
			warm := &input.Batch{}
			for s := range seqs {
				for i := range ctxLen {
					warm.Add(0, int32(i), int32(s), false)
				}
			}
			p, err := c.Begin(b.Context(), warm)
			if err != nil {
				b.Fatal(err)
			}
			p.Abort()
			k := make([]float32, seqs*heads*dim)
			v := make([]float32, seqs*heads*dim)
			batch := &input.Batch{}
			pos := 0
			for b.Loop() {
				if pos == ctxLen {
					for s := range seqs {
						_ = c.Truncate(int32(s), 0)
					}
					pos = 0
				}
				batch.Reset()
				for s := range seqs {
					batch.Add(0, int32(pos), int32(s), true)
				}
				p, err := c.Begin(b.Context(), batch)
				if err != nil {
					b.Fatal(err)
				}
				for l := range layers {
					p.Layer(l).Put(k, v)
					for s := range seqs {
						_ = p.Layer(l).View(int32(s))
					}
				}
				if err := p.End(); err != nil {
					b.Fatal(err)
				}
				pos++
			}
			b.ReportMetric(float64(b.N*seqs)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// BenchmarkTreePass is Begin/End of a 64-node draft tree (a binary tree in
// breadth-first order), whose mask rows are built incrementally.
func BenchmarkTreePass(b *testing.B) {
	c, err := New(Options{Layers: 1, KVHeads: 1, HeadDim: 1, MaxTokens: 4096})
	if err != nil {
		b.Fatal(err)
	}
	batch := &input.Batch{}
	for i := range int32(64) {
		j := batch.Add(0, 0, 0, true)
		batch.Parent[j] = (i+1)/2 - 1
	}
	for b.Loop() {
		p, err := c.Begin(b.Context(), batch)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.End(); err != nil {
			b.Fatal(err)
		}
		if err := c.Truncate(0, 0); err != nil {
			b.Fatal(err)
		}
	}
}
