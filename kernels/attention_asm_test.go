//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"simd/archsimd"
)

// The assembly tile (attention_amd64.s) must give, item for item, the bits
// of the per-item kernel attentionSIMDItems and of the archsimd tile it
// replaces. These tests compare the three on the shapes the assembly takes
// (head dims that are multiples of 16, one chunk to nine) and on the ones it
// leaves to archsimd, with GQA, pages that cut blocks, every mask kind,
// special values, 1 to 64 rows, prefetch on and off, and thread splits; and
// they check the two assembly routines alone against the Go dot and axpy,
// with guards around what they may write.

func requireAsmAttn(t testing.TB) {
	t.Helper()
	if !attnAsm {
		t.Skip("CPU lacks AVX-512: the assembly attention cannot run here")
	}
}

// asmSpecials are values worth sprinkling into q and K.
var asmSpecials = []float32{
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, 0, float32(math.Copysign(0, -1)),
	math.SmallestNonzeroFloat32, 1e-40,
}

func attnVec(r *rand.Rand, n int, special bool) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if special && r.IntN(8) == 0 {
			v[i] = asmSpecials[r.IntN(len(asmSpecials))]
		}
	}
	return v
}

// asmKV pages n slots of K and V rows (width floats each) in pages of pt
// slots; the unused rows of the last page are NaN.
func asmKV(k, v []float32, n, width, pt int) KV {
	kv := KV{PageTokens: pt, Len: n}
	for p := 0; p*pt < n; p++ {
		kp, vp := make([]float32, pt*width), make([]float32, pt*width)
		for i := range kp {
			kp[i], vp[i] = float32(math.NaN()), float32(math.NaN())
		}
		lo, hi := p*pt*width, min(n, (p+1)*pt)*width
		copy(kp, k[lo:hi])
		copy(vp, v[lo:hi])
		kv.K, kv.V = append(kv.K, kp), append(kv.V, vp)
	}
	return kv
}

// asmMasks is every mask kind for rows query rows ending at slot n-1: none,
// causal, sliding window, draft tree (random parents over the last rows
// slots) and empty rows.
func asmMasks(r *rand.Rand, rows, n int) map[string]*Mask {
	slots := make([]int32, rows)
	for i := range slots {
		slots[i] = int32(max(0, n-rows+i))
	}
	causal, window := &Mask{}, &Mask{}
	CausalMask(causal, slots, 0)
	CausalMask(window, slots, 5)
	empty := &Mask{Lo: make([]int32, rows), Hi: make([]int32, rows)}
	tree := &Mask{}
	base := max(0, n-rows)
	for i := 0; i < rows; i++ {
		empty.Lo[i], empty.Hi[i] = int32(i), int32(i)
		row := make([]uint64, (rows+63)/64)
		if p := r.IntN(i+1) - 1; p >= 0 {
			copy(row, tree.Tree[p])
		}
		row[i/64] |= 1 << (i % 64)
		tree.Lo = append(tree.Lo, 2)
		tree.Hi = append(tree.Hi, int32(base+i+1))
		tree.Tree = append(tree.Tree, row)
		tree.TreeBase = append(tree.TreeBase, int32(base))
	}
	return map[string]*Mask{"nil": nil, "causal": causal, "window": window, "tree": tree, "empty": empty}
}

func requireBits(t *testing.T, what string, want, got []float32) {
	t.Helper()
	for i := range want {
		a, b := want[i], got[i]
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			t.Fatalf("%s: element %d of %d = %v (%#08x), want %v (%#08x)", what, i, len(want),
				b, math.Float32bits(b), a, math.Float32bits(a))
		}
	}
}

