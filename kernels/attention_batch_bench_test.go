package kernels_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// BenchmarkAttentionDecodeBatch is one decode step's attention for many
// sequences at once, as the 110m model's layers call it under continuous
// batching: seqs sequences of ctx slots each, one query row per sequence
// per call, over 12 layers of 12 heads of 64. Each sequence's pages hold
// every layer's K and V side by side, as kvcache allocates them, so the
// step's K and V (seqs·layers·ctx·768·8 bytes: 113 MB at 32 × 48) come
// from memory, not from a cache warmed by the previous call; the f16 case
// holds binary16 pages (half the bytes). Bytes are the K and V one step
// reads.
func BenchmarkAttentionDecodeBatch(b *testing.B) {
	const layers, pt = 12, 16
	s := kernels.AttnShape{Heads: 12, KVHeads: 12, HeadDim: 64, Scale: 0.125}
	width := s.KVHeads * s.HeadDim
	for _, c := range []struct {
		seqs, ctx int
		f16       bool
	}{{1, 48, false}, {8, 48, false}, {32, 48, false}, {32, 200, false}, {32, 48, true}} {
		name := fmt.Sprintf("seqs=%d/ctx=%d", c.seqs, c.ctx)
		elem := 4
		if c.f16 {
			name, elem = name+"/f16", 2
		}
		b.Run(name, func(b *testing.B) {
			r := newRand(b)
			kvs := make([][]kernels.KV, c.seqs) // [seq][layer]
			for q := range kvs {
				kvs[q] = make([]kernels.KV, layers)
				for l := range layers {
					kvs[q][l] = kernels.KV{PageTokens: pt, Len: c.ctx}
				}
				for p := 0; p*pt < c.ctx; p++ {
					buf := vec(r, 2*layers*pt*width, normal)
					var half []uint16
					if c.f16 {
						half = make([]uint16, len(buf))
						for i, x := range buf {
							half[i] = tensor.F32ToF16(x)
						}
					}
					for l := range layers {
						kv := &kvs[q][l]
						if c.f16 {
							kv.K16 = append(kv.K16, half[:pt*width:pt*width])
							kv.V16 = append(kv.V16, half[pt*width:2*pt*width:2*pt*width])
							half = half[2*pt*width:]
							continue
						}
						kv.K = append(kv.K, buf[:pt*width:pt*width])
						kv.V = append(kv.V, buf[pt*width:2*pt*width:2*pt*width])
						buf = buf[2*pt*width:]
					}
				}
			}
			q := vec(r, s.Heads*s.HeadDim, normal)
			dst := make([]float32, len(q))
			scratch := make([]float32, kernels.AttentionScratch(kvs[0][0], 1))
			b.SetBytes(int64(c.seqs * layers * c.ctx * width * 2 * elem))
			for b.Loop() {
				for l := range layers {
					for _, kv := range kvs {
						kernels.Attention(dst, q, 1, kv[l], nil, s, scratch)
					}
				}
			}
		})
	}
}
