//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// The assembly F32 and BF16 kernels must reproduce matF32AVX512 and
// matBF16AVX512 bit for bit: same chain per output, same lane-sum tree. These
// tests compare them on awkward shapes and values (the helpers runHalf,
// asmVec and sameBits are mathalf_asm_test.go's) and check that nothing
// outside [lo,hi) is written.

// asmPair is one assembly kernel, the archsimd kernel it must match, and a
// weight maker for its dtype.
type asmPair struct {
	name      string
	asm, simd matKernel
	// weight returns rows×cols weights at offset off of their allocation
	// (off not a multiple of the element size makes them misaligned), N(0,1)
	// with special values mixed in when special is set.
	weight func(r *rand.Rand, rows, cols, off int, special bool) []byte
	size   int // bytes per weight
}

var asmPairs = []asmPair{
	{"f32", matF32Asm, matF32AVX512, f32Weight, 4},
	{"f16", matF16Asm, matF16AVX512, halfWeight, 2},
	{"bf16", matBF16Asm, matBF16AVX512, bf16Weight, 2},
}

// f32Specials are float32 patterns worth sprinkling into weights: ±0,
// subnormals, the largest finite, ±Inf, quiet and signalling NaNs with
// payloads.
var f32Specials = []uint32{
	0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00155555,
	0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xffa55555, 0x7fffffff,
}

// bf16Specials are f32Specials' bfloat16 counterparts.
var bf16Specials = []uint16{
	0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x807f, 0x0015,
	0x7f7f, 0xff7f, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xffa5, 0x7fff,
}

func f32Weight(r *rand.Rand, rows, cols, off int, special bool) []byte {
	b := make([]byte, off+4*rows*cols)[off:]
	for k := range rows * cols {
		u := math.Float32bits(float32(r.NormFloat64()))
		if special && r.IntN(8) == 0 {
			u = f32Specials[r.IntN(len(f32Specials))]
		}
		binary.LittleEndian.PutUint32(b[4*k:], u)
	}
	return b
}

func bf16Weight(r *rand.Rand, rows, cols, off int, special bool) []byte {
	b := make([]byte, off+2*rows*cols)[off:]
	for k := range rows * cols {
		h := tensor.F32ToBF16(float32(r.NormFloat64()))
		if special && r.IntN(8) == 0 {
			h = bf16Specials[r.IntN(len(bf16Specials))]
		}
		binary.LittleEndian.PutUint16(b[2*k:], h)
	}
	return b
}

// compareAsm checks p.asm against p.simd on one call.
func compareAsm(t *testing.T, p asmPair, w []byte, x []float32, n, rows, cols, lo, hi int) {
	t.Helper()
	want := runHalf(t, p.simd, w, x, n, rows, cols, lo, hi)
	got := runHalf(t, p.asm, w, x, n, rows, cols, lo, hi)
	for i := range want {
		if !sameBits(want[i], got[i]) {
			t.Fatalf("%s n=%d %d×%d rows [%d,%d): dst[%d] (input %d, row %d) = %v (%#08x), archsimd %v (%#08x)",
				p.name, n, rows, cols, lo, hi, i, i/rows, i%rows, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

func TestMatF32BF16AsmMatchesAVX512(t *testing.T) {
	requireAVX512(t)
	var colsList []int
	for c := 1; c <= 40; c++ {
		colsList = append(colsList, c)
	}
	colsList = append(colsList, 64, 100, 288, 768, 2048)
	rowsList := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 31}
	nList := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17}
	tests := []struct {
		name    string
		special bool
		blk     bool // tiny row blocks: every block one or two 4-row groups
	}{
		{"normal", false, false},
		{"special", true, false},
		{"normal/small-row-blocks", false, true},
	}
	for _, p := range asmPairs {
		for _, tc := range tests {
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				defer SetRowBlockBytes(rowBlockBytes)()
				r := rand.New(rand.NewPCG(21, uint64(len(tc.name)+p.size)))
				for _, cols := range colsList {
					if testing.Short() && cols > 288 {
						continue
					}
					if tc.blk {
						rowBlockBytes = p.size * cols * (4 + 4*(cols%2))
					}
					for _, rows := range rowsList {
						w := p.weight(r, rows, cols, 0, tc.special)
						x := asmVec(r, 17*cols, tc.special)
						for _, n := range nList {
							compareAsm(t, p, w, x, n, rows, cols, 0, rows)
							if rows >= 3 {
								compareAsm(t, p, w, x, n, rows, cols, 1, rows-1)
							}
							if rows >= 6 {
								compareAsm(t, p, w, x, n, rows, cols, rows/2, rows/2+1)
							}
						}
					}
				}
			})
		}
	}
}