// TestAttentionAsmBits: the assembly tile, with and without prefetch, in one
// call, split into item ranges and across two threads, equals the per-item
// kernel and the archsimd tile bit for bit.
func TestAttentionAsmBits(t *testing.T) {
	requireAsmAttn(t)
	shapes := []struct{ heads, kvHeads, d int }{
		{32, 8, 64}, {12, 12, 64}, {4, 4, 16 * 2}, {4, 2, 48}, {6, 3, 80}, {2, 1, 128}, {2, 2, 144},
		{4, 2, 72}, // not a multiple of 16: stays on archsimd
	}
	lens := []int{1, 16, 33, 100}
	rowsList := []int{1, 5, 64}
	if testing.Short() {
		lens = []int{16, 33}
		rowsList = []int{1, 5}
	}
	for _, sh := range shapes {
		for _, special := range []bool{false, true} {
			t.Run(fmt.Sprintf("h%d_kv%d_d%d/special=%v", sh.heads, sh.kvHeads, sh.d, special), func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(sh.heads*1000+sh.d), 7))
				s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
				width := sh.kvHeads * sh.d
				for _, n := range lens {
					keys, vals := attnVec(r, n*width, special), attnVec(r, n*width, false)
					for _, pt := range []int{3, 16, 23, 256} {
						kv := asmKV(keys, vals, n, width, pt)
						for _, rows := range rowsList {
							if rows == 64 && sh.heads > 12 {
								continue // keep the test fast: 64 rows on the smaller shapes only
							}
							q := attnVec(r, rows*s.Heads*s.HeadDim, special)
							for name, m := range asmMasks(r, rows, n) {
								what := fmt.Sprintf("n=%d page=%d rows=%d mask=%s", n, pt, rows, name)
								checkAsmAttn(t, what, q, rows, kv, m, s)
							}
						}
					}
				}
			})
		}
	}
}

func checkAsmAttn(t *testing.T, what string, q []float32, rows int, kv KV, m *Mask, s AttnShape) {
	t.Helper()
	items := rows * s.Heads
	scratch := make([]float32, max(kv.Len, 0))
	want := make([]float32, len(q))
	attentionSIMDItems(want, q, kv, m, s, scratch, 0, items, vecWidth(s.HeadDim))

	run := func(asm, pf bool, f func(dst []float32)) []float32 {
		defer func(a, p bool) { attnAsm, attnPrefetch = a, p }(attnAsm, attnPrefetch)
		attnAsm, attnPrefetch = asm, pf
		dst := make([]float32, len(q))
		for i := range dst {
			dst[i] = float32(math.Inf(-1)) // every element must be written
		}
		f(dst)
		return dst
	}
	whole := func(dst []float32) { attentionSIMD(dst, q, kv, m, s, scratch, 0, items) }
	requireBits(t, what+" archsimd tile", want, run(false, false, whole))
	requireBits(t, what+" asm", want, run(true, true, whole))
	requireBits(t, what+" asm without prefetch", want, run(true, false, whole))
	requireBits(t, what+" asm split into ranges", want, run(true, true, func(dst []float32) {
		for lo := 0; lo < items; {
			hi := min(items, lo+1+(lo*7)%5)
			attentionSIMD(dst, q, kv, m, s, scratch, lo, hi)
			lo = hi
		}
	}))
	requireBits(t, what+" asm small tiles", want, run(true, true, func(dst []float32) {
		attentionTiles(dst, q, kv, m, s, scratch, make([]float32, kv.Len+1), 0, items, vecWidth(s.HeadDim))
	}))
	requireBits(t, what+" asm on two threads", want, run(true, true, func(dst []float32) {
		defer func(old int) { attnMinWork = old }(attnMinWork)
		attnMinWork = 1
		p := NewPool(2)
		defer p.Close()
		AttentionPool(p, dst, q, rows, kv, m, s, make([]float32, AttentionPoolScratch(p, kv, rows)))
	}))
}

// asmGuardBits marks floats the assembly must not write.
const asmGuardBits = 0x7f8badf1

