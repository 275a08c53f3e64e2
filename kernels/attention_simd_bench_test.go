//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttentionTiled compares, in one run, the tiled kernel (attentionSIMD)
// with the per-item kernel it replaced for d ≥ 32 (attentionSIMDItems: one dot
// and horizontal sum per slot, one axpy per slot), on one thread at the shapes
// of BenchmarkAttentionShapes. The sub-benchmarks alternate old and new per
// shape so machine load hits both alike; report new ÷ old.
func BenchmarkAttentionTiled(b *testing.B) {
	shapes := []struct {
		name string
		s    AttnShape
	}{
		{"h12", AttnShape{Heads: 12, KVHeads: 12, HeadDim: 64, Scale: 0.125}},
		{"h32kv8", AttnShape{Heads: 32, KVHeads: 8, HeadDim: 64, Scale: 0.125}},
	}
	for _, sh := range shapes {
		for _, n := range []int{128, 512, 2048} {
			for _, rows := range []int{1, 64} {
				s := sh.s
				r := rand.New(rand.NewPCG(uint64(n), uint64(rows)))
				kv, q, m := benchAttnInputs(r, s, n, rows)
				dst := make([]float32, len(q))
				scratch := make([]float32, n)
				width := vecWidth(s.HeadDim)
				for _, impl := range []string{"old", "new"} {
					b.Run(fmt.Sprintf("%s/ctx=%d/rows=%d/%s", sh.name, n, rows, impl), func(b *testing.B) {
						b.SetBytes(int64(2 * 4 * n * s.KVHeads * s.HeadDim))
						for b.Loop() {
							if impl == "old" {
								attentionSIMDItems(dst, q, kv, m, s, scratch, 0, rows*s.Heads, width)
							} else {
								attentionSIMD(dst, q, kv, m, s, scratch, 0, rows*s.Heads)
							}
						}
					})
				}
			}
		}
	}
}

// benchAttnInputs is an N(0,1) KV of n slots in pages of 256, rows queries
// and the causal mask of rows ending at the last slot.
func benchAttnInputs(r *rand.Rand, s AttnShape, n, rows int) (KV, []float32, *Mask) {
	const pt = 256
	width := s.KVHeads * s.HeadDim
	kv := KV{PageTokens: pt, Len: n}
	for p := 0; p*pt < n; p++ {
		k, v := make([]float32, pt*width), make([]float32, pt*width)
		for i := range k {
			k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		kv.K, kv.V = append(kv.K, k), append(kv.V, v)
	}
	q := make([]float32, rows*s.Heads*s.HeadDim)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	slots := make([]int32, rows)
	for i := range slots {
		slots[i] = int32(n - rows + i)
	}
	m := &Mask{}
	CausalMask(m, slots, 0)
	return kv, q, m
}
