//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// hsum8Dot is attnDotsAVX2's per-slot arithmetic written out in Go: eight
// lanes of fused multiply-adds over the 8-wide chunks, then lane t + lane
// t+4, then t + t+2, then lane 0 + lane 1, then the scale.
func hsum8Dot(q, k []float32, scale float32) float32 {
	var acc [8]float32
	for c := 0; c < len(q); c += 8 {
		for t := range 8 {
			acc[t] = float32(math.FMA(float64(q[c+t]), float64(k[c+t]), float64(acc[t])))
		}
	}
	h := [4]float32{acc[0] + acc[4], acc[1] + acc[5], acc[2] + acc[6], acc[3] + acc[7]}
	p := [2]float32{h[0] + h[2], h[1] + h[3]}
	return (p[0] + p[1]) * scale
}

// TestAttnDotsAVX2 checks every path of the assembly scores (eight slots at
// once with the transposing reduction, four, one) against hsum8Dot bit for
// bit, so a slot's score is the same whichever path its call takes; with
// head dims of one to eight chunks, strides wider than the head, special
// values, unaligned starts and a guard after the last score.
func TestAttnDotsAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 attention scores: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(21, 22))
	specials := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), math.MaxFloat32, 1e-40}
	vec := func(n int, special bool) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
			if special && r.IntN(16) == 0 {
				v[i] = specials[r.IntN(len(specials))]
			}
		}
		return v
	}
	const guard = 0x7fc0dead
	for _, d := range []int{8, 16, 24, 64} {
		for _, extra := range []int{0, 8, 13} { // the row stride is d+extra floats
			for _, special := range []bool{false, true} {
				for n := 0; n <= 27; n++ {
					name := fmt.Sprintf("d=%d stride=%d special=%v n=%d", d, d+extra, special, n)
					stride := d + extra
					off := r.IntN(4)
					q := vec(d+off, special)[off:]
					k := vec(max(n, 1)*stride+off, special)[off:]
					scale := float32(1 / math.Sqrt(float64(d)))
					sc := make([]float32, n+1+off)[off:]
					for i := range sc {
						sc[i] = math.Float32frombits(guard)
					}
					if n > 0 {
						attnDotsAVX2(&sc[0], &q[0], &k[0], uintptr(stride)*4, n, d, scale)
					}
					for m := range n {
						want := hsum8Dot(q[:d], k[m*stride:m*stride+d], scale)
						got := sc[m]
						if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
							t.Fatalf("%s: slot %d = %v (%#x), want %v (%#x)", name, m, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
					if math.Float32bits(sc[n]) != guard {
						t.Fatalf("%s: wrote past the last score", name)
					}
				}
			}
		}
	}
}

// TestAttentionAVX2FourHeads checks that weighing V for four heads side by
// side (attnAxpy4AVX2, taken when scratch holds AttentionScratch floats and
// the head dim is below 32) gives each item the bits it gets alone (scratch
// of one score per slot), over GQA shapes, pages that cut the slot runs,
// causal, windowed, tree and empty masks, item ranges that split a row's
// heads (a thread split), special values, and a guard after the output.
func TestAttentionAVX2FourHeads(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 attention: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(23, 24))
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
			if r.IntN(40) == 0 {
				v[i] = []float32{float32(math.Inf(1)), float32(math.Inf(-1)), 0, 1e-40}[r.IntN(4)]
			}
		}
		return v
	}
	for _, sh := range []struct{ heads, kvHeads, d int }{
		{4, 2, 8}, {8, 4, 8}, {8, 8, 8}, {12, 4, 16}, {6, 2, 24}, {8, 1, 16}, {4, 4, 32},
	} {
		for _, n := range []int{1, 5, 17, 40} {
			for _, pt := range []int{3, 16} {
				width := sh.kvHeads * sh.d
				kv := KV{PageTokens: pt, Len: n}
				for p := 0; p*pt < n; p++ {
					kv.K, kv.V = append(kv.K, vec(pt*width)), append(kv.V, vec(pt*width))
				}
				const rows = 3
				slots := []int32{int32(n - 3), int32(n - 2), int32(n - 1)}
				for i := range slots {
					slots[i] = max(slots[i], 0)
				}
				causal, window := &Mask{}, &Mask{}
				CausalMask(causal, slots, 0)
				CausalMask(window, slots, 4)
				tree := &Mask{Lo: []int32{0, 0, 0}, Hi: []int32{int32(n), int32(n), int32(n)},
					TreeBase: []int32{0, 0, 0}, Tree: make([][]uint64, rows)}
				for i := range tree.Tree {
					tree.Tree[i] = make([]uint64, (n+63)/64)
					for j := range n {
						if r.IntN(3) != 0 {
							tree.Tree[i][j/64] |= 1 << (j % 64)
						}
					}
				}
				empty := &Mask{Lo: []int32{1, 1, 1}, Hi: []int32{1, 1, 1}}
				s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
				items := rows * sh.heads
				q := vec(items * sh.d)
				for name, m := range map[string]*Mask{"nil": nil, "causal": causal, "window": window, "tree": tree, "empty": empty} {
					for _, span := range [][2]int{{0, items}, {1, items - 2}, {3, 3 + sh.heads}} {
						lo, hi := span[0], span[1]
						what := fmt.Sprintf("h%d kv%d d%d n=%d page=%d mask=%s items [%d,%d)", sh.heads, sh.kvHeads, sh.d, n, pt, name, lo, hi)
						want := make([]float32, items*sh.d)
						attentionAVX2(want, q, kv, m, s, make([]float32, n), lo, hi)
						got := make([]float32, items*sh.d+1)
						got[items*sh.d] = 12345
						attentionAVX2(got, q, kv, m, s, make([]float32, AttentionScratch(kv, rows)), lo, hi)
						for i, w := range want {
							if math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
								t.Fatalf("%s: out[%d] = %v four heads at once, %v alone", what, i, got[i], w)
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
