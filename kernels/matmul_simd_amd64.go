//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math"

	"simd/archsimd"
)

// The archsimd matrix kernels. Each output element is one dot product whose
// operation order depends only on cols (and the kernel set chosen at init),
// never on n, on which weight rows share a pass, or on the thread split:
//
//   - F32/F16/BF16: one vector accumulator of W lanes per (row, input) pair,
//     acc = fma(w[j:j+W], x[j:j+W], acc) for j = 0, W, 2W, …; a short last chunk
//     is loaded zero-padded; then the lanes are summed by halving (fixed tree).
//     Passes over 4 weight rows interleave four such independent chains, which
//     is where the speed comes from; the single-row tail runs the same chain.
//     F32 with n ≥ 4 goes by tiles of 2 rows × 4 inputs (eight chains, each
//     weight vector loaded once for four inputs), inputs n%4 by the 4-row
//     pass, over blocks of rows that stay in L2 (rowBlock).
//   - Q8_0/Q4_0: activations quantized once per call (actQ8), exact integer
//     block dots scaled into float32 lanes: matq_simd_amd64.go.
//
// Weight rows in a pass are reused from L1/L2 for all n inputs, so a batch
// streams each weight byte from memory once.

// hsum8 sums v's lanes as ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)), a fixed order.
func hsum8(v archsimd.Float32x8) float32 {
	var a [4]float32
	v.GetLo().Add(v.GetHi()).Store(&a)
	return (a[0] + a[2]) + (a[1] + a[3])
}

// hsum16 sums v's lanes by halving, a fixed order.
func hsum16(v archsimd.Float32x16) float32 {
	return hsum8(v.GetLo().Add(v.GetHi()))
}

// Partial (tail) loads and stores go through a zeroed stack array rather than
// archsimd's Load…SlicePart: those convert the slice to a full-vector array
// pointer for a masked load, which -race's checkptr rejects when the slice
// ends near the end of its allocation ("converted pointer straddles multiple
// allocations"). A tail is at most 15 elements, once per dot.

func loadPart16(s []float32) archsimd.Float32x16 {
	var b [16]float32
	copy(b[:], s)
	return archsimd.LoadFloat32x16(&b)
}

func loadPart8(s []float32) archsimd.Float32x8 {
	var b [8]float32
	copy(b[:], s)
	return archsimd.LoadFloat32x8(&b)
}

func loadPartU16x16(s []uint16) archsimd.Uint16x16 {
	var b [16]uint16
	copy(b[:], s)
	return archsimd.LoadUint16x16(&b)
}

func loadPartU16x8(s []uint16) archsimd.Uint16x8 {
	var b [8]uint16
	copy(b[:], s)
	return archsimd.LoadUint16x8(&b)
}

func storePart16(v archsimd.Float32x16, s []float32) {
	var b [16]float32
	v.Store(&b)
	copy(s, b[:])
}

func storePart8(v archsimd.Float32x8, s []float32) {
	var b [8]float32
	v.Store(&b)
	copy(s, b[:])
}

// ---- F32 ----

func matF32AVX512(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matF32Lanes(dst, w, x, n, rows, cols, lo, hi, dotF32x16, dot2x4F32x16, dot4F32x16)
}

func matF32AVX2(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matF32Lanes(dst, w, x, n, rows, cols, lo, hi, dotF32x8, dot2x4F32x8, dot4F32x8)
}

