package kernels_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/tensor"
)

// halvesKV is kv (float32 pages) rounded to binary16 pages, and the float32
// KV of the widened halves: the two hold the same values.
func halvesKV(kv kernels.KV) (h, widened kernels.KV) {
	h = kernels.KV{PageTokens: kv.PageTokens, Len: kv.Len}
	widened = kernels.KV{PageTokens: kv.PageTokens, Len: kv.Len}
	conv := func(p []float32) ([]uint16, []float32) {
		hp, wp := make([]uint16, len(p)), make([]float32, len(p))
		for i, x := range p {
			hp[i] = tensor.F32ToF16(x)
			wp[i] = tensor.F16ToF32(hp[i])
		}
		return hp, wp
	}
	for i := range kv.K {
		hk, wk := conv(kv.K[i])
		hv, wv := conv(kv.V[i])
		h.K16, h.V16 = append(h.K16, hk), append(h.V16, hv)
		widened.K, widened.V = append(widened.K, wk), append(widened.V, wv)
	}
	if h.K16 == nil {
		h.K16, h.V16 = [][]uint16{}, [][]uint16{} // F16 even when empty
	}
	return h, widened
}

// TestAttentionF16VsRef: over binary16 pages ref.Attention gives the bits it
// gives over the widened float32 pages, and kernels.Attention gives ref's
// bits (generic kernel) or stays within requireAttnRef's tolerance of them
// (vector kernels), for every shape, mask, page size and special value.
func TestAttentionF16VsRef(t *testing.T) {
	for _, sh := range attnShapes {
		for _, k := range []kind{normal, special} {
			t.Run(fmt.Sprintf("h%d_kv%d_d%d/%v", sh.heads, sh.kvHeads, sh.headDim, k), func(t *testing.T) {
				r := newRand(t)
				s := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.headDim,
					Scale: float32(1 / math.Sqrt(float64(sh.headDim)))}
				width := sh.kvHeads * sh.headDim
				lens := []int{0, 1, 3, 17, 33}
				if testing.Short() {
					lens = []int{0, 1, 17}
				}
				for _, n := range lens {
					keys, vals := vec(r, n*width, k), vec(r, n*width, normal)
					for _, pt := range []int{1, 16} {
						kv16, kvw := halvesKV(pagedKV(keys, vals, n, width, pt))
						for _, rows := range []int{1, 3} {
							for name, m := range maskKinds(r, rows, n) {
								what := fmt.Sprintf("n=%d page=%d rows=%d mask=%s", n, pt, rows, name)
								q := vec(r, rows*sh.heads*sh.headDim, k)
								want, wantW := make([]float32, len(q)), make([]float32, len(q))
								ref.Attention(want, q, rows, kv16, m, s)
								ref.Attention(wantW, q, rows, kvw, m, s)
								requireSame(t, what+" ref f16 vs widened", wantW, want)
								off := rows % 4
								buf, dst := guarded(len(q), off)
								need := kernels.AttentionScratch(kv16, rows)
								sbuf, scratch := guarded(need, 0)
								kernels.Attention(dst, q, rows, kv16, m, s, scratch)
								checkGuard(t, buf, off, len(q))
								checkGuard(t, sbuf, 0, need)
								if kernels.AttentionF16Exact() {
									requireSame(t, what, want, dst)
								} else {
									requireAttnRef(t, what, q, rows, kvw, m, s, want, dst)
								}
							}
						}
					}
				}
			})
		}
	}
}

// TestAttentionF16PoolThreads: the F16 kernels split across threads give the
// one-thread bits.
func TestAttentionF16PoolThreads(t *testing.T) {
	defer kernels.SplitAllAttention()()
	r := newRand(t)
	s := kernels.AttnShape{Heads: 8, KVHeads: 2, HeadDim: 64, Scale: 0.125}
	width, n, rows := s.KVHeads*s.HeadDim, 70, 5
	kv, _ := halvesKV(pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 16))
	m := maskKinds(r, rows, n)["causal"]
	q := vec(r, rows*s.Heads*s.HeadDim, normal)
	want := make([]float32, len(q))
	kernels.Attention(want, q, rows, kv, m, s, make([]float32, kernels.AttentionScratch(kv, rows)))
	for _, threads := range []int{2, 3} {
		p := kernels.NewPool(threads)
		got := make([]float32, len(q))
		kernels.AttentionPool(p, got, q, rows, kv, m, s, make([]float32, kernels.AttentionPoolScratch(p, kv, rows)))
		p.Close()
		requireSame(t, fmt.Sprintf("%d threads", threads), want, got)
	}
}

// TestAttentionF16NoAlloc: reading binary16 pages allocates nothing.
func TestAttentionF16NoAlloc(t *testing.T) {
	r := newRand(t)
	s := kernels.AttnShape{Heads: 4, KVHeads: 2, HeadDim: 32, Scale: 0.2}
	width, n := s.KVHeads*s.HeadDim, 40
	kv, _ := halvesKV(pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 16))
	q, dst := vec(r, s.Heads*s.HeadDim, normal), make([]float32, s.Heads*s.HeadDim)
	scratch := make([]float32, kernels.AttentionScratch(kv, 1))
	if a := testing.AllocsPerRun(20, func() { kernels.Attention(dst, q, 1, kv, nil, s, scratch) }); a != 0 {
		t.Fatalf("Attention over f16 pages: %v allocs, want 0", a)
	}
}
