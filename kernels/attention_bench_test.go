package kernels_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkAttentionPool is one decode step's attention (one query row) at a
// GQA shape (32 heads over 4 KV heads of 64) and 512 or 2048 slots, on 1 and 2
// threads. Bytes are the K and V read.
func BenchmarkAttentionPool(b *testing.B) {
	for _, n := range []int{512, 2048} {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("ctx=%d/threads=%d", n, th), func(b *testing.B) {
				r := newRand(b)
				s := kernels.AttnShape{Heads: 32, KVHeads: 4, HeadDim: 64, Scale: 0.125}
				width := s.KVHeads * s.HeadDim
				kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 256)
				q, dst := vec(r, s.Heads*s.HeadDim, normal), make([]float32, s.Heads*s.HeadDim)
				p := kernels.NewPool(th)
				defer p.Close()
				scratch := make([]float32, kernels.AttentionPoolScratch(p, kv, 1))
				b.SetBytes(int64(2 * 4 * n * width))
				for b.Loop() {
					kernels.AttentionPool(p, dst, q, 1, kv, nil, s, scratch)
				}
			})
		}
	}
}