// TestMatF32BF16AsmLarge covers more than one row block and every tile width
// on a prompt-sized batch, and decode over many 8-row groups.
func TestMatF32BF16AsmLarge(t *testing.T) {
	requireAVX512(t)
	if testing.Short() {
		t.Skip("-short: skipping 300×1000 n=23 comparison")
	}
	for _, p := range asmPairs {
		t.Run(p.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(21, 2))
			const rows, cols = 300, 1000
			w := p.weight(r, rows, cols, 0, true)
			x := asmVec(r, 23*cols, false)
			for _, n := range []int{1, 12, 23} {
				compareAsm(t, p, w, x, n, rows, cols, 0, rows)
				compareAsm(t, p, w, x, n, rows, cols, 37, 261)
			}
		})
	}
}

// TestMatF32BF16AsmEdges covers the cases that never reach the assembly:
// misaligned weights or no columns (the Go fallback), no inputs, an empty
// row range.
func TestMatF32BF16AsmEdges(t *testing.T) {
	requireAVX512(t)
	tests := []struct {
		name                       string
		off, n, rows, cols, lo, hi int
	}{
		{"misaligned", 1, 3, 5, 33, 0, 5},
		{"misaligned-subrange", 3, 2, 7, 16, 2, 6},
		{"misaligned-decode", 2, 1, 9, 20, 0, 9},
		{"no-inputs", 0, 0, 4, 16, 0, 4},
		{"no-cols", 0, 2, 4, 0, 0, 4},
		{"empty-range", 0, 2, 4, 16, 2, 2},
	}
	for _, p := range asmPairs {
		r := rand.New(rand.NewPCG(21, 3))
		for _, tc := range tests {
			if tc.off%p.size == 0 && tc.off != 0 {
				continue // aligned for this dtype: not the case meant
			}
			t.Run(p.name+"/"+tc.name, func(t *testing.T) {
				w := p.weight(r, tc.rows, tc.cols, tc.off, true)
				x := asmVec(r, tc.n*tc.cols, true)
				compareAsm(t, p, w, x, tc.n, tc.rows, tc.cols, tc.lo, tc.hi)
			})
		}
	}
}