// matF32Lanes is the F32 kernel over one lane width's dot products: dot,
// dot2x4 (two rows by four inputs) and dot4 (four rows by one input), each
// output the same chain whichever computes it.
func matF32Lanes(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int,
	dot func(a, b []float32) float32,
	dot2x4 func(w0, w1, xs []float32) [8]float32,
	dot4 func(w0, w1, w2, w3, x []float32) (s0, s1, s2, s3 float32)) {
	wf, ok := f32View(w)
	if !ok { // unaligned or empty: never the case for mmap'd GGUF data
		matF32Generic(dst, w, x, n, rows, cols, lo, hi)
		return
	}
	step := max(group, rowBlock(4*cols)&^(group-1))
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			xs := x[i*cols : (i+4)*cols]
			for r := r0; r < r1; r += 2 {
				w0 := wf[r*cols : (r+1)*cols]
				w1 := w0 // a lone last row: the same chain twice
				if r+1 < r1 {
					w1 = wf[(r+1)*cols : (r+2)*cols]
				}
				s := dot2x4(w0, w1, xs)
				for k := range 4 {
					dst[(i+k)*rows+r] = s[k]
					if r+1 < r1 {
						dst[(i+k)*rows+r+1] = s[4+k]
					}
				}
			}
		}
		for ; i < n; i++ {
			xi := x[i*cols : (i+1)*cols]
			r := r0
			for ; r+group <= r1; r += group {
				w0, w1 := wf[r*cols:(r+1)*cols], wf[(r+1)*cols:(r+2)*cols]
				w2, w3 := wf[(r+2)*cols:(r+3)*cols], wf[(r+3)*cols:(r+4)*cols]
				s0, s1, s2, s3 := dot4(w0, w1, w2, w3, xi)
				o := dst[i*rows+r : i*rows+r+group]
				o[0], o[1], o[2], o[3] = s0, s1, s2, s3
			}
			for ; r < r1; r++ {
				dst[i*rows+r] = dot(wf[r*cols:(r+1)*cols], xi)
			}
		}
	}
}

// dot2x4F32x16 is dotF32x16 of rows w0, w1 with the four inputs packed in xs
// (4·len(w0) values): eight chains, each the same as dotF32x16's, each weight
// vector loaded once for four inputs. Returns w0·x0..w0·x3, w1·x0..w1·x3.
func dot2x4F32x16(w0, w1, xs []float32) [8]float32 {
	m := len(w0)
	w1 = w1[:m]
	x0, x1, x2, x3 := xs[:m], xs[m:2*m], xs[2*m:3*m], xs[3*m:4*m]
	a0 := archsimd.BroadcastFloat32x16(0)
	a1, a2, a3, c0, c1, c2, c3 := a0, a0, a0, a0, a0, a0, a0
	j := 0
	for ; j+16 <= m; j += 16 {
		f0 := archsimd.LoadFloat32x16Slice(w0[j : j+16])
		f1 := archsimd.LoadFloat32x16Slice(w1[j : j+16])
		xv := archsimd.LoadFloat32x16Slice(x0[j : j+16])
		a0, c0 = f0.MulAdd(xv, a0), f1.MulAdd(xv, c0)
		xv = archsimd.LoadFloat32x16Slice(x1[j : j+16])
		a1, c1 = f0.MulAdd(xv, a1), f1.MulAdd(xv, c1)
		xv = archsimd.LoadFloat32x16Slice(x2[j : j+16])
		a2, c2 = f0.MulAdd(xv, a2), f1.MulAdd(xv, c2)
		xv = archsimd.LoadFloat32x16Slice(x3[j : j+16])
		a3, c3 = f0.MulAdd(xv, a3), f1.MulAdd(xv, c3)
	}
	if j < m {
		f0, f1 := loadPart16(w0[j:]), loadPart16(w1[j:])
		xv := loadPart16(x0[j:])
		a0, c0 = f0.MulAdd(xv, a0), f1.MulAdd(xv, c0)
		xv = loadPart16(x1[j:])
		a1, c1 = f0.MulAdd(xv, a1), f1.MulAdd(xv, c1)
		xv = loadPart16(x2[j:])
		a2, c2 = f0.MulAdd(xv, a2), f1.MulAdd(xv, c2)
		xv = loadPart16(x3[j:])
		a3, c3 = f0.MulAdd(xv, a3), f1.MulAdd(xv, c3)
	}
	return [8]float32{hsum16(a0), hsum16(a1), hsum16(a2), hsum16(a3), hsum16(c0), hsum16(c1), hsum16(c2), hsum16(c3)}
}

