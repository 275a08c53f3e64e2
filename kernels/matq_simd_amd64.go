//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"unsafe"

	"simd/archsimd"
)

// The Q8_0/Q4_0 kernels over int8 activations (actQ8), shared by the AVX2 and
// AVX-512 sets (they are 256-bit: AVX-512 has no 512-bit VPSIGNB, and the
// Zen 4 cores we measure on split 512-bit integer ops in two anyway). Per
// output element (weight row r, input i) the operation order is fixed by cols
// alone:
//
//	Q8_0: acc = 0 (8 float32 lanes)
//	      for each block b:  acc = fma(float32(L_b), dW(r,b)·dX(i,b), acc)
//	      L_b lane k = Σ_{j=4k..4k+3} qW_j·qX_j (exact int32)
//	Q4_0: the same over pairs of blocks (b, b+1): lanes 0–3 hold block b,
//	      4–7 block b+1, lane k of a block = Σ over values 4k..4k+3 and
//	      16+4k..16+4k+3 (the two nibbles of a byte land in one lane); an odd
//	      last block is paired with an empty one (scale 0, lanes 0).
//	result = hsum8(acc)
//
// dW·dX is one float32 product. What varies is only how many such chains a
// pass runs side by side: four weight rows (each activation block is loaded
// once for the four) and, for Q8_0 with n ≥ 2, two inputs (|w| computed once
// for both), so an output's bits never depend on n, on its neighbours or on
// the thread split. One chain is bound by FMA latency; four or eight
// independent chains keep the integer units busy instead.
//
// Q4_0 takes the nibbles unsigned (0..15) into VPMADDUBSW and subtracts the
// 8·Σx term per lane, precomputed once per call (actQ8.c): the same exact
// integer as Σ(nibble−8)·x, with three fewer vector operations per block.
//
// The inner loops read through unsafe pointers: every row and activation
// slice is bounds-checked once, up front, against the full length the loop
// touches. With per-block slice expressions the compiler kept ~10 compares
// and spills per block, as much work as the arithmetic itself.

// Block byte lengths (tensor.Q8_0BlockLen, tensor.Q4_0BlockLen).
const (
	q8Blk = 34
	q4Blk = 18
)

func ldI8x32(p unsafe.Pointer, off int) archsimd.Int8x32 {
	return archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(p, off)))
}

func ldU8x16(p unsafe.Pointer, off int) archsimd.Uint8x16 {
	return archsimd.LoadUint8x16((*[16]uint8)(unsafe.Add(p, off)))
}

func ldI32x8(p unsafe.Pointer, off int) archsimd.Int32x8 {
	return archsimd.LoadInt32x8((*[8]int32)(unsafe.Add(p, off)))
}

func ldF32x8(p unsafe.Pointer, off int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, off)))
}

// ldScale is the float32 block scale (quantScaleTable) of the block at p+off.
func ldScale(sc *[1 << 16]float32, p unsafe.Pointer, off int) float32 {
	return sc[*(*uint16)(unsafe.Add(p, off))] // GGUF is little-endian, as is amd64
}

// rowPtrs returns the first byte of rows r..r+3 of w (row length rb), each
// checked to hold rb bytes.
func rowPtrs(w []byte, r, rb int) (p0, p1, p2, p3 unsafe.Pointer) {
	b := w[r*rb : (r+4)*rb]
	return unsafe.Pointer(&b[0]), unsafe.Pointer(&b[rb]), unsafe.Pointer(&b[2*rb]), unsafe.Pointer(&b[3*rb])
}

// actPtrs checks input i's activations and returns pointers to its q, d, c
// and d4 (nb blocks).
func actPtrs(xq *actQ8, i, nb int) (q, d, c, d4 unsafe.Pointer) {
	qs := xq.q[i*nb*tile : (i+1)*nb*tile]
	ds := xq.d[i*nb : (i+1)*nb]
	cs := xq.c[4*i*nb : 4*(i+1)*nb]
	d4s := xq.d4[4*i*nb : 4*(i+1)*nb]
	return unsafe.Pointer(&qs[0]), unsafe.Pointer(&ds[0]), unsafe.Pointer(&cs[0]), unsafe.Pointer(&d4s[0])
}

// zeroRows sets outputs [lo,hi) of every input: the product with no columns.
func zeroRows(dst []float32, n, rows, lo, hi int) {
	for i := 0; i < n; i++ {
		clear(dst[i*rows+lo : i*rows+hi])
	}
}

// ---- Q8_0 ----

