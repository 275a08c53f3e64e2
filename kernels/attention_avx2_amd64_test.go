//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/sluicehq/sluice/tensor"
)

// hsum8Dot is the row kernels' per-slot score arithmetic written out in Go: eight
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

// widenRow is the float32 row of a test KV row: float32 elements as they
// are, or the binary16 halves widened.
func widenRow(k32 []float32, k16 []uint16) []float32 {
	if k16 == nil {
		return k32
	}
	w := make([]float32, len(k16))
	for i, h := range k16 {
		w[i] = tensor.F16ToF32(h)
	}
	return w
}

// rowKernelCase is one call's operands for the row kernels: heads query
// heads from place phase in a group of group, n slots of rows stride
// elements apart (float32 or binary16), the head's KV columns at
// kvCol(h), a guard-padded score (or weight) buffer of per floats a head.
type rowKernelCase struct {
	name                              string
	d, heads, group, phase, n, stride int
	f16                               bool
	q                                 []float32
	k32                               []float32
	k16                               []uint16
}

func (c *rowKernelCase) kvCol(h int) int { return ((c.phase + h) / c.group) * c.d }

func (c *rowKernelCase) kptr() unsafe.Pointer {
	if c.f16 {
		return unsafe.Pointer(&c.k16[0])
	}
	return unsafe.Pointer(&c.k32[0])
}

func (c *rowKernelCase) es() uintptr {
	if c.f16 {
		return 2
	}
	return 4
}

// rowKernelCases enumerates the shapes the row kernels must handle: head
// dims of one to eight chunks, one to five heads that start anywhere in a
// GQA group, row strides wider than the heads read, 0 to 27 slots (every
// block/tail split), float32 and binary16 rows, special values, unaligned
// starts.
func rowKernelCases(t *testing.T, r *rand.Rand, f func(c *rowKernelCase)) {
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
	for _, d := range []int{8, 16, 24, 64} {
		for _, gh := range [][2]int{{1, 1}, {1, 3}, {2, 4}, {3, 5}, {4, 2}} {
			group, heads := gh[0], gh[1]
			for phase := range group {
				for _, f16 := range []bool{false, true} {
					for _, special := range []bool{false, true} {
						for n := 0; n <= 27; n++ {
							kvHeads := (phase+heads-1)/group + 1
							stride := kvHeads*d + r.IntN(3)*8
							off := r.IntN(4)
							c := &rowKernelCase{d: d, heads: heads, group: group, phase: phase, n: n, stride: stride, f16: f16}
							c.name = fmt.Sprintf("d=%d heads=%d group=%d phase=%d f16=%v special=%v n=%d stride=%d",
								d, heads, group, phase, f16, special, n, stride)
							c.q = vec(heads*d+off, special)[off:]
							k := vec(max(n, 1)*stride+off, special)[off:]
							if f16 {
								c.k16 = make([]uint16, len(k))
								for i, x := range k {
									c.k16[i] = tensor.F32ToF16(x)
								}
							} else {
								c.k32 = k
							}
							f(c)
						}
					}
				}
			}
		}
	}
}

// TestAttnDotsRowAVX2 checks the row kernel's scores (blocks of eight
// slots with the transposing reduction, then single slots; every head of
// the call) against hsum8Dot bit for bit, so a slot's score is the same
// whichever path, block or head count its call takes, with prefetching on
// and off, and a guard after every head's last score.
func TestAttnDotsRowAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 attention scores: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(21, 22))
	const guard = 0x7fc0dead
	rowKernelCases(t, r, func(c *rowKernelCase) {
		per := c.n + 1 + r.IntN(3)
		scale := float32(1 / math.Sqrt(float64(c.d)))
		for pf := range 2 {
			sc := make([]float32, c.heads*per)
			for i := range sc {
				sc[i] = math.Float32frombits(guard)
			}
			dots := attnDotsRowAVX2
			if c.f16 {
				dots = attnDotsRowF16AVX2
			}
			dots(&sc[0], uintptr(per)*4, &c.q[0], c.kptr(), uintptr(c.stride)*c.es(), c.n, c.d, c.heads, c.group, c.phase, pf, scale)
			for h := range c.heads {
				for m := range c.n {
					col := m*c.stride + c.kvCol(h)
					var kr []float32
					if c.f16 {
						kr = widenRow(nil, c.k16[col:col+c.d])
					} else {
						kr = c.k32[col : col+c.d]
					}
					want := hsum8Dot(c.q[h*c.d:(h+1)*c.d], kr, scale)
					got := sc[h*per+m]
					if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
						t.Fatalf("%s pf=%d: head %d slot %d = %v (%#x), want %v (%#x)", c.name, pf, h, m, got, math.Float32bits(got), want, math.Float32bits(want))
					}
				}
				for m := c.n; m < per; m++ {
					if math.Float32bits(sc[h*per+m]) != guard {
						t.Fatalf("%s pf=%d: head %d: wrote score %d past the last", c.name, pf, h, m)
					}
				}
			}
		}
	})
}

