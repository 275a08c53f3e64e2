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

// BenchmarkPrefixRequest is the prefix cache's bookkeeping for one request
// of a 1,024-token prompt on the 110M shape (12 layers, 12 KV heads of 64)
// that shares nothing with the cached ones: MapPrefix looks up its first
// page and misses, Begin and End take its pages (no K/V is written),
// Publish keys its 64 pages (SHA-256 chain) and Free hands them to
// ristretto as idle pages; cache=off does Begin, End and Free alone. The
// difference bounds what the cache adds to a workload with nothing to share
// (a 1,024-token prefill of that model takes seconds).
func BenchmarkPrefixRequest(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprint("cache=", map[bool]string{false: "off", true: "on"}[on]), func(b *testing.B) {
			const layers, heads, dim, n = 12, 12, 64, 1024
			c, err := New(Options{Layers: layers, KVHeads: heads, HeadDim: dim, MaxTokens: 8 * n, PrefixCache: on})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			batch := &input.Batch{}
			for i := range n {
				batch.Add(0, int32(i), 0, false)
			}
			toks := make([]int32, n)
			salt := []byte("model=m kv=f32 adapter=")
			r := int32(0)
			for b.Loop() {
				r++
				for i := range toks {
					toks[i] = r*int32(n) + int32(i) // a prompt no one sent before
				}
				if on {
					if got, err := c.MapPrefix(0, salt, toks); err != nil || got != 0 {
						b.Fatalf("mapped %d: %v", got, err)
					}
				}
				p, err := c.Begin(b.Context(), batch)
				if err != nil {
					b.Fatal(err)
				}
				if err := p.End(); err != nil {
					b.Fatal(err)
				}
				if on {
					c.Publish(0, salt, toks)
				}
				c.Free(0)
			}
		})
	}
}

// BenchmarkChainKey is one page's key: SHA-256 over the parent key and 16
// tokens (prefix.go's claim that keying is nothing next to computing).
func BenchmarkChainKey(b *testing.B) {
	toks := make([]int32, DefaultPageTokens)
	for i := range toks {
		toks[i] = int32(1000 + i)
	}
	k := rootKey([]byte("model=m kv=f32 adapter="))
	for b.Loop() {
		k = chainKey(k, toks)
	}
}