func matQ8_0Fast(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	rb := nb * q8Blk
	sc := quantScaleTable()
	r := lo
	for ; r+group <= hi; r += group {
		p0, p1, p2, p3 := rowPtrs(w, r, rb)
		i := 0
		for ; i+2 <= n; i += 2 {
			a, b := dot4x2Q8_0(p0, p1, p2, p3, xq, i, nb, sc)
			copy(dst[i*rows+r:i*rows+r+group], a[:])
			copy(dst[(i+1)*rows+r:(i+1)*rows+r+group], b[:])
		}
		if i < n {
			a := dot4Q8_0(p0, p1, p2, p3, xq, i, nb, sc)
			copy(dst[i*rows+r:i*rows+r+group], a[:])
		}
	}
	for ; r < hi; r++ {
		wr := w[r*rb : (r+1)*rb]
		p := unsafe.Pointer(&wr[0])
		for i := 0; i < n; i++ {
			a := dot4Q8_0(p, p, p, p, xq, i, nb, sc) // same chain as in a group
			dst[i*rows+r] = a[0]
		}
	}
}

// q8Lanes is the exact Σ w·x of one Q8_0 block against 32 activation bytes,
// in 8 int32 lanes. VPMADDUBSW wants an unsigned operand: |w| times x with
// w's sign (VPSIGNB); a pair sum is at most 2·128·127 < 2^15, so it never
// saturates.
func q8Lanes(wv, xv archsimd.Int8x32, ones archsimd.Int16x16) archsimd.Int32x8 {
	return wv.Abs().AsUint8x32().DotProductPairsSaturated(xv.CopySign(wv)).DotProductPairs(ones)
}

// dot4Q8_0 is four chains: the rows at p0..p3 (checked by the caller to hold
// nb blocks) against input i.
func dot4Q8_0(p0, p1, p2, p3 unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) [4]float32 {
	xp, dp, _, _ := actPtrs(xq, i, nb)
	ones := archsimd.BroadcastInt16x16(1)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3 := a0, a0, a0
	for b := 0; b < nb; b++ {
		o := b * q8Blk
		xv := ldI8x32(xp, b*tile)
		dx := *(*float32)(unsafe.Add(dp, 4*b))
		l0 := q8Lanes(ldI8x32(p0, o+2), xv, ones)
		l1 := q8Lanes(ldI8x32(p1, o+2), xv, ones)
		l2 := q8Lanes(ldI8x32(p2, o+2), xv, ones)
		l3 := q8Lanes(ldI8x32(p3, o+2), xv, ones)
		a0 = l0.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(ldScale(sc, p0, o)*dx), a0)
		a1 = l1.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(ldScale(sc, p1, o)*dx), a1)
		a2 = l2.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(ldScale(sc, p2, o)*dx), a2)
		a3 = l3.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(ldScale(sc, p3, o)*dx), a3)
	}
	return [4]float32{hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)}
}

// dot4x2Q8_0 is eight chains: the rows at p0..p3 against inputs i and i+1,
// each weight block's |w| computed once for both inputs.
func dot4x2Q8_0(p0, p1, p2, p3 unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) (s, t [4]float32) {
	xp, xdp, _, _ := actPtrs(xq, i, nb)
	yp, ydp, _, _ := actPtrs(xq, i+1, nb)
	ones := archsimd.BroadcastInt16x16(1)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3, c0, c1, c2, c3 := a0, a0, a0, a0, a0, a0, a0
	for b := 0; b < nb; b++ {
		o := b * q8Blk
		xv, yv := ldI8x32(xp, b*tile), ldI8x32(yp, b*tile)
		dx, dy := *(*float32)(unsafe.Add(xdp, 4*b)), *(*float32)(unsafe.Add(ydp, 4*b))

		wv := ldI8x32(p0, o+2)
		u := wv.Abs().AsUint8x32()
		d := ldScale(sc, p0, o)
		a0 = u.DotProductPairsSaturated(xv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a0)
		c0 = u.DotProductPairsSaturated(yv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c0)

		wv = ldI8x32(p1, o+2)
		u = wv.Abs().AsUint8x32()
		d = ldScale(sc, p1, o)
		a1 = u.DotProductPairsSaturated(xv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a1)
		c1 = u.DotProductPairsSaturated(yv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c1)

		wv = ldI8x32(p2, o+2)
		u = wv.Abs().AsUint8x32()
		d = ldScale(sc, p2, o)
		a2 = u.DotProductPairsSaturated(xv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a2)
		c2 = u.DotProductPairsSaturated(yv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c2)

		wv = ldI8x32(p3, o+2)
		u = wv.Abs().AsUint8x32()
		d = ldScale(sc, p3, o)
		a3 = u.DotProductPairsSaturated(xv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a3)
		c3 = u.DotProductPairsSaturated(yv.CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c3)
	}
	return [4]float32{hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)},
		[4]float32{hsum8(c0), hsum8(c1), hsum8(c2), hsum8(c3)}
}

// ---- Q4_0 ----

func matQ4_0Fast(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	nb := cols / tile
	if nb == 0 {
		zeroRows(dst, n, rows, lo, hi)
		return
	}
	rb := nb * q4Blk
	sc := quantScaleTable()
	r := lo
	for ; r+group <= hi; r += group {
		p0, p1, p2, p3 := rowPtrs(w, r, rb)
		for i := 0; i < n; i++ {
			a := dot4Q4_0(p0, p1, p2, p3, xq, i, nb, sc)
			copy(dst[i*rows+r:i*rows+r+group], a[:])
		}
	}
	for ; r < hi; r++ {
		wr := w[r*rb : (r+1)*rb]
		p := unsafe.Pointer(&wr[0])
		for i := 0; i < n; i++ {
			a := dot4Q4_0(p, p, p, p, xq, i, nb, sc) // same chain as in a group
			dst[i*rows+r] = a[0]
		}
	}
}