// TestMatBF16AsmEveryValue converts all 65536 bfloat16s: row h holds h at
// column h%16 and zeros elsewhere, x is all ones, so output h is
// BF16ToF32(h)+0 summed with zeros. Both kernels must give exactly that: -0
// becomes +0 (−0·1 + 0), a NaN comes out quiet (bit 22 set) with its
// payload, everything else (subnormals included) is BF16ToF32's value.
func TestMatBF16AsmEveryValue(t *testing.T) {
	requireAVX512(t)
	const rows, cols = 1 << 16, 16
	w := make([]byte, 2*rows*cols)
	for h := range rows {
		binary.LittleEndian.PutUint16(w[2*(h*cols+h%cols):], uint16(h))
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	for _, n := range []int{1, 2} { // decode and a batch tile
		xs := make([]float32, 0, n*cols)
		for range n {
			xs = append(xs, x...)
		}
		want := make([]float32, n*rows)
		matBF16AVX512(want, w, xs, n, rows, cols, 0, rows)
		got := make([]float32, n*rows)
		matBF16Asm(got, w, xs, n, rows, cols, 0, rows)
		for i := range n * rows {
			h := uint16(i % rows)
			f := tensor.BF16ToF32(h)
			exp := math.Float32bits(f)
			switch {
			case f != f:
				exp |= 1 << 22
			case f == 0:
				exp = 0
			}
			if g := math.Float32bits(got[i]); g != exp || g != math.Float32bits(want[i]) {
				t.Fatalf("n=%d bf16 %#04x: matBF16Asm %#08x, matBF16AVX512 %#08x, want %#08x",
					n, h, g, math.Float32bits(want[i]), exp)
			}
		}
	}
}

// TestMatF32BF16AsmNaNPayload: when a single NaN weight reaches an output
// (finite x, no Inf), its quieted payload is the result's, bit for bit, in
// both kernels, for quiet and signalling NaNs of either sign.
func TestMatF32BF16AsmNaNPayload(t *testing.T) {
	requireAVX512(t)
	for _, p := range asmPairs {
		if p.name == "f16" {
			continue // TestMatF16AsmNaNPayload: f16 NaNs are not float32 bit patterns
		}
		// F32 NaNs with payloads anywhere; bfloat16 keeps the top 16 bits.
		nans := []uint32{0x7f800001, 0xff800001, 0x7fa55555, 0xffc00000, 0x7fc00001, 0x7fffffff, 0xffffffff, 0x7f810000}
		if p.size == 2 {
			nans = []uint32{0x7f810000, 0xff810000, 0x7fa50000, 0xffc00000, 0x7fc10000, 0x7fff0000, 0xffff0000, 0xffa50000}
		}
		r := rand.New(rand.NewPCG(21, 4))
		for _, cols := range []int{1, 15, 16, 17, 40, 100, 768} {
			t.Run(fmt.Sprintf("%s/cols=%d", p.name, cols), func(t *testing.T) {
				const rows = 19 // two 8-row decode groups and a tile
				for _, n := range []int{1, 7} {
					w := p.weight(r, rows, cols, 0, false)
					want := make([]uint32, rows)
					for row := range rows {
						u := nans[(row+cols)%len(nans)]
						k := row*cols + r.IntN(cols)
						if p.size == 2 {
							binary.LittleEndian.PutUint16(w[2*k:], uint16(u>>16))
						} else {
							binary.LittleEndian.PutUint32(w[4*k:], u)
						}
						want[row] = u | 1<<22
					}
					x := asmVec(r, n*cols, false)
					ref := runHalf(t, p.simd, w, x, n, rows, cols, 0, rows)
					got := runHalf(t, p.asm, w, x, n, rows, cols, 0, rows)
					for i := range ref {
						exp := want[i%rows]
						if math.Float32bits(got[i]) != exp || math.Float32bits(ref[i]) != exp {
							t.Fatalf("n=%d dst[%d]: asm %#08x, archsimd %#08x, want %#08x",
								n, i, math.Float32bits(got[i]), math.Float32bits(ref[i]), exp)
						}
					}
				}
			})
		}
	}
}

// TestMatF32BF16AsmShortSlices: a slice too short for the call panics in Go
// before the assembly reads or writes anything.
func TestMatF32BF16AsmShortSlices(t *testing.T) {
	requireAVX512(t)
	for _, p := range asmPairs {
		r := rand.New(rand.NewPCG(21, 5))
		for _, n := range []int{1, 2} {
			const rows, cols = 9, 20
			w := p.weight(r, rows, cols, 0, false)
			x := asmVec(r, n*cols, false)
			dst := make([]float32, n*rows)
			tests := []struct {
				name string
				call func()
			}{
				{"short-w", func() { p.asm(dst, w[:len(w)-p.size], x, n, rows, cols, 0, rows) }},
				{"short-x", func() { p.asm(dst, w, x[:len(x)-1], n, rows, cols, 0, rows) }},
				{"short-dst", func() { p.asm(dst[:len(dst)-1], w, x, n, rows, cols, 0, rows) }},
			}
			for _, tc := range tests {
				t.Run(fmt.Sprintf("%s/n=%d/%s", p.name, n, tc.name), func(t *testing.T) {
					defer func() {
						if recover() == nil {
							t.Fatal("no panic")
						}
					}()
					tc.call()
				})
			}
		}
	}
}

// BenchmarkMatF32BF16Asm compares the assembly kernels with the archsimd
// ones, single-threaded, on decode (n=1) with the weight in DRAM (8192×2048
// is 64 MiB in F32 and 32 MiB in BF16, against a 32 MiB L3; the benchmark
// cycles through two of them) and in cache (768×768), and on prefill (n=64,
// 512) at 2048×2048. Bytes are weight bytes, so MB/s is the weight
// bandwidth; compare with BenchmarkStreamRead in the same run.
func BenchmarkMatF32BF16Asm(b *testing.B) {
	requireAVX512(b)
	shapes := []struct {
		rows, cols, n, copies int
	}{
		{8192, 2048, 1, 2},
		{768, 768, 1, 1},
		{2048, 2048, 64, 1},
		{2048, 2048, 512, 1},
	}
	for _, p := range asmPairs {
		impls := []struct {
			name string
			k    matKernel
		}{{"asm", p.asm}, {"avx512", p.simd}}
		for _, sh := range shapes {
			r := rand.New(rand.NewPCG(21, 6))
			var ws [][]byte
			x := asmVec(r, sh.n*sh.cols, false)
			dst := make([]float32, sh.n*sh.rows)
			for _, im := range impls {
				b.Run(fmt.Sprintf("%s/%dx%d/n=%d/%s", p.name, sh.rows, sh.cols, sh.n, im.name), func(b *testing.B) {
					for len(ws) < sh.copies { // built lazily: -bench filters skip the cost
						ws = append(ws, p.weight(r, sh.rows, sh.cols, 0, false))
					}
					b.SetBytes(int64(p.size * sh.rows * sh.cols))
					k := 0
					for b.Loop() {
						im.k(dst, ws[k], x, sh.n, sh.rows, sh.cols, 0, sh.rows)
						k = (k + 1) % len(ws)
					}
				})
			}
		}
	}
}
