//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// randomQ8_0 returns rows×cols of Q8_0 blocks with random bytes, the scales
// drawn from a mix that includes 0, subnormals, ±Inf and NaN.
func randomQ8_0(r *rand.Rand, rows, cols int) []byte {
	w := make([]byte, rows*cols/tile*q8Blk)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	specials := []uint16{0, 0x8000, 0x0001, 0x03ff, 0x7c00, 0xfc00, 0x7e00, 0x7bff}
	for b := 0; b < len(w); b += q8Blk {
		h := uint16(0x2000 + r.IntN(0x1000)) // ≈ 0.008 … 0.06
		if r.IntN(8) == 0 {
			h = specials[r.IntN(len(specials))]
		}
		if r.IntN(2) == 0 {
			h |= 0x8000
		}
		w[b], w[b+1] = byte(h), byte(h>>8)
	}
	return w
}

// fma32 is a·b+c rounded once to float32 (IEEE fusedMultiplyAdd). a·b is
// exact in float64; the float64 sum s = a·b+c is corrected by its exact
// error e (TwoSum) when s lies exactly half-way between two float32s, the
// one case where rounding s again could differ from rounding a·b+c once.
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(math.FMA(float64(a), float64(b), float64(c)))
	}
	bp := s - float64(c)
	e := (p - bp) + (float64(c) - (s - bp))
	r := float32(s)
	if float64(r) == s || e == 0 {
		return r
	}
	lo, hi := r, r // the float32 neighbours of s
	if float64(r) < s {
		hi = math.Nextafter32(r, float32(math.Inf(1)))
	} else {
		lo = math.Nextafter32(r, float32(math.Inf(-1)))
	}
	if s-float64(lo) != float64(hi)-s {
		return r // not a tie: rounding s once more is rounding a·b+c
	}
	if e > 0 {
		return hi
	}
	return lo
}

// canonQ8_0 is the VNNI set's order in plain Go (see matq8_vnni_amd64.go),
// from row-major weights and the row-major q and d of xq: the oracle both
// assembly layouts must equal bit for bit.
func canonQ8_0(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	rb := nb * q8Blk
	sc := quantScaleTable()
	for r := lo; r < hi; r++ {
		for i := 0; i < n; i++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk := w[r*rb+b*q8Blk:]
				var s int32
				for j := 0; j < tile; j++ {
					s += int32(int8(blk[2+j])) * int32(xq.q[i*cols+b*tile+j])
				}
				dw := sc[binary.LittleEndian.Uint16(blk)]
				acc = fma32(float32(s), dw*xq.d[i*nb+b], acc)
			}
			dst[i*rows+r] = acc
		}
	}
}

func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		a := float32(r.NormFloat64())
		b := float32(r.NormFloat64() * 1e-3)
		c := float32(r.NormFloat64() * math.Ldexp(1, r.IntN(40)-20))
		// float64's FMA is far more precise than float32: the float32
		// result must be within half an ulp of it.
		got := fma32(a, b, c)
		ex := math.FMA(float64(a), float64(b), float64(c))
		ulp := math.Abs(float64(math.Nextafter32(got, float32(math.Inf(1)))) - float64(got))
		if d := math.Abs(float64(got) - ex); d > ulp/2*(1+1e-9) {
			t.Fatalf("fma32(%v, %v, %v) = %v, exact ≈ %v", a, b, c, got, ex)
		}
	}
	// Ties that rounding float64(a·b+c) again gets wrong (it would pick the
	// even neighbour both times): a·b = 1 + 2^-11 + 2^-24, half-way.
	a, b := float32(1+math.Ldexp(1, -12)), float32(1+math.Ldexp(1, -12))
	c := float32(math.Ldexp(1, -60))
	if got, want := fma32(a, b, c), float32(1+math.Ldexp(1, -11)+math.Ldexp(1, -23)); got != want {
		t.Fatalf("tie broken by a far addend: got %v, want %v", got, want)
	}
	if got, want := fma32(a, b, -c), float32(1+math.Ldexp(1, -11)); got != want {
		t.Fatalf("tie broken by a far negative addend: got %v, want %v", got, want)
	}
}

// q8Acts quantizes n rows of random activations (with specials) for Q8_0
// in the VNNI set's layout.
func q8Acts(r *rand.Rand, n, cols int) *actQ8 {
	x := make([]float32, n*cols)
	for j := range x {
		x[j] = float32(r.NormFloat64())
		if r.IntN(200) == 0 {
			x[j] = []float32{0, float32(math.Inf(1)), float32(math.NaN()), 1e-40}[r.IntN(4)]
		}
	}
	if n > 2 {
		clear(x[cols : cols+tile]) // a zero block: scale 0
	}
	defer func(v bool) { q8Major = v }(q8Major)
	q8Major = true
	var xq actQ8
	xq.quantize(x, n, cols, tensor.Q8_0)
	return &xq
}