// q4Step adds to acc the pair of blocks at p+o and p+o+q4Blk (their nibble
// bytes at +2) against activation halves xl, xh (values 0–15 of both blocks,
// values 16–31 of both), offset c and activation scales d4 (the lane layout
// above); mask is 0x0f in every byte.
func q4Step(acc archsimd.Float32x8, p unsafe.Pointer, o int, xl, xh archsimd.Int8x32, c archsimd.Int32x8,
	d4 archsimd.Float32x8, mask archsimd.Uint8x32, ones archsimd.Int16x16, sc *[1 << 16]float32) archsimd.Float32x8 {
	var v archsimd.Uint8x32
	v = v.SetLo(ldU8x16(p, o+2)).SetHi(ldU8x16(p, o+q4Blk+2))
	lo := v.And(mask)
	hi := v.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(mask)
	l := lo.DotProductPairsSaturated(xl).Add(hi.DotProductPairsSaturated(xh)).DotProductPairs(ones).Sub(c)
	dw := archsimd.BroadcastFloat32x8(ldScale(sc, p, o)).SetHi(archsimd.BroadcastFloat32x4(ldScale(sc, p, o+q4Blk)))
	return l.ConvertToFloat32().MulAdd(dw.Mul(d4), acc)
}

// q4Last is q4Step for an odd last block at p+o, paired with an empty block:
// its upper lanes get 0·0 and so leave acc unchanged.
func q4Last(acc archsimd.Float32x8, p unsafe.Pointer, o int, xl, xh archsimd.Int8x32, c archsimd.Int32x8,
	d4 archsimd.Float32x8, mask archsimd.Uint8x32, ones archsimd.Int16x16, sc *[1 << 16]float32) archsimd.Float32x8 {
	var v archsimd.Uint8x32
	v = v.SetLo(ldU8x16(p, o+2))
	lo := v.And(mask)
	hi := v.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(mask)
	l := lo.DotProductPairsSaturated(xl).Add(hi.DotProductPairsSaturated(xh)).DotProductPairs(ones).Sub(c)
	var dw archsimd.Float32x8
	dw = dw.SetLo(archsimd.BroadcastFloat32x4(ldScale(sc, p, o)))
	return l.ConvertToFloat32().MulAdd(dw.Mul(d4), acc)
}

// dot4Q4_0 is four chains: the rows at p0..p3 (checked by the caller to hold
// nb blocks) against input i.
func dot4Q4_0(p0, p1, p2, p3 unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) [4]float32 {
	xp, _, cp, d4p := actPtrs(xq, i, nb)
	ones := archsimd.BroadcastInt16x16(1)
	mask := archsimd.BroadcastUint8x32(0x0f)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3 := a0, a0, a0
	b := 0
	for ; b+2 <= nb; b += 2 {
		o := b * q4Blk
		x0, x1 := ldI8x32(xp, b*tile), ldI8x32(xp, b*tile+tile)
		xl, xh := x0.Select128FromPair(0, 2, x1), x0.Select128FromPair(1, 3, x1)
		c := ldI32x8(cp, 16*b)
		d4 := ldF32x8(d4p, 16*b)
		a0 = q4Step(a0, p0, o, xl, xh, c, d4, mask, ones, sc)
		a1 = q4Step(a1, p1, o, xl, xh, c, d4, mask, ones, sc)
		a2 = q4Step(a2, p2, o, xl, xh, c, d4, mask, ones, sc)
		a3 = q4Step(a3, p3, o, xl, xh, c, d4, mask, ones, sc)
	}
	if b < nb {
		o := b * q4Blk
		var x0 archsimd.Int8x32
		x0 = x0.SetLo(archsimd.LoadInt8x16((*[16]int8)(unsafe.Add(xp, b*tile))))
		var xh archsimd.Int8x32
		xh = xh.SetLo(archsimd.LoadInt8x16((*[16]int8)(unsafe.Add(xp, b*tile+tile/2))))
		var c archsimd.Int32x8
		c = c.SetLo(archsimd.LoadInt32x4((*[4]int32)(unsafe.Add(cp, 16*b))))
		var d4 archsimd.Float32x8
		d4 = d4.SetLo(archsimd.LoadFloat32x4((*[4]float32)(unsafe.Add(d4p, 16*b))))
		a0 = q4Last(a0, p0, o, x0, xh, c, d4, mask, ones, sc)
		a1 = q4Last(a1, p1, o, x0, xh, c, d4, mask, ones, sc)
		a2 = q4Last(a2, p2, o, x0, xh, c, d4, mask, ones, sc)
		a3 = q4Last(a3, p3, o, x0, xh, c, d4, mask, ones, sc)
	}
	return [4]float32{hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)}
}