func dotF32x16(a, b []float32) float32 {
	b = b[:len(a)]
	acc := archsimd.BroadcastFloat32x16(0)
	j := 0
	for ; j+16 <= len(a); j += 16 {
		acc = archsimd.LoadFloat32x16Slice(a[j:j+16]).MulAdd(archsimd.LoadFloat32x16Slice(b[j:j+16]), acc)
	}
	if j < len(a) {
		acc = loadPart16(a[j:]).MulAdd(loadPart16(b[j:]), acc)
	}
	return hsum16(acc)
}

// dot4F32x16 is dotF32x16 of w0..w3 with x, as four interleaved chains.
func dot4F32x16(w0, w1, w2, w3, x []float32) (s0, s1, s2, s3 float32) {
	m := len(x)
	w0, w1, w2, w3 = w0[:m], w1[:m], w2[:m], w3[:m]
	a0 := archsimd.BroadcastFloat32x16(0)
	a1, a2, a3 := a0, a0, a0
	j := 0
	for ; j+16 <= m; j += 16 {
		xv := archsimd.LoadFloat32x16Slice(x[j : j+16])
		a0 = archsimd.LoadFloat32x16Slice(w0[j:j+16]).MulAdd(xv, a0)
		a1 = archsimd.LoadFloat32x16Slice(w1[j:j+16]).MulAdd(xv, a1)
		a2 = archsimd.LoadFloat32x16Slice(w2[j:j+16]).MulAdd(xv, a2)
		a3 = archsimd.LoadFloat32x16Slice(w3[j:j+16]).MulAdd(xv, a3)
	}
	if j < m {
		xv := loadPart16(x[j:])
		a0 = loadPart16(w0[j:]).MulAdd(xv, a0)
		a1 = loadPart16(w1[j:]).MulAdd(xv, a1)
		a2 = loadPart16(w2[j:]).MulAdd(xv, a2)
		a3 = loadPart16(w3[j:]).MulAdd(xv, a3)
	}
	return hsum16(a0), hsum16(a1), hsum16(a2), hsum16(a3)
}

// dot2x4F32x8 is dotF32x8 of rows w0, w1 with the four inputs packed in xs
// (4·len(w0) values): eight chains, each the same as dotF32x8's, each weight
// vector loaded once for four inputs. Returns w0·x0..w0·x3, w1·x0..w1·x3.
func dot2x4F32x8(w0, w1, xs []float32) [8]float32 {
	m := len(w0)
	w1 = w1[:m]
	x0, x1, x2, x3 := xs[:m], xs[m:2*m], xs[2*m:3*m], xs[3*m:4*m]
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3, c0, c1, c2, c3 := a0, a0, a0, a0, a0, a0, a0
	j := 0
	for ; j+8 <= m; j += 8 {
		f0 := archsimd.LoadFloat32x8Slice(w0[j : j+8])
		f1 := archsimd.LoadFloat32x8Slice(w1[j : j+8])
		xv := archsimd.LoadFloat32x8Slice(x0[j : j+8])
		a0, c0 = f0.MulAdd(xv, a0), f1.MulAdd(xv, c0)
		xv = archsimd.LoadFloat32x8Slice(x1[j : j+8])
		a1, c1 = f0.MulAdd(xv, a1), f1.MulAdd(xv, c1)
		xv = archsimd.LoadFloat32x8Slice(x2[j : j+8])
		a2, c2 = f0.MulAdd(xv, a2), f1.MulAdd(xv, c2)
		xv = archsimd.LoadFloat32x8Slice(x3[j : j+8])
		a3, c3 = f0.MulAdd(xv, a3), f1.MulAdd(xv, c3)
	}
	if j < m {
		f0, f1 := loadPart8(w0[j:]), loadPart8(w1[j:])
		xv := loadPart8(x0[j:])
		a0, c0 = f0.MulAdd(xv, a0), f1.MulAdd(xv, c0)
		xv = loadPart8(x1[j:])
		a1, c1 = f0.MulAdd(xv, a1), f1.MulAdd(xv, c1)
		xv = loadPart8(x2[j:])
		a2, c2 = f0.MulAdd(xv, a2), f1.MulAdd(xv, c2)
		xv = loadPart8(x3[j:])
		a3, c3 = f0.MulAdd(xv, a3), f1.MulAdd(xv, c3)
	}
	return [8]float32{hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3), hsum8(c0), hsum8(c1), hsum8(c2), hsum8(c3)}
}

