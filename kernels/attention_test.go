package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/kernels/ref"
)

// pagedKV splits contiguous k, v rows (n rows of width floats) into pages of
// pageTokens rows. Rows past n in the last page hold NaN, so a kernel that
// reads a slot ≥ Len poisons its output and fails the comparison.
func pagedKV(k, v []float32, n, width, pageTokens int) kernels.KV {
	kv := kernels.KV{PageTokens: pageTokens, Len: n}
	for p := 0; p*pageTokens < n; p++ {
		kp := make([]float32, pageTokens*width)
		vp := make([]float32, pageTokens*width)
		for i := range kp {
			kp[i], vp[i] = float32(math.NaN()), float32(math.NaN())
		}
		lo, hi := p*pageTokens*width, min(n, (p+1)*pageTokens)*width
		copy(kp, k[lo:hi])
		copy(vp, v[lo:hi])
		kv.K, kv.V = append(kv.K, kp), append(kv.V, vp)
	}
	return kv
}

// treeMask makes a mask for rows that are draft-tree nodes at slots
// base..base+rows-1 after a linear prefix of base slots: each node's parent is
// a random earlier node or the prefix tail, and it sees the prefix (from lo)
// plus its ancestors and itself.
func treeMask(r *rand.Rand, rows, base, lo int) *kernels.Mask {
	m := &kernels.Mask{}
	parent := make([]int, rows)
	words := (rows + 63) / 64
	for i := 0; i < rows; i++ {
		parent[i] = r.IntN(i+1) - 1
		row := make([]uint64, words)
		if parent[i] >= 0 {
			copy(row, m.Tree[parent[i]])
		}
		row[i/64] |= 1 << (i % 64)
		m.Lo = append(m.Lo, int32(lo))
		m.Hi = append(m.Hi, int32(base+i+1))
		m.Tree = append(m.Tree, row)
		m.TreeBase = append(m.TreeBase, int32(base))
	}
	return m
}

// maskKinds builds each kind of mask for rows query rows over n slots.
func maskKinds(r *rand.Rand, rows, n int) map[string]*kernels.Mask {
	slots := make([]int32, rows)
	for i := range slots {
		slots[i] = int32(max(0, n-rows+i))
	}
	causal, window := &kernels.Mask{}, &kernels.Mask{}
	kernels.CausalMask(causal, slots, 0)
	kernels.CausalMask(window, slots, 3)
	empty := &kernels.Mask{Lo: make([]int32, rows), Hi: make([]int32, rows)}
	for i := range empty.Lo {
		empty.Lo[i], empty.Hi[i] = int32(i), int32(i) // Lo == Hi: nothing visible
	}
	return map[string]*kernels.Mask{
		"nil":    nil,
		"causal": causal,
		"window": window,
		"tree":   treeMask(r, rows, max(0, n-rows), 1),
		"empty":  empty,
	}
}

type attnCase struct {
	heads, kvHeads, headDim int
}

// attnShapes include head dims ≥ 32, where the archsimd kernel tiles (40 and
// 72 end in a partial vector).
var attnShapes = []attnCase{
	{1, 1, 1}, {1, 1, 2}, {2, 1, 3}, {4, 2, 8}, {6, 3, 17}, {8, 4, 16}, {8, 8, 5}, {4, 1, 64},
	{4, 2, 40}, {2, 2, 72}, {4, 1, 128},
}

func TestAttentionVsRef(t *testing.T) {
	for _, sh := range attnShapes {
		for _, k := range []kind{normal, special} {
			t.Run(fmt.Sprintf("h%d_kv%d_d%d/%v", sh.heads, sh.kvHeads, sh.headDim, k), func(t *testing.T) {
				r := newRand(t)
				s := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.headDim,
					Scale: float32(1 / math.Sqrt(float64(sh.headDim)))}
				width := sh.kvHeads * sh.headDim
				lens := []int{0, 1, 2, 3, 7, 16, 17, 33}
				if testing.Short() {
					lens = []int{0, 1, 7, 17}
				}
				for _, n := range lens {
					keys, vals := vec(r, n*width, k), vec(r, n*width, normal)
					for _, pt := range []int{1, 3, 16} {
						kv := pagedKV(keys, vals, n, width, pt)
						for _, rows := range []int{1, 3, 5} {
							for name, m := range maskKinds(r, rows, n) {
								q := vec(r, rows*sh.heads*sh.headDim, k)
								want := make([]float32, len(q))
								ref.Attention(want, q, rows, kv, m, s)
								off := rows % 4
								buf, dst := guarded(len(q), off)
								need := kernels.AttentionScratch(kv, rows)
								sbuf, scratch := guarded(need, 0)
								kernels.Attention(dst, q, rows, kv, m, s, scratch)
								checkGuard(t, buf, off, len(q))
								checkGuard(t, sbuf, 0, need)
								requireAttnRef(t, fmt.Sprintf("n=%d page=%d rows=%d mask=%s", n, pt, rows, name), q, rows, kv, m, s, want, dst)
							}
						}
					}
				}
			})
		}
	}
}

