//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// q4Scales are f16 block scales that stress the scale path: zeros, the
// smallest and largest subnormals, the largest finite, ±Inf (NaN in
// canonQ4_0 and the kernels, via quantScaleTable), quiet and signalling NaNs.
var q4Scales = []uint16{
	0x0000, 0x8000, // ±0
	0x0001, 0x03ff, 0x8001, 0x83ff, // subnormals
	0x7bff, 0xfbff, // ±65504
	0x7c00, 0xfc00, // ±Inf
	0x7e00, 0xfe00, 0x7c01, 0x7d55, 0xffff, // NaNs (quiet, signalling)
}

// q4VNNIWeight is a rows×cols Q4_0 weight: llama.cpp-quantized N(0,1) rows,
// with about one block in six given a special scale (q4Scales) when special,
// and every nibble pattern in the rest; random bytes when raw.
func q4VNNIWeight(r *rand.Rand, rows, cols int, special, raw bool) []byte {
	nb := cols / tile
	w := make([]byte, rows*nb*q4Blk)
	if raw {
		for i := range w {
			w[i] = byte(r.Uint32())
		}
		return w
	}
	row := make([]float32, cols)
	for i := range rows {
		for j := range row {
			row[j] = float32(r.NormFloat64())
		}
		tensor.QuantizeRowQ4_0(w[i*nb*q4Blk:(i+1)*nb*q4Blk], row)
	}
	if special {
		for b := 0; b < rows*nb; b++ {
			if r.IntN(6) == 0 {
				s := q4Scales[r.IntN(len(q4Scales))]
				w[b*q4Blk], w[b*q4Blk+1] = byte(s), byte(s>>8)
			}
		}
	}
	return w
}

// q4VNNIActs quantizes n random rows of cols values in the VNNI Q4_0
// kernel's pair layout: N(0,1) with, per block,
// a chance of all zeros, a huge scale (dw·dx overflows to Inf), a tiny one
// (subnormal dx), or a NaN/Inf value (dx = NaN) when special.
func q4VNNIActs(r *rand.Rand, n, cols int, special bool) *actQ8 {
	x := make([]float32, n*cols)
	for b := 0; b < n*cols/tile; b++ {
		blk := x[b*tile : (b+1)*tile]
		scale := float32(1)
		kind := r.IntN(12)
		if !special {
			kind = 11
		}
		switch kind {
		case 0:
			continue // zeros
		case 1:
			scale = 1e36
		case 2:
			scale = 1e-42
		}
		for j := range blk {
			blk[j] = float32(r.NormFloat64()) * scale
		}
		switch kind {
		case 3:
			blk[r.IntN(tile)] = float32(math.NaN())
		case 4:
			blk[r.IntN(tile)] = float32(math.Inf(-1))
		}
	}
	defer func(v bool) { q4Major = v }(q4Major)
	q4Major = false // the VNNI kernel's pair layout, whatever set is installed
	a := new(actQ8)
	a.quantize(x, n, cols, tensor.Q4_0)
	return a
}

// canonQ4_0 is the AVX2 set's Q4_0 order in plain Go (see
// matq4_avx2_amd64.go), from row-major weights and the row-major q and d
// of xq: the oracle both assembly layouts must equal bit for bit.
func canonQ4_0(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	rb := nb * q4Blk
	sc := quantScaleTable()
	for r := lo; r < hi; r++ {
		for i := 0; i < n; i++ {
			var acc float32
			for b := 0; b < nb; b++ {
				blk := w[r*rb+b*q4Blk:]
				var s int32
				for j := 0; j < tile/2; j++ {
					s += (int32(blk[2+j]&15) - 8) * int32(xq.q[i*cols+b*tile+j])
					s += (int32(blk[2+j]>>4) - 8) * int32(xq.q[i*cols+b*tile+j+tile/2])
				}
				dw := sc[binary.LittleEndian.Uint16(blk)]
				acc = fma32(float32(s), dw*xq.d[i*nb+b], acc)
			}
			dst[i*rows+r] = acc
		}
	}
}