// TestAttnScores16: the score routine alone, for head dims of one to nine
// chunks, rows in random order and places, and visibility sets from none
// to all, stores exactly popcount(vis) scores, each Scale·dotF32x16(q, K_k)
// of the visible slots in ascending order; TestAttnAxpy16 likewise checks
// the value routine against axpyF32SIMD row by row.
func TestAttnScores16(t *testing.T) {
	requireAsmAttn(t)
	r := rand.New(rand.NewPCG(3, 4))
	for _, d := range []int{16, 32, 48, 64, 80, 128, 144} {
		for _, special := range []bool{false, true} {
			t.Run(fmt.Sprintf("d=%d/special=%v", d, special), func(t *testing.T) {
				const kvDim = 160 * 2
				mem := attnVec(r, 40*kvDim, special)
				q := attnVec(r, d, special)
				for trial := range 200 {
					var rows [attnBlock]unsafe.Pointer
					var idx [attnBlock]int
					for k := range rows {
						idx[k] = r.IntN(40)
						rows[k] = unsafe.Pointer(&mem[idx[k]*kvDim])
					}
					off := r.IntN((kvDim-d)/16+1) * 16
					vis := uint32(r.Uint32() & 0xffff)
					switch trial {
					case 0:
						vis = 0xffff
					case 1:
						vis = 1
					case 2:
						vis = 0x8000
					case 3:
						vis = 0
					}
					scale := float32(r.NormFloat64())
					sc := make([]float32, 16+4)
					for i := range sc {
						sc[i] = math.Float32frombits(asmGuardBits)
					}
					var pf *[attnBlock]unsafe.Pointer
					if trial%2 == 0 {
						pf = &rows
					}
					attnScores16(&sc[0], &q[0], &rows, uintptr(off*4), uintptr(d), vis, scale, pf)
					n := 0
					for k := range attnBlock {
						if vis&(1<<k) == 0 {
							continue
						}
						krow := mem[idx[k]*kvDim+off : idx[k]*kvDim+off+d]
						want := dotF32x16(q, krow) * scale
						requireBits(t, fmt.Sprintf("trial %d vis %#04x slot %d", trial, vis, k), []float32{want}, sc[n:n+1])
						n++
					}
					for i := n; i < len(sc); i++ {
						if math.Float32bits(sc[i]) != asmGuardBits {
							t.Fatalf("trial %d vis %#04x: wrote sc[%d] past the %d scores", trial, vis, i, n)
						}
					}
				}
			})
		}
	}
}

func TestAttnAxpy16(t *testing.T) {
	requireAsmAttn(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{16, 32, 48, 64, 80, 128, 144} {
		for _, special := range []bool{false, true} {
			t.Run(fmt.Sprintf("d=%d/special=%v", d, special), func(t *testing.T) {
				const kvDim = 160 * 2
				mem := attnVec(r, 40*kvDim, special)
				for trial := range 200 {
					var rows [attnBlock]unsafe.Pointer
					var idx [attnBlock]int
					for k := range rows {
						idx[k] = r.IntN(40)
						rows[k] = unsafe.Pointer(&mem[idx[k]*kvDim])
					}
					off := r.IntN((kvDim-d)/16+1) * 16
					vis := uint32(r.Uint32() & 0xffff)
					switch trial {
					case 0:
						vis = 0xffff
					case 1:
						vis = 1
					case 2:
						vis = 0x8000
					case 3:
						vis = 0
					}
					w := attnVec(r, 16, special)
					start := attnVec(r, d, special)
					got := make([]float32, d+4)
					copy(got, start)
					for i := d; i < len(got); i++ {
						got[i] = math.Float32frombits(asmGuardBits)
					}
					want := append([]float32(nil), start...)
					n := 0
					for k := range attnBlock {
						if vis&(1<<k) != 0 {
							axpyF32SIMD(16, want, w[n], mem[idx[k]*kvDim+off:idx[k]*kvDim+off+d])
							n++
						}
					}
					var pf *[attnBlock]unsafe.Pointer
					if trial%2 == 0 {
						pf = &rows
					}
					attnAxpy16(&got[0], &w[0], &rows, uintptr(off*4), uintptr(d), vis, pf)
					requireBits(t, fmt.Sprintf("trial %d vis %#04x", trial, vis), want, got[:d])
					for i := d; i < len(got); i++ {
						if math.Float32bits(got[i]) != asmGuardBits {
							t.Fatalf("trial %d: wrote out[%d] past d=%d", trial, i, d)
						}
					}
				}
			})
		}
	}
}

// BenchmarkAttentionAsm compares, in one run, the archsimd tile ("tile",
// the kernel before the assembly) with the assembly one ("asm") on one
// thread at BenchmarkAttentionTiled's shapes, decode (1 row) and prefill
// (64 rows), reporting ns per (slot, item). The KV of one call fits in L3.
func BenchmarkAttentionAsm(b *testing.B) {
	if !attnAsm {
		b.Skip("CPU lacks AVX-512")
	}
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
				kv, q, m := benchAttnInputs(rand.New(rand.NewPCG(uint64(n), uint64(rows))), s, n, rows)
				dst := make([]float32, len(q))
				scratch := make([]float32, n)
				for _, impl := range []string{"tile", "asm"} {
					b.Run(fmt.Sprintf("%s/ctx=%d/rows=%d/%s", sh.name, n, rows, impl), func(b *testing.B) {
						defer func(old bool) { attnAsm = old }(attnAsm)
						attnAsm = impl == "asm"
						for b.Loop() {
							attentionSIMD(dst, q, kv, m, s, scratch, 0, rows*s.Heads)
						}
						reportSlotItems(b, rows*s.Heads*n)
					})
				}
			}
		}
	}
}