// TestAttentionRowsIndependent: a batch of rows gives, bit for bit, what each
// row gives alone with its own mask row.
func TestAttentionRowsIndependent(t *testing.T) {
	r := newRand(t)
	s := kernels.AttnShape{Heads: 4, KVHeads: 2, HeadDim: 8, Scale: 0.35}
	const n, rows = 21, 6
	width := s.KVHeads * s.HeadDim
	kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 4)
	scratch := make([]float32, kernels.AttentionScratch(kv, rows))
	for name, m := range maskKinds(r, rows, n) {
		t.Run(name, func(t *testing.T) {
			q := vec(r, rows*s.Heads*s.HeadDim, normal)
			all := make([]float32, len(q))
			kernels.Attention(all, q, rows, kv, m, s, scratch)
			qd := s.Heads * s.HeadDim
			for i := 0; i < rows; i++ {
				var mi *kernels.Mask
				if m != nil {
					mi = &kernels.Mask{Lo: m.Lo[i : i+1], Hi: m.Hi[i : i+1]}
					if m.Tree != nil {
						mi.Tree, mi.TreeBase = m.Tree[i:i+1], m.TreeBase[i:i+1]
					}
				}
				one := make([]float32, qd)
				kernels.Attention(one, q[i*qd:(i+1)*qd], 1, kv, mi, s, scratch)
				requireSame(t, fmt.Sprintf("row %d", i), all[i*qd:(i+1)*qd], one)
			}
		})
	}
}

// TestAttentionGQA: with KVHeads < Heads, head h must use KV head
// h/(Heads/KVHeads); equivalently the result equals plain multi-head attention
// over a KV in which each KV head is repeated Heads/KVHeads times.
func TestAttentionGQA(t *testing.T) {
	r := newRand(t)
	const heads, d, n = 8, 4, 9
	for _, kvHeads := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("kv%d", kvHeads), func(t *testing.T) {
			group := heads / kvHeads
			k, v := vec(r, n*kvHeads*d, normal), vec(r, n*kvHeads*d, normal)
			var kx, vx []float32 // expanded: (n, heads*d)
			for j := 0; j < n; j++ {
				for h := 0; h < heads; h++ {
					src := (j*kvHeads + h/group) * d
					kx = append(kx, k[src:src+d]...)
					vx = append(vx, v[src:src+d]...)
				}
			}
			q := vec(r, 2*heads*d, normal)
			m := maskKinds(r, 2, n)["causal"]
			scratch := make([]float32, kernels.AttentionScratch(kernels.KV{Len: n}, 2))
			got := make([]float32, len(q))
			kernels.Attention(got, q, 2, pagedKV(k, v, n, kvHeads*d, 5), m, kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: d, Scale: 0.5}, scratch)
			want := make([]float32, len(q))
			kernels.Attention(want, q, 2, pagedKV(kx, vx, n, heads*d, 5), m, kernels.AttnShape{Heads: heads, KVHeads: heads, HeadDim: d, Scale: 0.5}, scratch)
			requireSame(t, "GQA vs expanded MHA", want, got)

			// And directly: V constant per KV head (value kvh+1) makes every
			// output of head h equal h/group+1.
			for j := 0; j < n; j++ {
				for kh := 0; kh < kvHeads; kh++ {
					for c := 0; c < d; c++ {
						v[(j*kvHeads+kh)*d+c] = float32(kh + 1)
					}
				}
			}
			kernels.Attention(got, q, 2, pagedKV(k, v, n, kvHeads*d, 5), m, kernels.AttnShape{Heads: heads, KVHeads: kvHeads, HeadDim: d, Scale: 0.5}, scratch)
			for i, g := range got {
				h := (i / d) % heads
				if w := float64(h/group + 1); math.Abs(float64(g)-w) > 1e-5 {
					t.Fatalf("output %d (head %d) = %v, want %v (KV head %d)", i, h, g, w, h/group)
				}
			}
		})
	}
}