func dotF32x8(a, b []float32) float32 {
	b = b[:len(a)]
	acc := archsimd.BroadcastFloat32x8(0)
	j := 0
	for ; j+8 <= len(a); j += 8 {
		acc = archsimd.LoadFloat32x8Slice(a[j:j+8]).MulAdd(archsimd.LoadFloat32x8Slice(b[j:j+8]), acc)
	}
	if j < len(a) {
		acc = loadPart8(a[j:]).MulAdd(loadPart8(b[j:]), acc)
	}
	return hsum8(acc)
}

func dot4F32x8(w0, w1, w2, w3, x []float32) (s0, s1, s2, s3 float32) {
	m := len(x)
	w0, w1, w2, w3 = w0[:m], w1[:m], w2[:m], w3[:m]
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3 := a0, a0, a0
	j := 0
	for ; j+8 <= m; j += 8 {
		xv := archsimd.LoadFloat32x8Slice(x[j : j+8])
		a0 = archsimd.LoadFloat32x8Slice(w0[j:j+8]).MulAdd(xv, a0)
		a1 = archsimd.LoadFloat32x8Slice(w1[j:j+8]).MulAdd(xv, a1)
		a2 = archsimd.LoadFloat32x8Slice(w2[j:j+8]).MulAdd(xv, a2)
		a3 = archsimd.LoadFloat32x8Slice(w3[j:j+8]).MulAdd(xv, a3)
	}
	if j < m {
		xv := loadPart8(x[j:])
		a0 = loadPart8(w0[j:]).MulAdd(xv, a0)
		a1 = loadPart8(w1[j:]).MulAdd(xv, a1)
		a2 = loadPart8(w2[j:]).MulAdd(xv, a2)
		a3 = loadPart8(w3[j:]).MulAdd(xv, a3)
	}
	return hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)
}

// ---- F16 / BF16: converted in registers, exactly (tensor.F16ToF32 values) ----

// halfKind selects the 16-bit float format of a row.
type halfKind uint8

const (
	halfF16 halfKind = iota
	halfBF16
)

// f16Magic is 2^112: (h&0x7fff)<<13 read as float32 and multiplied by it is
// the f16 value exactly, for normals and subnormals alike (the product of a
// float32 denormal by a power of two is exact when the result is normal).
var f16Magic = math.Float32frombits((127 + 112) << 23)

func halfToF32x16(u archsimd.Uint32x16, k halfKind) archsimd.Float32x16 {
	if k == halfBF16 {
		return u.ShiftAllLeft(16).AsFloat32x16()
	}
	em := u.And(archsimd.BroadcastUint32x16(0x7fff))
	f := em.ShiftAllLeft(13).AsFloat32x16().Mul(archsimd.BroadcastFloat32x16(f16Magic))
	sign := u.And(archsimd.BroadcastUint32x16(0x8000)).ShiftAllLeft(16)
	// Exponent all ones (Inf/NaN): force the float32 exponent to all ones; the
	// scaled mantissa is already m<<13.
	special := em.AsInt32x16().Greater(archsimd.BroadcastInt32x16(0x7bff)).ToInt32x16().AsUint32x16().
		And(archsimd.BroadcastUint32x16(0x7f800000))
	return f.AsUint32x16().Or(sign).Or(special).AsFloat32x16()
}

func halfToF32x8(u archsimd.Uint32x8, k halfKind) archsimd.Float32x8 {
	if k == halfBF16 {
		return u.ShiftAllLeft(16).AsFloat32x8()
	}
	em := u.And(archsimd.BroadcastUint32x8(0x7fff))
	f := em.ShiftAllLeft(13).AsFloat32x8().Mul(archsimd.BroadcastFloat32x8(f16Magic))
	sign := u.And(archsimd.BroadcastUint32x8(0x8000)).ShiftAllLeft(16)
	special := em.AsInt32x8().Greater(archsimd.BroadcastInt32x8(0x7bff)).ToInt32x8().AsUint32x8().
		And(archsimd.BroadcastUint32x8(0x7f800000))
	return f.AsUint32x8().Or(sign).Or(special).AsFloat32x8()
}

