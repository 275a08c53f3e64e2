//go:build goexperiment.simd && amd64 && !purego

package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// TestAttentionTiled: for head dims ≥ 32 the archsimd attention runs items in
// tiles that share K/V rows and sum 16 slots' lanes by a transpose. On both
// vector widths, every mask kind, GQA and MHA, head dims with and without a
// partial last vector, pages that split blocks, and special values, it must
// give bit for bit what the per-item kernel gives (the same operations per
// item), within the stated tolerance of ref, and the same bits whatever
// items share its call: split at every boundary, or with a score buffer so
// small that every tile holds one or two items.
func TestAttentionTiled(t *testing.T) {
	shapes := []attnCase{{4, 4, 32}, {8, 2, 40}, {6, 3, 64}, {8, 1, 64}, {4, 2, 72}, {2, 1, 128}}
	lens := []int{1, 15, 16, 17, 40, 70}
	if testing.Short() {
		lens = []int{1, 17, 40}
	}
	for _, avx2 := range []bool{false, true} {
		for _, sh := range shapes {
			for _, k := range []kind{normal, special} {
				t.Run(fmt.Sprintf("avx2=%v/h%d_kv%d_d%d/%v", avx2, sh.heads, sh.kvHeads, sh.headDim, k), func(t *testing.T) {
					if avx2 {
						defer kernels.UseAVX2()()
					}
					r := newRand(t)
					s := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.headDim,
						Scale: float32(1 / math.Sqrt(float64(sh.headDim)))}
					width := sh.kvHeads * sh.headDim
					for _, n := range lens {
						keys, vals := vec(r, n*width, k), vec(r, n*width, normal)
						for _, pt := range []int{3, 16, 23} {
							kv := pagedKV(keys, vals, n, width, pt)
							for _, rows := range []int{1, 9} {
								for name, m := range maskKinds(r, rows, n) {
									what := fmt.Sprintf("n=%d page=%d rows=%d mask=%s", n, pt, rows, name)
									q := vec(r, rows*s.Heads*s.HeadDim, k)
									scratch := make([]float32, kernels.AttentionScratch(kv, rows))
									want := make([]float32, len(q))
									kernels.AttentionPerItem(want, q, rows, kv, m, s, scratch)
									got := make([]float32, len(q))
									kernels.Attention(got, q, rows, kv, m, s, scratch)
									requireSame(t, what+" tiled vs per item", want, got)

									wantRef := make([]float32, len(q))
									ref.Attention(wantRef, q, rows, kv, m, s)
									requireAttnRef(t, what+" vs ref", q, rows, kv, m, s, wantRef, got)

									items := rows * s.Heads
									split := make([]float32, len(q))
									for lo := 0; lo < items; {
										hi := min(items, lo+1+(lo*7)%5)
										kernels.AttentionRange(split, q, kv, m, s, scratch, lo, hi)
										lo = hi
									}
									requireSame(t, what+" split into ranges", want, split)

									small := make([]float32, len(q))
									kernels.AttentionTilesBuf(small, q, rows, kv, m, s, scratch, n+1)
									requireSame(t, what+" small tiles", want, small)
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestAttentionTiledGQASharing: a GQA call with many rows and long context
// (tiles limited by the item count and by the score buffer) on two threads
// equals the per-item kernel bit for bit.
func TestAttentionTiledGQASharing(t *testing.T) {
	r := newRand(t)
	s := kernels.AttnShape{Heads: 16, KVHeads: 4, HeadDim: 64, Scale: 0.125}
	const n, rows = 700, 12
	width := s.KVHeads * s.HeadDim
	kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 64)
	q := vec(r, rows*s.Heads*s.HeadDim, normal)
	for name, m := range maskKinds(r, rows, n) {
		want := make([]float32, len(q))
		kernels.AttentionPerItem(want, q, rows, kv, m, s, make([]float32, n))
		p := kernels.NewPool(2)
		got := make([]float32, len(q))
		kernels.AttentionPool(p, got, q, rows, kv, m, s, make([]float32, kernels.AttentionPoolScratch(p, kv, rows)))
		p.Close()
		requireSame(t, "mask "+name, want, got)
	}
}