// TestAttentionTinyTrace is the seed text's worked example: one head, d = 2,
// q = k = x and v = x with the second number doubled, tokens (1,0), (0,1),
// (1,1) arriving one by one. The printed outputs (1,0), (0.33,1.34),
// (0.75,1.50) are those of scaled attention, Scale = 1/sqrt(2) (with Scale = 1
// step 2 would give (0.27,1.46)). Decoding step by step must equal the full
// causal batch, bit for bit.
func TestAttentionTinyTrace(t *testing.T) {
	x := []float32{1, 0, 0, 1, 1, 1}
	v := []float32{1, 0, 0, 2, 1, 2}
	s := kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: float32(1 / math.Sqrt(2))}
	want := []float32{1, 0, 0.33, 1.34, 0.75, 1.50}
	scratch := make([]float32, kernels.AttentionScratch(kernels.KV{Len: 3}, 3))

	batch := make([]float32, 6)
	m := &kernels.Mask{}
	kernels.CausalMask(m, []int32{0, 1, 2}, 0)
	kernels.Attention(batch, x, 3, pagedKV(x, v, 3, 2, 2), m, s, scratch)
	if d := cmp.Diff(want, batch, cmpopts.EquateApprox(0, 0.006)); d != "" {
		t.Fatalf("tiny trace, causal batch (-want +got):\n%s", d)
	}
	for step := 1; step <= 3; step++ {
		out := make([]float32, 2)
		kernels.Attention(out, x[2*(step-1):2*step], 1, pagedKV(x, v, step, 2, 2), nil, s, scratch)
		requireSame(t, fmt.Sprintf("step %d vs batch row", step), batch[2*(step-1):2*step], out)
	}
}

// TestAttentionTreeMask checks tree visibility against attention over an
// explicitly gathered KV that holds only the visible slots (same ascending
// order, so the result must be bit-identical).
func TestAttentionTreeMask(t *testing.T) {
	// Prefix of 3 slots, then tree nodes at slots 3..7:
	//   node 0 (slot 3) ← prefix tail; node 1 (slot 4) ← node 0; node 2 (slot 5) ← node 0;
	//   node 3 (slot 6) ← node 2; node 4 (slot 7) ← prefix tail.
	m := &kernels.Mask{
		Lo:       []int32{0, 0, 0, 0, 1},
		Hi:       []int32{4, 5, 6, 7, 8},
		Tree:     [][]uint64{{0b00001}, {0b00011}, {0b00101}, {0b01101}, {0b10000}},
		TreeBase: []int32{3, 3, 3, 3, 3},
	}
	wantVisible := [][]int32{
		{0, 1, 2, 3},
		{0, 1, 2, 3, 4},
		{0, 1, 2, 3, 5},
		{0, 1, 2, 3, 5, 6},
		{1, 2, 7}, // Lo = 1 (a window) hides slot 0
	}
	for i, want := range wantVisible {
		var got []int32
		for j := int32(0); j < 8; j++ {
			if m.Visible(i, j) {
				got = append(got, j)
			}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("row %d visible slots (-want +got):\n%s", i, d)
		}
	}
	r := newRand(t)
	s := kernels.AttnShape{Heads: 2, KVHeads: 1, HeadDim: 3, Scale: 0.6}
	k, v := vec(r, 8*3, normal), vec(r, 8*3, normal)
	q := vec(r, 5*6, normal)
	got := make([]float32, len(q))
	kernels.Attention(got, q, 5, pagedKV(k, v, 8, 3, 3), m, s, make([]float32, 8))
	for i, vis := range wantVisible {
		var gk, gv []float32
		for _, j := range vis {
			gk = append(gk, k[j*3:j*3+3]...)
			gv = append(gv, v[j*3:j*3+3]...)
		}
		one := make([]float32, 6)
		kernels.Attention(one, q[i*6:i*6+6], 1, pagedKV(gk, gv, len(vis), 3, 2), nil, s, make([]float32, len(vis)))
		requireSame(t, fmt.Sprintf("row %d vs gathered KV", i), one, got[i*6:i*6+6])
	}
}