// BenchmarkAttentionAsmDRAM is a decode step's attention from memory: 12
// layers' KV caches (ctx 640, 12 heads of 64: 45 MiB in all, more than the
// L3) visited in turn, as the layers of a 110M-class model do, for the
// archsimd tile and the assembly with and without prefetch.
func BenchmarkAttentionAsmDRAM(b *testing.B) {
	if !attnAsm {
		b.Skip("CPU lacks AVX-512")
	}
	const layers, n = 12, 640
	s := AttnShape{Heads: 12, KVHeads: 12, HeadDim: 64, Scale: 0.125}
	r := rand.New(rand.NewPCG(1, 2))
	kvs := make([]KV, layers)
	var q []float32
	var m *Mask
	for l := range kvs {
		kvs[l], q, m = benchAttnInputs(r, s, n, 1)
	}
	dst := make([]float32, len(q))
	scratch := make([]float32, n)
	for _, impl := range []string{"tile", "asm", "asm-noprefetch"} {
		b.Run(impl, func(b *testing.B) {
			defer func(a, p bool) { attnAsm, attnPrefetch = a, p }(attnAsm, attnPrefetch)
			attnAsm, attnPrefetch = impl != "tile", impl == "asm"
			for b.Loop() {
				for _, kv := range kvs {
					attentionSIMD(dst, q, kv, m, s, scratch, 0, s.Heads)
				}
			}
			reportSlotItems(b, layers*s.Heads*n)
		})
	}
}

func reportSlotItems(b *testing.B, perOp int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perOp), "ns/slot-item")
}

// BenchmarkAttnScores16 is the score routine alone on one L1-resident block
// (the arithmetic's floor), as is BenchmarkAttnAxpy16 for the value routine.
func BenchmarkAttnScores16(b *testing.B) {
	if !archsimd.X86.AVX512() {
		b.Skip("CPU lacks AVX-512")
	}
	rows, q, sc, _ := asmBlock()
	for b.Loop() {
		attnScores16(&sc[0], &q[0], rows, 0, 64, 0xffff, 0.125, nil)
	}
}

func BenchmarkAttnAxpy16(b *testing.B) {
	if !archsimd.X86.AVX512() {
		b.Skip("CPU lacks AVX-512")
	}
	rows, _, w, out := asmBlock()
	for b.Loop() {
		attnAxpy16(&out[0], &w[0], rows, 0, 64, 0xffff, nil)
	}
}

func asmBlock() (rows *[attnBlock]unsafe.Pointer, q, w, out []float32) {
	r := rand.New(rand.NewPCG(8, 9))
	page := attnVec(r, attnBlock*64, false)
	rows = new([attnBlock]unsafe.Pointer)
	for k := range rows {
		rows[k] = unsafe.Pointer(&page[k*64])
	}
	w = attnVec(r, 16, false)
	for i := range w {
		w[i] = float32(math.Abs(float64(w[i]))) / 64
	}
	return rows, attnVec(r, 64, false), w, make([]float32, 64)
}
