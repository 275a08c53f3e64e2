package kernels_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkAttentionShapes is one thread's attention at head dim 64 for
// 12 heads (MHA, 110m) and 32 query heads over 8 KV heads (GQA, 1b), and at
// head dim 8 for 8 query heads over 4 KV heads (stories260K), over
// 128, 512 and 2048 slots, for one query row (a decode step) and for 64 rows
// (a prefill chunk ending at the last slot, causal mask). Bytes are the K
// and V the call reads at least once.
func BenchmarkAttentionShapes(b *testing.B) {
	shapes := []struct {
		name string
		s    kernels.AttnShape
	}{
		{"h12", kernels.AttnShape{Heads: 12, KVHeads: 12, HeadDim: 64, Scale: 0.125}},
		{"h32kv8", kernels.AttnShape{Heads: 32, KVHeads: 8, HeadDim: 64, Scale: 0.125}},
		{"h8kv4d8", kernels.AttnShape{Heads: 8, KVHeads: 4, HeadDim: 8, Scale: 0.35355339}},
	}
	for _, sh := range shapes {
		for _, n := range []int{128, 512, 2048} {
			for _, rows := range []int{1, 64} {
				b.Run(fmt.Sprintf("%s/ctx=%d/rows=%d", sh.name, n, rows), func(b *testing.B) {
					r := newRand(b)
					s := sh.s
					width := s.KVHeads * s.HeadDim
					kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 256)
					q := vec(r, rows*s.Heads*s.HeadDim, normal)
					dst := make([]float32, len(q))
					slots := make([]int32, rows)
					for i := range slots {
						slots[i] = int32(n - rows + i)
					}
					m := &kernels.Mask{}
					kernels.CausalMask(m, slots, 0)
					scratch := make([]float32, kernels.AttentionScratch(kv, rows))
					b.SetBytes(int64(2 * 4 * n * width))
					for b.Loop() {
						kernels.Attention(dst, q, rows, kv, m, s, scratch)
					}
				})
			}
		}
	}
}

// BenchmarkSwiGLU is the FFN gate of a 1b model (hidden 5632).
func BenchmarkSwiGLU(b *testing.B) {
	r := newRand(b)
	const n = 5632
	gate, up, dst := vec(r, n, normal), vec(r, n, normal), make([]float32, n)
	b.SetBytes(3 * 4 * n)
	for b.Loop() {
		kernels.SwiGLU(dst, gate, up)
	}
}
