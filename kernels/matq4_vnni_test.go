//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"simd/archsimd"

	"github.com/sluicehq/sluice/tensor"
)

// requireQ4VNNI runs matQ4_0Fast and matQ4_0VNNI over rows [lo,hi) into
// NaN-poisoned outputs and fails on the first output that differs, or on any
// write outside [lo,hi).
func requireQ4VNNI(t *testing.T, what string, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	t.Helper()
	want := make([]float32, n*rows)
	got := make([]float32, n*rows)
	poison := math.Float32frombits(0x7fbadbad)
	for i := range want {
		want[i], got[i] = poison, poison
	}
	matQ4_0Fast(want, w, xq, n, rows, cols, lo, hi)
	matQ4_0VNNI(got, w, xq, n, rows, cols, lo, hi)
	for i := range want {
		if !sameBits(want[i], got[i]) || (i%rows < lo || i%rows >= hi) && math.Float32bits(got[i]) != 0x7fbadbad {
			t.Fatalf("%s: n=%d rows=%d cols=%d [%d,%d): out[input %d, row %d] = %v (%#08x), matQ4_0Fast %v (%#08x)",
				what, n, rows, cols, lo, hi, i/rows, i%rows, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestQ4VNNIMatchesFast checks matQ4_0VNNI bit for bit against matQ4_0Fast
// over even and odd block counts, every tile remainder of rows and inputs,
// sub-ranges of rows, row blocks that cut the four-row groups, and weights
// and activations full of special scales.
func TestQ4VNNIMatchesFast(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() {
		t.Skip("CPU lacks AVX-512 VNNI: matQ4_0VNNI is not used")
	}
	ns := []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17}
	cases := []struct {
		cols int
		rows []int
	}{
		{32, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33}},
		{64, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33}},
		{96, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33}},
		{288, []int{1, 4, 5, 8, 9, 33}},
		{768, []int{1, 3, 4, 9, 12}},
		{2048, []int{1, 4, 7}},
		{5632, []int{1, 5}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("cols=%d", c.cols), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(c.cols), 0x9e3779b9))
			for _, rows := range c.rows {
				for _, n := range ns {
					if c.cols >= 2048 && n > 9 && rows > 1 {
						continue // the big shapes' remainders are covered by n ≤ 9
					}
					special := (rows+n)%2 == 0
					w := q4VNNIWeight(r, rows, c.cols, special, rows%3 == 2)
					xq := q4VNNIActs(r, n, c.cols, special)
					what := fmt.Sprintf("special=%v", special)
					requireQ4VNNI(t, what, w, xq, n, rows, c.cols, 0, rows)
					if rows > 2 {
						lo := 1 + r.IntN(rows-2)
						hi := lo + 1 + r.IntN(rows-lo)
						requireQ4VNNI(t, what, w, xq, n, rows, c.cols, lo, hi)
					}
				}
			}
		})
	}
}

// TestQ4VNNIRowBlocks shrinks rowBlockBytes so row blocks hold 1, 2, 3, 6 or
// 9 rows (7 and 11 round down to whole three-row tiles): the tiles then cross
// many block edges, and the leftover rows of the last block, or of every
// block when it is smaller than a tile, take the row kernel.
func TestQ4VNNIRowBlocks(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() {
		t.Skip("CPU lacks AVX-512 VNNI: matQ4_0VNNI is not used")
	}
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	r := rand.New(rand.NewPCG(7, 8))
	const rows, cols = 29, 160
	rb := cols / tile * q4Blk
	w := q4VNNIWeight(r, rows, cols, true, false)
	for _, blk := range []int{1, 2, 3, 7, 11} {
		rowBlockBytes = blk * rb
		for _, n := range []int{4, 5, 8, 11} {
			xq := q4VNNIActs(r, n, cols, true)
			what := fmt.Sprintf("block=%d rows", blk)
			requireQ4VNNI(t, what, w, xq, n, rows, cols, 0, rows)
			requireQ4VNNI(t, what, w, xq, n, rows, cols, 2, 27)
		}
	}
}