// TestAttnAxpyRowAVX2 checks the row kernel's weighted values against
// out[t] = fma(a_j, v_j[t], out[t]) slot by slot in order, bit for bit, over
// the same shapes (V rows are the cases' K rows), from a nonzero out (the
// kernel adds to what is there: a run continues the previous run's sums),
// with prefetching on and off and a guard after the output.
func TestAttnAxpyRowAVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 attention values: CPU lacks AVX2+FMA+F16C")
	}
	r := rand.New(rand.NewPCG(25, 26))
	rowKernelCases(t, r, func(c *rowKernelCase) {
		per := c.n + 1 + r.IntN(3)
		a := make([]float32, c.heads*per)
		for i := range a {
			a[i] = float32(r.Float64())
		}
		init := make([]float32, c.heads*c.d)
		for i := range init {
			init[i] = float32(r.NormFloat64())
		}
		want := slices.Clone(init)
		for h := range c.heads {
			for m := range c.n {
				col := m*c.stride + c.kvCol(h)
				vr := widenRow(c.k32, c.k16)[col : col+c.d]
				for t := range c.d {
					o := &want[h*c.d+t]
					*o = float32(math.FMA(float64(a[h*per+m]), float64(vr[t]), float64(*o)))
				}
			}
		}
		for pf := range 2 {
			out := append(slices.Clone(init), 12345)
			axpy := attnAxpyRowAVX2
			if c.f16 {
				axpy = attnAxpyRowF16AVX2
			}
			if c.n > 0 {
				axpy(&out[0], &a[0], uintptr(per)*4, c.kptr(), uintptr(c.stride)*c.es(), c.n, c.d, c.heads, c.group, c.phase, pf)
			}
			for i, w := range want {
				if math.Float32bits(out[i]) != math.Float32bits(w) && !(out[i] != out[i] && w != w) {
					t.Fatalf("%s pf=%d: out[%d] = %v, want %v", c.name, pf, i, out[i], w)
				}
			}
			if out[len(want)] != 12345 {
				t.Fatalf("%s pf=%d: wrote past the output", c.name, pf)
			}
		}
	})
}

// TestAttentionAVX2HeadsPerCall checks that an item's output does not
// depend on how many heads or rows share its calls (scratch with room for
// one, three, attnScoreBufs or attnRowBlock rows of attnScoreBufs heads'
// scores: the row blocks of attnRowBlockAVX2) or on which items the call covers
// (ranges that split a row's heads, as a thread split does), over GQA
// shapes, float32 and binary16 pages, pages that cut the slot runs,
// causal, windowed, tree and empty masks, special values, and a guard
// after the output.
func TestAttentionAVX2HeadsPerCall(t *testing.T) {
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
		{4, 2, 8}, {8, 4, 8}, {8, 8, 8}, {12, 4, 16}, {6, 2, 24}, {8, 1, 16}, {4, 4, 32}, {12, 12, 64}, {20, 4, 16},
	} {
		for _, n := range []int{1, 5, 17, 40} {
			for _, pt := range []int{3, 16} {
				for _, f16 := range []bool{false, true} {
					width := sh.kvHeads * sh.d
					kv := KV{PageTokens: pt, Len: n}
					for p := 0; p*pt < n; p++ {
						k, v := vec(pt*width), vec(pt*width)
						if f16 {
							kv.K16, kv.V16 = append(kv.K16, halves(k)), append(kv.V16, halves(v))
						} else {
							kv.K, kv.V = append(kv.K, k), append(kv.V, v)
						}
					}
					for _, rows := range []int{3, attnRowBlock + 3} {
						slots := make([]int32, rows)
						for i := range slots {
							slots[i] = int32(max(n-rows+i, 0))
						}
						causal, window := &Mask{}, &Mask{}
						CausalMask(causal, slots, 0)
						CausalMask(window, slots, 4)
						tree := &Mask{Lo: make([]int32, rows), Hi: make([]int32, rows),
							TreeBase: make([]int32, rows), Tree: make([][]uint64, rows)}
						empty := &Mask{Lo: make([]int32, rows), Hi: make([]int32, rows)}
						for i := range tree.Tree {
							tree.Hi[i] = int32(n)
							empty.Lo[i], empty.Hi[i] = 1, 1
							tree.Tree[i] = make([]uint64, (n+63)/64)
							for j := range n {
								if r.IntN(3) != 0 {
									tree.Tree[i][j/64] |= 1 << (j % 64)
								}
							}
						}
						s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
						items := rows * sh.heads
						q := vec(items * sh.d)
						for name, m := range map[string]*Mask{"nil": nil, "causal": causal, "window": window, "tree": tree, "empty": empty} {
							for _, span := range [][2]int{{0, items}, {1, items - 2}, {3, 3 + sh.heads}, {sh.heads, items}} {
								lo, hi := span[0], span[1]
								what := fmt.Sprintf("h%d kv%d d%d n=%d page=%d f16=%v rows=%d mask=%s items [%d,%d)", sh.heads, sh.kvHeads, sh.d, n, pt, f16, rows, name, lo, hi)
								want := make([]float32, items*sh.d)
								attentionAVX2(want, q, kv, m, s, make([]float32, n), lo, hi)
								for _, room := range []int{3, attnScoreBufs, attnScoreBufs * attnRowBlock} {
									got := make([]float32, items*sh.d+1)
									got[items*sh.d] = 12345
									attentionAVX2(got, q, kv, m, s, make([]float32, room*n), lo, hi)
									for i, w := range want {
										if math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
											t.Fatalf("%s: out[%d] = %v with room for %d heads, %v one head at a time", what, i, got[i], room, w)
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
	}
}

// halves rounds v to binary16.
func halves(v []float32) []uint16 {
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = tensor.F32ToF16(x)
	}
	return h
}