func sameQ8Bits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

// TestMatQ8_0VNNI checks both assembly layouts give exactly canonQ8_0's bits
// on every shape, sub-range and input count, including zero, subnormal,
// infinite and NaN scales and activations.
func TestMatQ8_0VNNI(t *testing.T) {
	if !cpuVNNI {
		t.Skip("CPU lacks AVX-512 VNNI: the assembly Q8_0 kernels are not used")
	}
	checkQ8_0Kernels(t, rand.New(rand.NewPCG(3, 4)), matQ8_0VNNI, matQ8_0VNNIPanel)
}

// checkQ8_0Kernels holds a set's row-major and panel Q8_0 kernels to
// canonQ8_0's bits on every shape, row span, input count and row block
// (down to one panel block and below a two-panel one), outputs outside the
// span untouched.
func checkQ8_0Kernels(t *testing.T, r *rand.Rand, rowMajor, panel actKernel) {
	t.Helper()
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	colsList := []int{32, 64, 96, 160, 288, 768, 2048}
	ns := []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 17, 33}
	if testing.Short() {
		colsList, ns = []int{32, 96, 768}, []int{1, 3, 4, 8, 13}
	}
	for _, cols := range colsList {
		for _, rows := range []int{1, 2, 3, 5, 9, 16, 17, 33, 48, 50} {
			w := randomQ8_0(r, rows, cols)
			pw, err := Repack(Weight{DType: tensor.Q8_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
			if err != nil {
				t.Fatal(err)
			}
			for _, blk := range []int{256 << 10, 3 * cols / tile * q8Blk, PanelRows * cols / tile * q8Blk, 2 * PanelRows * cols / tile * q8Blk} {
				rowBlockBytes = blk
				for _, n := range ns {
					if cols >= 768 && n > 9 && rows > 17 {
						continue
					}
					xq := q8Acts(r, n, cols)
					checkSpans(t, canonQ8_0, rowMajor, panel, w, pw, PanelQ8_0, xq, n, rows, cols, blk)
				}
			}
		}
	}
}

// checkSpans holds rowMajor over the row-major weight w and, when pw is
// in layout panel, panelK over pw to canon's bits on rows [lo,hi) for a
// few spans (whole, upper half, all but the ends; for panels: whole, from
// the second panel, the first panel alone), every output outside the span
// left untouched.
func checkSpans(t *testing.T, canon, rowMajor, panelK actKernel, w []byte, pw Weight, panel Layout, xq *actQ8, n, rows, cols, blk int) {
	t.Helper()
	check := func(what string, k actKernel, data []byte, lo, hi int) {
		t.Helper()
		want := make([]float32, n*rows)
		got := make([]float32, n*rows)
		for i := range got {
			got[i], want[i] = -7, -7 // guard: untouched outside [lo,hi)
		}
		canon(want, w, xq, n, rows, cols, lo, hi)
		k(got, data, xq, n, rows, cols, lo, hi)
		for i := range want {
			if !sameQ8Bits(want[i], got[i]) {
				t.Fatalf("%s %d×%d n=%d rows [%d,%d) block %d: out[%d] (input %d row %d) = %v, want %v",
					what, rows, cols, n, lo, hi, blk, i, i/rows, i%rows, got[i], want[i])
			}
		}
	}
	for _, s := range [][2]int{{0, rows}, {rows / 2, rows}, {1, max(1, rows-1)}} {
		if s[0] < s[1] {
			check("row-major", rowMajor, w, s[0], s[1])
		}
	}
	if pw.Layout != panel {
		return
	}
	pspans := [][2]int{{0, rows}}
	if rows > 16 {
		pspans = append(pspans, [2]int{16, rows}, [2]int{0, 16})
	}
	for _, s := range pspans {
		check("panel", panelK, pw.Data, s[0], s[1])
	}
}

// TestRepack checks the panel layout round-trips every row, leaves the
// rows after the last panel in place, and refuses what it cannot lay out.
func TestRepack(t *testing.T) {
	defer setISA(isaCap)
	setISA(isaAVX2) // a set with Q4_0 panels, where the CPU has it
	r := rand.New(rand.NewPCG(7, 8))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, rows := range []int{1, 15, 16, 17, 31, 32, 50} {
			for _, cols := range []int{32, 96, 768} {
				w := randomQ8_0(r, rows, cols)
				if dt == tensor.Q4_0 {
					w = q4VNNIWeight(r, rows, cols, true, true)
				}
				pw, err := Repack(Weight{DType: dt, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
				if err != nil {
					t.Fatal(err)
				}
				if want := Repackable(dt, rows, cols); (pw.Layout == panelLayout(dt)) != want {
					t.Fatalf("%v %d×%d: layout %v, want panels %v", dt, rows, cols, pw.Layout, want)
				}
				rb := cols / tile * dt.BlockBytes()
				buf := make([]byte, rb)
				row := make([]float32, cols)
				want := make([]float32, cols)
				for k := 0; k < rows; k++ {
					if got := RowBytes(buf, pw, k); string(got) != string(w[k*rb:(k+1)*rb]) {
						t.Fatalf("%d×%d: row %d differs after Repack", rows, cols, k)
					}
					DecodeRow(row, pw, k)
					tensor.DequantizeRow(want, w[k*rb:], dt, cols)
					for j := range row {
						if !sameQ8Bits(row[j], want[j]) {
							t.Fatalf("%d×%d: DecodeRow row %d [%d] = %v, want %v", rows, cols, k, j, row[j], want[j])
						}
					}
				}
				if full := rows / PanelRows * PanelRows; string(pw.Data[full*rb:]) != string(w[full*rb:]) {
					t.Fatalf("%d×%d: tail rows moved", rows, cols)
				}
				if pw.Layout != RowMajor && string(pw.Data) == string(w) {
					t.Fatalf("%d×%d: Repack changed nothing", rows, cols)
				}
				again, err := Repack(pw)
				if err != nil || string(again.Data) != string(pw.Data) {
					t.Fatalf("%d×%d: repacking a panel weight changed it (err %v)", rows, cols, err)
				}
			}
		}
	}
	if cpuAVX2 && !Repackable(tensor.Q4_0, 16, 32) {
		t.Error("Q4_0 not repackable under the avx2 set")
	}
	setISA(isaGeneric)
	if Repackable(tensor.Q4_0, 16, 32) || !Repackable(tensor.Q8_0, 16, 32) {
		t.Error("generic set: Q4_0 must not be repacked (no panel kernel), Q8_0 always is")
	}
	bad4 := Weight{DType: tensor.Q4_0, Data: make([]byte, 18*16), Rows: 16, Cols: 32, Layout: PanelQ8_0}
	if err := bad4.Validate(); err == nil {
		t.Fatal("Validate accepted a Q4_0 weight in the Q8_0 panel layout")
	}
	f32 := Weight{DType: tensor.F32, Data: make([]byte, 4*32*32), Rows: 32, Cols: 32}
	if got, err := Repack(f32); err != nil || got.Layout != RowMajor {
		t.Fatalf("F32: layout %v, err %v: want row-major, no error", got.Layout, err)
	}
	if _, err := Repack(Weight{DType: tensor.Q8_0, Data: make([]byte, 10), Rows: 16, Cols: 32}); err == nil {
		t.Fatal("Repack of a short weight: no error")
	}
	bad := Weight{DType: tensor.F32, Data: make([]byte, 4*32*32), Rows: 32, Cols: 32, Layout: PanelQ8_0}
	if err := bad.Validate(); err == nil {
		t.Fatal("Validate accepted an F32 weight in panel layout")
	}
}

// TestPanelFallback checks that every kernel set the CPU has gives a panel
// weight (PanelQ8_0, PanelQ4_0) exactly the bits it gives the row-major
// one, through MatMul on one and two threads: the sets without a panel
// kernel for the type by un-interleaving, the others by their panel kernel.
func TestPanelFallback(t *testing.T) {
	defer setISA(isaCap)
	defer func(v int) { parallelMinMACs = v }(parallelMinMACs)
	parallelMinMACs = 1
	r := rand.New(rand.NewPCG(9, 10))
	type pair struct{ rw, pw Weight }
	var ws []pair
	setISA(isaAVX2) // Q4_0 panels are made only where a set has their kernel
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, rows := range []int{16, 40} {
			cols := 96
			data := randomQ8_0(r, rows, cols)
			if dt == tensor.Q4_0 {
				data = q4VNNIWeight(r, rows, cols, true, false)
			}
			rw := Weight{DType: dt, Data: data, Rows: rows, Cols: cols}
			pw, err := Repack(Weight{DType: dt, Data: append([]byte(nil), data...), Rows: rows, Cols: cols})
			if err != nil {
				t.Fatal(err)
			}
			if cpuAVX2 && pw.Layout == RowMajor {
				t.Fatalf("%v %d rows: not repacked under the avx2 set", dt, rows)
			}
			ws = append(ws, pair{rw, pw})
		}
	}
	for _, c := range []isaLevel{isaGeneric, isaAVX2, isaAVX512} {
		setISA(c)
		for _, p := range ws {
			rows, cols := p.rw.Rows, p.rw.Cols
			for _, n := range []int{1, 4, 5, 9} {
				x := make([]float32, n*cols)
				for j := range x {
					x[j] = float32(r.NormFloat64())
				}
				want := make([]float32, n*rows)
				got := make([]float32, n*rows)
				for _, threads := range []int{1, 2} {
					pool := NewPool(threads)
					MatMul(pool, want, p.rw, x, n)
					MatMul(pool, got, p.pw, x, n)
					pool.Close()
					for i := range want {
						if !sameQ8Bits(want[i], got[i]) {
							t.Fatalf("%s %v %v %d rows n=%d threads %d: out[%d] = %v panel, %v row-major", Impl(), p.rw.DType, p.pw.Layout, rows, n, threads, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

func BenchmarkQ8_0Kernels(b *testing.B) {
	if !cpuVNNI {
		b.Skip("CPU lacks AVX-512 VNNI")
	}
	defer func(v bool) { q8Major = v }(q8Major)
	q8Major = true
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, cols, n int }{
		{32768, 2048, 1}, // 71 MB: from DRAM, past the L3
		{5632, 2048, 1}, {2048, 2048, 1}, {768, 768, 1},
		{2048, 768, 1}, {2048, 768, 8}, {2048, 768, 32}, {768, 2048, 32},
		{2048, 2048, 16}, {2048, 2048, 128},
	} {
		w := randomQ8_0(r, c.rows, c.cols)
		for b := 0; b < len(w); b += q8Blk {
			w[b], w[b+1] = 0x00, 0x24
		}
		pw, err := Repack(Weight{DType: tensor.Q8_0, Data: append([]byte(nil), w...), Rows: c.rows, Cols: c.cols})
		if err != nil {
			b.Fatal(err)
		}
		x := make([]float32, c.n*c.cols)
		for j := range x {
			x[j] = float32(r.NormFloat64())
		}
		var xq actQ8
		xq.quantize(x, c.n, c.cols, tensor.Q8_0)
		dst := make([]float32, c.n*c.rows)
		for _, k := range []struct {
			name string
			f    actKernel
			w    []byte
		}{{"avx2", matQ8_0AVX2, w}, {"avx2-panel", matQ8_0AVX2Panel, pw.Data}, {"vnni", matQ8_0VNNI, w}, {"panel", matQ8_0VNNIPanel, pw.Data}} {
			b.Run(fmt.Sprintf("%s/%dx%d/n=%d", k.name, c.rows, c.cols, c.n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.f(dst, k.w, &xq, c.n, c.rows, c.cols, 0, c.rows)
				}
				b.ReportMetric(float64(c.rows)*float64(c.cols)*float64(c.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// TestVNNIDispatch checks an AVX-512 VNNI machine runs the assembly kernels.
func TestVNNIDispatch(t *testing.T) {
	if !cpuVNNI {
		t.Skip("CPU lacks AVX-512 VNNI")
	}
	defer setISA(isaCap)
	setISA(isaAVX512)
	if fmt.Sprintf("%p", matQ8_0ActImpl) != fmt.Sprintf("%p", actKernel(matQ8_0VNNI)) {
		t.Error("matQ8_0ActImpl is not matQ8_0VNNI on a VNNI CPU")
	}
	if fmt.Sprintf("%p", matQ8_0PanelImpl) != fmt.Sprintf("%p", actKernel(matQ8_0VNNIPanel)) || !Panels(tensor.Q8_0) || !q8Major {
		t.Error("the panel kernel is not installed on a VNNI CPU")
	}
	if fmt.Sprintf("%p", matQ4_0ActImpl) != fmt.Sprintf("%p", actKernel(matQ4_0VNNI)) {
		t.Error("matQ4_0ActImpl is not matQ4_0VNNI on a VNNI CPU")
	}
	if fmt.Sprintf("%p", matQ4_0PanelImpl) != fmt.Sprintf("%p", actKernel(matQ4_0VNNIPanel)) || !Panels(tensor.Q4_0) || !q4Major {
		t.Error("the Q4_0 panel kernel is not installed on a VNNI CPU")
	}
	for name, k := range map[string]matKernel{"F32": matF32Impl, "F16": matF16Impl, "BF16": matBF16Impl} {
		want := map[string]matKernel{"F32": matF32Asm, "F16": matF16Asm, "BF16": matBF16Asm}[name]
		if fmt.Sprintf("%p", k) != fmt.Sprintf("%p", want) {
			t.Errorf("%s kernel is not the assembly one on an AVX-512 CPU", name)
		}
	}
	setISA(isaAVX2)
	if fmt.Sprintf("%p", matQ8_0PanelImpl) != fmt.Sprintf("%p", actKernel(matQ8_0AVX2Panel)) || !Panels(tensor.Q8_0) || !q8Major {
		t.Error("the avx2 set lacks its panel kernel")
	}
}