// TestQ4VNNIScales checks each special scale alone, in the first and the odd
// last block, against one input with ordinary, zero and huge activations:
// an Inf scale must come out NaN (not ±Inf), a NaN scale NaN, a subnormal or
// zero scale exactly as matQ4_0Fast rounds it.
func TestQ4VNNIScales(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() {
		t.Skip("CPU lacks AVX-512 VNNI: matQ4_0VNNI is not used")
	}
	r := rand.New(rand.NewPCG(3, 4))
	const rows, cols = 4, 96 // three blocks: one pair and an odd block
	for _, s := range q4Scales {
		for _, blk := range []int{0, 2} {
			w := q4VNNIWeight(r, rows, cols, false, false)
			for row := range rows {
				o := (row*cols/tile + blk) * q4Blk
				w[o], w[o+1] = byte(s), byte(s>>8)
			}
			for _, n := range []int{1, 4} {
				xq := q4VNNIActs(r, n, cols, false)
				requireQ4VNNI(t, fmt.Sprintf("scale %#04x in block %d", s, blk), w, xq, n, rows, cols, 0, rows)
				if s&0x7c00 == 0x7c00 { // Inf or NaN: the output must be NaN
					out := make([]float32, n*rows)
					matQ4_0VNNI(out, w, xq, n, rows, cols, 0, rows)
					for i, v := range out {
						if v == v {
							t.Fatalf("scale %#04x in block %d: out[%d] = %v, want NaN", s, blk, i, v)
						}
					}
				}
			}
		}
	}
}

// TestQ4VNNINoColumns checks a width under one block zeroes [lo,hi) only.
func TestQ4VNNINoColumns(t *testing.T) {
	dst := []float32{1, 2, 3, 4, 5, 6}
	matQ4_0VNNI(dst, nil, new(actQ8), 2, 3, 0, 1, 3)
	want := []float32{1, 0, 0, 4, 0, 0}
	for i := range dst {
		if dst[i] != want[i] {
			t.Fatalf("dst = %v, want %v", dst, want)
		}
	}
}

// TestQ4VNNIThroughMatMul swaps matQ4_0VNNI in as the Q4_0 kernel and checks
// MatMul on a three-thread Pool (row ranges split at arbitrary rows) gives
// matQ4_0Fast's bits, as the lead's dispatch will.
func TestQ4VNNIThroughMatMul(t *testing.T) {
	if !archsimd.X86.AVX512VNNI() {
		t.Skip("CPU lacks AVX-512 VNNI: matQ4_0VNNI is not used")
	}
	if matQ4_0ActImpl == nil {
		t.Skip("no int8-activation Q4_0 kernel in this kernel set")
	}
	defer func(k actKernel) { matQ4_0ActImpl = k }(matQ4_0ActImpl)
	defer SetParallelMinMACs(1)()
	p := NewPool(3)
	defer p.Close()
	r := rand.New(rand.NewPCG(5, 6))
	for _, sh := range [][3]int{{37, 96, 1}, {37, 96, 9}, {50, 2048, 1}, {50, 2048, 13}} {
		rows, cols, n := sh[0], sh[1], sh[2]
		w := Weight{DType: tensor.Q4_0, Data: q4VNNIWeight(r, rows, cols, true, false), Rows: rows, Cols: cols}
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		want := make([]float32, n*rows)
		got := make([]float32, n*rows)
		matQ4_0ActImpl = matQ4_0Fast
		MatMul(p, want, w, x, n)
		matQ4_0ActImpl = matQ4_0VNNI
		MatMul(p, got, w, x, n)
		for i := range want {
			if !sameBits(want[i], got[i]) {
				t.Fatalf("%d×%d n=%d: out[%d] = %v, matQ4_0Fast %v", rows, cols, n, i, got[i], want[i])
			}
		}
	}
}