func TestAttentionNoVisibleSlotIsZero(t *testing.T) {
	q := []float32{float32(math.NaN()), 1}
	dst := []float32{5, 5}
	m := &kernels.Mask{Lo: []int32{2}, Hi: []int32{2}}
	kv := pagedKV([]float32{1, 2, 3, 4}, []float32{1, 2, 3, 4}, 2, 2, 2)
	kernels.Attention(dst, q, 1, kv, m, kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: 1}, make([]float32, 2))
	if d := cmp.Diff([]float32{0, 0}, dst); d != "" {
		t.Fatalf("row with no visible slot (-want +got):\n%s", d)
	}
	// The same with a NaN query but a visible slot propagates NaN.
	kernels.Attention(dst, q, 1, kv, nil, kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: 1}, make([]float32, 2))
	if !math.IsNaN(float64(dst[0])) || !math.IsNaN(float64(dst[1])) {
		t.Fatalf("NaN query gave %v, want NaN", dst)
	}
}

func TestAttentionPanics(t *testing.T) {
	kv := pagedKV(make([]float32, 8), make([]float32, 8), 4, 2, 2)
	s := kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: 1}
	tests := []struct {
		name string
		f    func()
	}{
		{"heads not multiple", func() {
			kernels.Attention(make([]float32, 6), make([]float32, 6), 1, kv, nil, kernels.AttnShape{Heads: 3, KVHeads: 2, HeadDim: 2}, make([]float32, 4))
		}},
		{"short q", func() { kernels.Attention(make([]float32, 4), make([]float32, 3), 2, kv, nil, s, make([]float32, 4)) }},
		{"short scratch", func() { kernels.Attention(make([]float32, 2), make([]float32, 2), 1, kv, nil, s, make([]float32, 3)) }},
		{"short mask", func() {
			kernels.Attention(make([]float32, 4), make([]float32, 4), 2, kv, &kernels.Mask{Lo: []int32{0}, Hi: []int32{1}}, s, make([]float32, 4))
		}},
		{"missing pages", func() {
			kernels.Attention(make([]float32, 2), make([]float32, 2), 1, kernels.KV{K: kv.K[:1], V: kv.V, PageTokens: 2, Len: 4}, nil, s, make([]float32, 4))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { mustPanic(t, "kernels: Attention:", tc.f) })
	}
}

func TestAttentionNoAlloc(t *testing.T) {
	r := newRand(t)
	s := kernels.AttnShape{Heads: 8, KVHeads: 4, HeadDim: 8, Scale: 0.35}
	const n, rows = 40, 4
	kv := pagedKV(vec(r, n*32, normal), vec(r, n*32, normal), n, 32, 16)
	q, dst := vec(r, rows*64, normal), make([]float32, rows*64)
	scratch := make([]float32, kernels.AttentionScratch(kv, rows))
	for name, m := range maskKinds(r, rows, n) {
		if a := testing.AllocsPerRun(20, func() { kernels.Attention(dst, q, rows, kv, m, s, scratch) }); a != 0 {
			t.Errorf("mask %s: Attention allocates %v times per call", name, a)
		}
	}
}