// q4MajorActs is q4VNNIActs requantized into the AVX2 set's Q4_0 layout
// (block-major, q4Major).
func q4MajorActs(r *rand.Rand, n, cols int, special bool) *actQ8 {
	defer func(v bool) { q4Major = v }(q4Major)
	q4Major = true
	xq := q4VNNIActs(r, n, cols, special)
	xq.prepare(n, cols, tensor.Q4_0)
	xq.major(cols/tile, 0, n, true)
	return xq
}

// TestMatQ4_0AVX2 checks the AVX2 Q4_0 kernels over both layouts give
// exactly canonQ4_0's bits (checkQ4_0Kernels).
func TestMatQ4_0AVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 Q4_0 kernels: CPU lacks AVX2+FMA+F16C")
	}
	defer setISA(isaCap)
	setISA(isaAVX2) // Repackable(Q4_0) needs a set with the panel kernel
	checkQ4_0Kernels(t, rand.New(rand.NewPCG(15, 16)), matQ4_0AVX2, matQ4_0AVX2Panel)
}

// TestMatQ4_0VNNI checks the VNNI set's Q4_0 kernels over both layouts
// give exactly canonQ4_0's bits, as the AVX2 ones do (checkQ4_0Kernels).
func TestMatQ4_0VNNI(t *testing.T) {
	if !cpuVNNI {
		t.Skip("SKIP avx512-vnni Q4_0 kernels: CPU lacks AVX-512 VNNI")
	}
	defer setISA(isaCap)
	setISA(isaAVX512)
	checkQ4_0Kernels(t, rand.New(rand.NewPCG(17, 18)), matQ4_0VNNI, matQ4_0VNNIPanel)
}

