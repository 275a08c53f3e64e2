//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAttentionWideRowBlock holds the AVX-512 row-block kernels to the AVX2
// kernels' bits: a prompt's rows through attnRowBlockAVX512 (pairs of rows
// for the scores, quads for the values) must give each (row, head) exactly
// what the AVX2 row block and the one-row-at-a-time path (a decode step)
// give, over head dims that do and do not take the wide values (64, 128 /
// 8, 16, 40), GQA, pages of 16 and 64 slots and ones that cut the runs
// (5), prompts that start mid-page, causal, windowed, tree and empty masks,
// special values, and a guard after the output.
func TestAttentionWideRowBlock(t *testing.T) {
	if !cpuAVX512 || !cpuAVX2 {
		t.Skip("SKIP avx512 attention: CPU lacks AVX-512 F/BW/VL/DQ")
	}
	defer func(w bool) { attnWide = w }(attnWide)
	r := rand.New(rand.NewPCG(51, 2))
	vec := func(n int, special bool) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
			if special && r.IntN(200) == 0 {
				v[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-40}[r.IntN(4)]
			}
		}
		return v
	}
	for _, sh := range []struct{ heads, kvHeads, d int }{
		{12, 12, 64}, {8, 2, 64}, {4, 4, 128}, {6, 3, 8}, {4, 2, 16}, {3, 3, 40},
	} {
		for _, n := range []int{9, 40, 137} {
			for _, pt := range []int{5, 16, 64} {
				for _, special := range []bool{false, true} {
					width := sh.kvHeads * sh.d
					kv := KV{PageTokens: pt, Len: n}
					for p := 0; p*pt < n; p++ {
						kv.K, kv.V = append(kv.K, vec(pt*width, special)), append(kv.V, vec(pt*width, special))
					}
					for _, rows := range []int{2, 7, attnRowBlock, 2*attnRowBlock + 5} {
						rows := min(rows, n)
						slots := make([]int32, rows)
						for i := range slots {
							slots[i] = int32(n - rows + i)
						}
						causal, window := &Mask{}, &Mask{}
						CausalMask(causal, slots, 0)
						CausalMask(window, slots, 11)
						tree := &Mask{Lo: make([]int32, rows), Hi: make([]int32, rows),
							TreeBase: make([]int32, rows), Tree: make([][]uint64, rows)}
						empty := &Mask{Lo: make([]int32, rows), Hi: make([]int32, rows)}
						for i := range tree.Tree {
							tree.Hi[i] = int32(n)
							tree.TreeBase[i] = int32(r.IntN(n))
							empty.Lo[i], empty.Hi[i] = 1, 1
							tree.Tree[i] = make([]uint64, (n+63)/64)
							for j := range n {
								if r.IntN(5) != 0 {
									tree.Tree[i][j/64] |= 1 << (j % 64)
								}
							}
						}
						s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
						items := rows * sh.heads
						q := vec(items*sh.d, special)
						for name, m := range map[string]*Mask{"nil": nil, "causal": causal, "window": window, "tree": tree, "empty": empty} {
							what := fmt.Sprintf("h%d kv%d d%d n=%d page=%d special=%v rows=%d mask=%s", sh.heads, sh.kvHeads, sh.d, n, pt, special, rows, name)
							room := AttentionScratch(kv, rows)
							attnWide = false
							oneRow := make([]float32, items*sh.d)
							attentionAVX2(oneRow, q, kv, m, s, make([]float32, n), 0, items)
							avx2 := make([]float32, items*sh.d)
							attentionAVX2(avx2, q, kv, m, s, make([]float32, room), 0, items)
							attnWide = true
							got := make([]float32, items*sh.d+1)
							got[items*sh.d] = 12345
							attentionAVX2(got, q, kv, m, s, make([]float32, room), 0, items)
							for i := range oneRow {
								g, a, o := got[i], avx2[i], oneRow[i]
								same := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y) }
								if !same(g, a) || !same(g, o) {
									t.Fatalf("%s: out[%d] (row %d) = %v wide, %v AVX2 row block, %v one row at a time", what, i, i/(sh.heads*sh.d), g, a, o)
								}
							}
							if got[items*sh.d] != 12345 {
								t.Fatalf("%s: wrote past the output", what)
							}
						}
					}
				}
			}
		}
	}
}