// TestAttentionPoolThreads: AttentionPool gives, bit for bit, what Attention
// gives on one thread, for any thread count and any split of the rows×heads
// items (the split threshold is lifted so tiny calls split too), with every
// mask kind, special values and a closed pool.
func TestAttentionPoolThreads(t *testing.T) {
	defer kernels.SplitAllAttention()()
	shapes := []attnCase{{1, 1, 4}, {4, 2, 8}, {6, 3, 17}, {8, 1, 64}}
	for _, th := range []int{1, 2, 3, 5} {
		p := kernels.NewPool(th)
		defer p.Close()
		for _, sh := range shapes {
			for _, k := range []kind{normal, special} {
				t.Run(fmt.Sprintf("threads=%d/h%d_kv%d_d%d/%v", th, sh.heads, sh.kvHeads, sh.headDim, k), func(t *testing.T) {
					r := newRand(t)
					s := kernels.AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.headDim, Scale: 0.3}
					width := sh.kvHeads * sh.headDim
					for _, n := range []int{0, 1, 9, 40} {
						kv := pagedKV(vec(r, n*width, k), vec(r, n*width, normal), n, width, 7)
						for _, rows := range []int{1, 3, 17} { // 17: split by balanced whole rows
							for name, m := range maskKinds(r, rows, n) {
								q := vec(r, rows*sh.heads*sh.headDim, k)
								want := make([]float32, len(q))
								kernels.Attention(want, q, rows, kv, m, s, make([]float32, kernels.AttentionScratch(kv, rows)))
								need := kernels.AttentionPoolScratch(p, kv, rows)
								if one := kernels.AttentionScratch(kv, rows); need != th*one || one < n {
									t.Fatalf("AttentionPoolScratch = %d, want %d threads × AttentionScratch = %d (≥ %d slots)", need, th, one, n)
								}
								sbuf, scratch := guarded(need, 1)
								got := make([]float32, len(q))
								kernels.AttentionPool(p, got, q, rows, kv, m, s, scratch)
								checkGuard(t, sbuf, 1, need)
								requireSame(t, fmt.Sprintf("n=%d rows=%d mask=%s", n, rows, name), want, got)
							}
						}
					}
				})
			}
		}
	}
	t.Run("closed pool", func(t *testing.T) {
		r := newRand(t)
		p := kernels.NewPool(3)
		p.Close()
		s := kernels.AttnShape{Heads: 4, KVHeads: 2, HeadDim: 8, Scale: 0.3}
		kv := pagedKV(vec(r, 30*16, normal), vec(r, 30*16, normal), 30, 16, 8)
		q := vec(r, 2*32, normal)
		want, got := make([]float32, len(q)), make([]float32, len(q))
		kernels.Attention(want, q, 2, kv, nil, s, make([]float32, 30))
		kernels.AttentionPool(p, got, q, 2, kv, nil, s, make([]float32, kernels.AttentionPoolScratch(p, kv, 2)))
		requireSame(t, "closed pool", want, got)
	})
}

// TestAttentionPoolDefaultSplit: at a real decode shape (above the split
// threshold) two threads give the one-thread result bit for bit.
func TestAttentionPoolDefaultSplit(t *testing.T) {
	r := newRand(t)
	s := kernels.AttnShape{Heads: 12, KVHeads: 12, HeadDim: 64, Scale: 0.125}
	const n = 300
	width := s.KVHeads * s.HeadDim
	kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 64)
	q := vec(r, s.Heads*s.HeadDim, normal)
	want, got := make([]float32, len(q)), make([]float32, len(q))
	kernels.Attention(want, q, 1, kv, nil, s, make([]float32, n))
	p := kernels.NewPool(2)
	defer p.Close()
	kernels.AttentionPool(p, got, q, 1, kv, nil, s, make([]float32, kernels.AttentionPoolScratch(p, kv, 1)))
	requireSame(t, "2 threads vs 1", want, got)
}

func TestAttentionPoolPanics(t *testing.T) {
	p := kernels.NewPool(2)
	defer p.Close()
	kv := pagedKV(make([]float32, 8), make([]float32, 8), 4, 2, 2)
	s := kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: 1}
	// One thread's worth of scratch is not enough for a 2-thread pool.
	mustPanic(t, "kernels: Attention:", func() {
		kernels.AttentionPool(p, make([]float32, 2), make([]float32, 2), 1, kv, nil, s, make([]float32, 4))
	})
}

func TestAttentionPoolNoAlloc(t *testing.T) {
	defer kernels.SplitAllAttention()()
	r := newRand(t)
	p := kernels.NewPool(2)
	defer p.Close()
	s := kernels.AttnShape{Heads: 8, KVHeads: 4, HeadDim: 8, Scale: 0.35}
	const n, rows = 40, 4
	kv := pagedKV(vec(r, n*32, normal), vec(r, n*32, normal), n, 32, 16)
	q, dst := vec(r, rows*64, normal), make([]float32, rows*64)
	scratch := make([]float32, kernels.AttentionPoolScratch(p, kv, rows))
	for name, m := range maskKinds(r, rows, n) {
		if a := testing.AllocsPerRun(20, func() { kernels.AttentionPool(p, dst, q, rows, kv, m, s, scratch) }); a != 0 {
			t.Errorf("mask %s: AttentionPool allocates %v times per call", name, a)
		}
	}
}