func matF16AVX512(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matHalfAVX512(halfF16, dst, w, x, n, rows, cols, lo, hi)
}

func matBF16AVX512(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matHalfAVX512(halfBF16, dst, w, x, n, rows, cols, lo, hi)
}

func matF16AVX2(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matHalfAVX2(halfF16, dst, w, x, n, rows, cols, lo, hi)
}

func matBF16AVX2(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matHalfAVX2(halfBF16, dst, w, x, n, rows, cols, lo, hi)
}

func matHalfAVX512(k halfKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	wh, ok := u16View(w)
	if !ok {
		if k == halfF16 {
			matF16Generic(dst, w, x, n, rows, cols, lo, hi)
		} else {
			matBF16Generic(dst, w, x, n, rows, cols, lo, hi)
		}
		return
	}
	// Blocks of rows stay in L2 while every pair of inputs passes (rowBlock);
	// within a block, 2×2 tiles; a lone row passes itself twice (same chain).
	step := max(2, rowBlock(2*cols)&^1)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+2 <= n; i += 2 {
			x0, x1 := x[i*cols:(i+1)*cols], x[(i+1)*cols:(i+2)*cols]
			for r := r0; r < r1; r += 2 {
				w0 := wh[r*cols : (r+1)*cols]
				w1 := w0
				if r+1 < r1 {
					w1 = wh[(r+1)*cols : (r+2)*cols]
				}
				s := dot2x2HalfX16(k, w0, w1, x0, x1)
				dst[i*rows+r], dst[(i+1)*rows+r] = s[0], s[2]
				if r+1 < r1 {
					dst[i*rows+r+1], dst[(i+1)*rows+r+1] = s[1], s[3]
				}
			}
		}
		if i < n {
			xi := x[i*cols : (i+1)*cols]
			for r := r0; r < r1; r += 2 {
				w0 := wh[r*cols : (r+1)*cols]
				w1 := w0
				if r+1 < r1 {
					w1 = wh[(r+1)*cols : (r+2)*cols]
				}
				s0, s1 := dot2HalfX16(k, w0, w1, xi)
				dst[i*rows+r] = s0
				if r+1 < r1 {
					dst[i*rows+r+1] = s1
				}
			}
		}
	}
}

// dot2HalfX16 is the 16-lane dot of two 16-bit-float weight rows with x (the
// single-row tail passes the same row twice: same chain, same bits).
func dot2HalfX16(k halfKind, w0, w1 []uint16, x []float32) (s0, s1 float32) {
	m := len(x)
	w0, w1 = w0[:m], w1[:m]
	a0 := archsimd.BroadcastFloat32x16(0)
	a1 := a0
	j := 0
	for ; j+16 <= m; j += 16 {
		xv := archsimd.LoadFloat32x16Slice(x[j : j+16])
		a0 = halfToF32x16(archsimd.LoadUint16x16Slice(w0[j:j+16]).ExtendToUint32(), k).MulAdd(xv, a0)
		a1 = halfToF32x16(archsimd.LoadUint16x16Slice(w1[j:j+16]).ExtendToUint32(), k).MulAdd(xv, a1)
	}
	if j < m {
		xv := loadPart16(x[j:])
		a0 = halfToF32x16(loadPartU16x16(w0[j:]).ExtendToUint32(), k).MulAdd(xv, a0)
		a1 = halfToF32x16(loadPartU16x16(w1[j:]).ExtendToUint32(), k).MulAdd(xv, a1)
	}
	return hsum16(a0), hsum16(a1)
}