// checkQ4_0Kernels holds a set's row-major and panel Q4_0 kernels to
// canonQ4_0's bits on every shape, sub-range, tile remainder and input
// count, including zero, subnormal, infinite and NaN scales, every nibble
// pattern, NaN/Inf and extreme activations, and row blocks of one panel
// block and below a two-panel one. The installed set must have a Q4_0
// panel kernel (Repack lays out only then).
func checkQ4_0Kernels(t *testing.T, r *rand.Rand, rowMajor, panel actKernel) {
	t.Helper()
	defer func(v int) { rowBlockBytes = v }(rowBlockBytes)
	colsList := []int{32, 64, 96, 160, 288, 768, 2048}
	ns := []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 17, 33}
	if testing.Short() {
		colsList, ns = []int{32, 96, 768}, []int{1, 3, 4, 8, 13}
	}
	for _, cols := range colsList {
		for _, rows := range []int{1, 2, 3, 5, 9, 16, 17, 33, 48, 50} {
			special := (rows+cols/32)%2 == 0
			w := q4VNNIWeight(r, rows, cols, special, rows%3 == 2)
			pw, err := Repack(Weight{DType: tensor.Q4_0, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
			if err != nil {
				t.Fatal(err)
			}
			if (pw.Layout == PanelQ4_0) != (rows >= PanelRows) {
				t.Fatalf("%d×%d: layout %v after Repack", rows, cols, pw.Layout)
			}
			rb := cols / tile * q4Blk
			for _, blk := range []int{256 << 10, 3 * rb, PanelRows * rb, 2 * PanelRows * rb} {
				rowBlockBytes = blk
				for _, n := range ns {
					if cols >= 768 && n > 9 && rows > 17 {
						continue
					}
					xq := q4MajorActs(r, n, cols, special)
					checkSpans(t, canonQ4_0, rowMajor, panel, w, pw, PanelQ4_0, xq, n, rows, cols, blk)
				}
			}
		}
	}
}

// BenchmarkQ4_0Kernels runs the Q4_0 kernels one thread on the 110m and 1B
// shapes, decode and prefill, in G multiply-adds per second: the AVX2 and
// VNNI ones over both layouts.
func BenchmarkQ4_0Kernels(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("CPU lacks AVX2+FMA+F16C")
	}
	defer setISA(isaCap)
	setISA(isaAVX2)
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, cols, n int }{
		{32768, 2048, 1}, // 38 MB: from DRAM, past the L3
		{768, 768, 1}, {2048, 768, 1}, {768, 2048, 1},
		{768, 768, 8}, {2048, 768, 8}, {768, 2048, 8},
		{768, 768, 128}, {2048, 768, 128}, {768, 2048, 128},
		{768, 768, 512}, {2048, 768, 512}, {768, 2048, 512},
	} {
		w := q4VNNIWeight(r, c.rows, c.cols, false, false)
		pw, err := Repack(Weight{DType: tensor.Q4_0, Data: append([]byte(nil), w...), Rows: c.rows, Cols: c.cols})
		if err != nil {
			b.Fatal(err)
		}
		major := q4MajorActs(r, c.n, c.cols, false)
		dst := make([]float32, c.n*c.rows)
		type kern struct {
			name string
			f    actKernel
			w    []byte
			xq   *actQ8
		}
		ks := []kern{{"avx2", matQ4_0AVX2, w, major}, {"avx2-panel", matQ4_0AVX2Panel, pw.Data, major}}
		if cpuVNNI {
			ks = append(ks, kern{"vnni", matQ4_0VNNI, w, major}, kern{"vnni-panel", matQ4_0VNNIPanel, pw.Data, major})
		}
		for _, k := range ks {
			b.Run(fmt.Sprintf("%s/%dx%d/n=%d", k.name, c.rows, c.cols, c.n), func(b *testing.B) {
				b.SetBytes(int64(len(w)))
				for b.Loop() {
					k.f(dst, k.w, k.xq, c.n, c.rows, c.cols, 0, c.rows)
				}
				b.ReportMetric(float64(c.rows)*float64(c.cols)*float64(c.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// BenchmarkQuantAVX2Prefill is one 128-token prompt through a 110M model's
// three matrix shapes with the AVX2 Q8_0 and Q4_0 panel kernels (as the ram
// tier runs them) and the row-major ones (the mmap tier: panels made in
// scratch per call), single-threaded, in G multiply-adds per second of the
// thread's CPU time (see threadCPU).
func BenchmarkQuantAVX2Prefill(b *testing.B) {
	if !cpuAVX2 {
		b.Skip("CPU lacks AVX2+FMA+F16C")
	}
	defer setISA(isaCap)
	setISA(isaAVX2)
	const n = 128
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0} {
		for _, shp := range [][2]int{{768, 768}, {2048, 768}, {768, 2048}} {
			rows, cols := shp[0], shp[1]
			r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
			w := randomQ8_0(r, rows, cols)
			k, pk := actKernel(matQ8_0AVX2), actKernel(matQ8_0AVX2Panel)
			if dt == tensor.Q4_0 {
				w = q4VNNIWeight(r, rows, cols, false, false)
				k, pk = matQ4_0AVX2, matQ4_0AVX2Panel
			}
			pw, err := Repack(Weight{DType: dt, Data: append([]byte(nil), w...), Rows: rows, Cols: cols})
			if err != nil {
				b.Fatal(err)
			}
			x := make([]float32, n*cols)
			for j := range x {
				x[j] = float32(r.NormFloat64())
			}
			var xq actQ8
			xq.quantize(x, n, cols, dt)
			dst := make([]float32, n*rows)
			for _, v := range []struct {
				name string
				k    actKernel
				w    []byte
			}{{"panel", pk, pw.Data}, {"row-major", k, w}} {
				b.Run(fmt.Sprintf("%v/%s/%dx%d/n=%d", dt, v.name, rows, cols, n), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					t0 := threadCPU()
					for b.Loop() {
						v.k(dst, v.w, &xq, n, rows, cols, 0, rows)
					}
					b.ReportMetric(n*float64(rows*cols)*float64(b.N)/(threadCPU()-t0).Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}