// dot2x2HalfX16 is dot2HalfX16 of rows w0, w1 with inputs x and y: four
// chains, each identical to its dot2HalfX16 chain, converting each weight
// vector once for both inputs (prefill, draft trees). Returns w0·x, w1·x,
// w0·y, w1·y.
func dot2x2HalfX16(k halfKind, w0, w1 []uint16, x, y []float32) [4]float32 {
	m := len(x)
	w0, w1, y = w0[:m], w1[:m], y[:m]
	a0 := archsimd.BroadcastFloat32x16(0)
	a1, c0, c1 := a0, a0, a0
	j := 0
	for ; j+16 <= m; j += 16 {
		xv := archsimd.LoadFloat32x16Slice(x[j : j+16])
		yv := archsimd.LoadFloat32x16Slice(y[j : j+16])
		f0 := halfToF32x16(archsimd.LoadUint16x16Slice(w0[j:j+16]).ExtendToUint32(), k)
		f1 := halfToF32x16(archsimd.LoadUint16x16Slice(w1[j:j+16]).ExtendToUint32(), k)
		a0 = f0.MulAdd(xv, a0)
		a1 = f1.MulAdd(xv, a1)
		c0 = f0.MulAdd(yv, c0)
		c1 = f1.MulAdd(yv, c1)
	}
	if j < m {
		xv, yv := loadPart16(x[j:]), loadPart16(y[j:])
		f0 := halfToF32x16(loadPartU16x16(w0[j:]).ExtendToUint32(), k)
		f1 := halfToF32x16(loadPartU16x16(w1[j:]).ExtendToUint32(), k)
		a0 = f0.MulAdd(xv, a0)
		a1 = f1.MulAdd(xv, a1)
		c0 = f0.MulAdd(yv, c0)
		c1 = f1.MulAdd(yv, c1)
	}
	return [4]float32{hsum16(a0), hsum16(a1), hsum16(c0), hsum16(c1)}
}

func matHalfAVX2(k halfKind, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	wh, ok := u16View(w)
	if !ok {
		if k == halfF16 {
			matF16Generic(dst, w, x, n, rows, cols, lo, hi)
		} else {
			matBF16Generic(dst, w, x, n, rows, cols, lo, hi)
		}
		return
	}
	r := lo
	for ; r+2 <= hi; r += 2 {
		w0, w1 := wh[r*cols:(r+1)*cols], wh[(r+1)*cols:(r+2)*cols]
		for i := 0; i < n; i++ {
			s0, s1 := dot2HalfX8(k, w0, w1, x[i*cols:(i+1)*cols])
			dst[i*rows+r], dst[i*rows+r+1] = s0, s1
		}
	}
	for ; r < hi; r++ {
		wr := wh[r*cols : (r+1)*cols]
		for i := 0; i < n; i++ {
			dst[i*rows+r], _ = dot2HalfX8(k, wr, wr, x[i*cols:(i+1)*cols])
		}
	}
}

func dot2HalfX8(k halfKind, w0, w1 []uint16, x []float32) (s0, s1 float32) {
	m := len(x)
	w0, w1 = w0[:m], w1[:m]
	a0 := archsimd.BroadcastFloat32x8(0)
	a1 := a0
	j := 0
	for ; j+8 <= m; j += 8 {
		xv := archsimd.LoadFloat32x8Slice(x[j : j+8])
		a0 = halfToF32x8(archsimd.LoadUint16x8Slice(w0[j:j+8]).ExtendToUint32(), k).MulAdd(xv, a0)
		a1 = halfToF32x8(archsimd.LoadUint16x8Slice(w1[j:j+8]).ExtendToUint32(), k).MulAdd(xv, a1)
	}
	if j < m {
		xv := loadPart8(x[j:])
		a0 = halfToF32x8(loadPartU16x8(w0[j:]).ExtendToUint32(), k).MulAdd(xv, a0)
		a1 = halfToF32x8(loadPartU16x8(w1[j:]).ExtendToUint32(), k).MulAdd(xv, a1)
	}
	return hsum8(a0), hsum8(a1)
}

// ---- Q8_0 / Q4_0 over int8 activations ----
