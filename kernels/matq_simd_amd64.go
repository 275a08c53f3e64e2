//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"unsafe"

	"simd/archsimd"
)

// The Q8_0/Q4_0 kernels over int8 activations (actQ8), shared by the AVX2 and
// AVX-512 sets. They are 256-bit: AVX-512 has no 512-bit VPSIGNB, and the
// Zen 4 cores we measure on split 512-bit integer ops in two anyway. Per
// output element (weight row r, input i) the operation order is fixed by cols
// alone:
//
//	Q8_0: two float32x8 chains, a0 over even blocks and a1 over odd ones:
//	      a = fma(float32(L_b), dW(r,b)·dX(i,b), a)
//	      L_b lane k = Σ_{j=4k..4k+3} qW_j·qX_j (exact int32);
//	      result = hsum8(a0 + a1)
//	Q4_0: one chain over pairs of blocks (b, b+1) in the lane layout of
//	      actQ8.p (lanes 0–3 block b, 4–7 block b+1, the two nibbles of a
//	      byte in one lane); an odd last block is paired with an empty one
//	      (scale 0, lanes 0); result = hsum8(a)
//
// dW·dX is one float32 product. A kernel walks one weight row at a time,
// front to back, against one input or two (the weight decoded once for both,
// the second input's chains identical to the first's), so an output's bits
// never depend on n, on its neighbours or on the thread split.
//
// For n ≥ 2 the inputs go by in tiles, two for Q8_0 and four for Q4_0, each
// tile walking a block of weight rows (rowBlock) that stays in L2 while its
// own activations stay in L1. A four-input Q8_0 tile needs eight
// accumulators and spilled (Go allocates Y0–Y15 only): 5–15% slower than
// two inputs at n=16, so Q8_0 stays at two. Q8_0 is bound by the five vector
// ops per (block, input) pair (VPSIGNB, VPMADDUBSW, VPMADDWD, convert, FMA),
// not by memory: blocking left its 512-input prefill unchanged (Q4_0 gained
// 1.1–1.3×). VPDPBUSD (AVX-512 VNNI) would fold two of the five, but archsimd
// does not expose it.
//
// One row at a time is deliberate: interleaving four rows (four chains fed by
// one activation load) measured 1.7× faster with the weights in L3 but 1.8×
// slower streaming from DRAM (BenchmarkMatVecDRAM), which is where a decode's
// weights come from: four concurrent streams defeat the hardware prefetcher
// that one sequential stream keeps busy. Q8_0's even/odd chains give the
// instruction-level parallelism the four rows gave.
//
// Q4_0 takes the nibbles unsigned (0..15) into VPMADDUBSW and subtracts the
// 8·Σx term per lane, precomputed once per call (actQ8.c): the same exact
// integer as Σ(nibble−8)·x, with three fewer vector operations per block.
//
// The inner loops read through unsafe pointers: every row and activation
// slice is bounds-checked once, up front, against the full length the loop
// touches. With per-block slice expressions the compiler kept ~10 compares
// and spills per block, as much work as the arithmetic itself.

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

// actPtrs checks input i's activations and returns pointers to its q and d
// (nb blocks).
func actPtrs(xq *actQ8, i, nb int) (q, d unsafe.Pointer) {
	qs := xq.q[i*nb*tile : (i+1)*nb*tile]
	ds := xq.d[i*nb : (i+1)*nb]
	return unsafe.Pointer(&qs[0]), unsafe.Pointer(&ds[0])
}

// actPairPtrs checks input i's Q4_0 pair layout and returns pointers to its
// p, c and d4 (np pairs).
func actPairPtrs(xq *actQ8, i, np int) (p, c, d4 unsafe.Pointer) {
	ps := xq.p[i*np*2*tile : (i+1)*np*2*tile]
	cs := xq.c[8*i*np : 8*(i+1)*np]
	ds := xq.d4[8*i*np : 8*(i+1)*np]
	return unsafe.Pointer(&ps[0]), unsafe.Pointer(&cs[0]), unsafe.Pointer(&ds[0])
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
	step := rowBlock(rb)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+2 <= n; i += 2 {
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				dst[i*rows+r], dst[(i+1)*rows+r] = dot2Q8_0(unsafe.Pointer(&wr[0]), xq, i, i+1, nb, sc)
			}
		}
		if i < n {
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				dst[i*rows+r] = dot1Q8_0(unsafe.Pointer(&wr[0]), xq, i, nb, sc)
			}
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

// dot2Q8_0 is the row at p (checked by the caller to hold nb blocks) against
// inputs i and k, |w| computed once for both. Each output is two chains, over
// even and odd blocks, added at the end.
func dot2Q8_0(p unsafe.Pointer, xq *actQ8, i, k, nb int, sc *[1 << 16]float32) (float32, float32) {
	xp, xdp := actPtrs(xq, i, nb)
	yp, ydp := actPtrs(xq, k, nb)
	ones := archsimd.BroadcastInt16x16(1)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, c0, c1 := a0, a0, a0
	b := 0
	for ; b+2 <= nb; b += 2 {
		o := b * q8Blk
		wv := ldI8x32(p, o+2)
		u := wv.Abs().AsUint8x32()
		d := ldScale(sc, p, o)
		dx, dy := *(*float32)(unsafe.Add(xdp, 4*b)), *(*float32)(unsafe.Add(ydp, 4*b))
		a0 = u.DotProductPairsSaturated(ldI8x32(xp, b*tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a0)
		c0 = u.DotProductPairsSaturated(ldI8x32(yp, b*tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c0)
		wv = ldI8x32(p, o+q8Blk+2)
		u = wv.Abs().AsUint8x32()
		d = ldScale(sc, p, o+q8Blk)
		dx, dy = *(*float32)(unsafe.Add(xdp, 4*b+4)), *(*float32)(unsafe.Add(ydp, 4*b+4))
		a1 = u.DotProductPairsSaturated(ldI8x32(xp, b*tile+tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a1)
		c1 = u.DotProductPairsSaturated(ldI8x32(yp, b*tile+tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c1)
	}
	if b < nb {
		o := b * q8Blk
		wv := ldI8x32(p, o+2)
		u := wv.Abs().AsUint8x32()
		d := ldScale(sc, p, o)
		dx, dy := *(*float32)(unsafe.Add(xdp, 4*b)), *(*float32)(unsafe.Add(ydp, 4*b))
		a0 = u.DotProductPairsSaturated(ldI8x32(xp, b*tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dx), a0)
		c0 = u.DotProductPairsSaturated(ldI8x32(yp, b*tile).CopySign(wv)).DotProductPairs(ones).ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d*dy), c0)
	}
	return hsum8(a0.Add(a1)), hsum8(c0.Add(c1))
}

// dot1Q8_0 is dot2Q8_0 for one input: the same two chains.
func dot1Q8_0(p unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) float32 {
	xp, xdp := actPtrs(xq, i, nb)
	ones := archsimd.BroadcastInt16x16(1)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1 := a0
	b := 0
	for ; b+2 <= nb; b += 2 {
		o := b * q8Blk
		d0, d1 := ldScale(sc, p, o), ldScale(sc, p, o+q8Blk)
		dx0, dx1 := *(*float32)(unsafe.Add(xdp, 4*b)), *(*float32)(unsafe.Add(xdp, 4*b+4))
		l0 := q8Lanes(ldI8x32(p, o+2), ldI8x32(xp, b*tile), ones)
		l1 := q8Lanes(ldI8x32(p, o+q8Blk+2), ldI8x32(xp, b*tile+tile), ones)
		a0 = l0.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d0*dx0), a0)
		a1 = l1.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d1*dx1), a1)
	}
	if b < nb {
		o := b * q8Blk
		d0, dx0 := ldScale(sc, p, o), *(*float32)(unsafe.Add(xdp, 4*b))
		l0 := q8Lanes(ldI8x32(p, o+2), ldI8x32(xp, b*tile), ones)
		a0 = l0.ConvertToFloat32().MulAdd(archsimd.BroadcastFloat32x8(d0*dx0), a0)
	}
	return hsum8(a0.Add(a1))
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
	step := rowBlock(rb)
	for r0 := lo; r0 < hi; r0 += step {
		r1 := min(r0+step, hi)
		i := 0
		for ; i+4 <= n; i += 4 {
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				s := dot4Q4_0(unsafe.Pointer(&wr[0]), xq, i, nb, sc)
				dst[i*rows+r], dst[(i+1)*rows+r], dst[(i+2)*rows+r], dst[(i+3)*rows+r] = s[0], s[1], s[2], s[3]
			}
		}
		if i+2 <= n {
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				dst[i*rows+r], dst[(i+1)*rows+r] = dot2Q4_0(unsafe.Pointer(&wr[0]), xq, i, i+1, nb, sc)
			}
			i += 2
		}
		if i < n {
			for r := r0; r < r1; r++ {
				wr := w[r*rb : (r+1)*rb]
				dst[i*rows+r] = dot1Q4_0(unsafe.Pointer(&wr[0]), xq, i, nb, sc)
			}
		}
	}
}

// q4Weights loads the pair of blocks at p+o, p+o+q4Blk: their 2×16 nibble
// bytes and their scales, each scale in the four lanes of its block. When
// !both (an odd last block) the second block is empty: bytes and scale 0.
func q4Weights(p unsafe.Pointer, o int, both bool, sc *[1 << 16]float32) (archsimd.Uint8x32, archsimd.Float32x8) {
	var v archsimd.Uint8x32
	var dw archsimd.Float32x8
	if both {
		v = v.SetLo(ldU8x16(p, o+2)).SetHi(ldU8x16(p, o+q4Blk+2))
		dw = archsimd.BroadcastFloat32x8(ldScale(sc, p, o)).SetHi(archsimd.BroadcastFloat32x4(ldScale(sc, p, o+q4Blk)))
	} else {
		v = v.SetLo(ldU8x16(p, o+2))
		dw = dw.SetLo(archsimd.BroadcastFloat32x4(ldScale(sc, p, o)))
	}
	return v, dw
}

// dot1Q4_0 is dot2Q4_0 for one input: the same chain.
func dot1Q4_0(p unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) float32 {
	np := (nb + 1) / 2
	xp, xcp, xdp := actPairPtrs(xq, i, np)
	ones := archsimd.BroadcastInt16x16(1)
	mask := archsimd.BroadcastUint8x32(0x0f)
	a0 := archsimd.BroadcastFloat32x8(0)
	for j := 0; j < np; j++ {
		o := 2 * j * q4Blk
		v, dw := q4Weights(p, o, 2*j+1 < nb, sc)
		lo := v.And(mask)
		hi := v.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(mask)
		lx := lo.DotProductPairsSaturated(ldI8x32(xp, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(xp, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(xcp, 32*j))
		a0 = lx.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(xdp, 32*j)), a0)
	}
	return hsum8(a0)
}

// dot2Q4_0 is the row at p (checked by the caller to hold nb blocks)
// against inputs i and k: one chain per output over pairs of blocks, each
// pair's nibbles unpacked once for both inputs.
func dot2Q4_0(p unsafe.Pointer, xq *actQ8, i, k, nb int, sc *[1 << 16]float32) (float32, float32) {
	np := (nb + 1) / 2
	xp, xcp, xdp := actPairPtrs(xq, i, np)
	yp, ycp, ydp := actPairPtrs(xq, k, np)
	ones := archsimd.BroadcastInt16x16(1)
	mask := archsimd.BroadcastUint8x32(0x0f)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1 := a0
	for j := 0; j < np; j++ {
		o := 2 * j * q4Blk
		v, dw := q4Weights(p, o, 2*j+1 < nb, sc)
		lo := v.And(mask)
		hi := v.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(mask)
		lx := lo.DotProductPairsSaturated(ldI8x32(xp, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(xp, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(xcp, 32*j))
		a0 = lx.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(xdp, 32*j)), a0)
		ly := lo.DotProductPairsSaturated(ldI8x32(yp, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(yp, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(ycp, 32*j))
		a1 = ly.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(ydp, 32*j)), a1)
	}
	return hsum8(a0), hsum8(a1)
}

// dot4Q4_0 is dot2Q4_0 against inputs i..i+3: each pair of blocks unpacked
// once for four inputs, each output's chain the same as dot1Q4_0's.
func dot4Q4_0(p unsafe.Pointer, xq *actQ8, i, nb int, sc *[1 << 16]float32) [4]float32 {
	np := (nb + 1) / 2
	x0, c0, d0 := actPairPtrs(xq, i, np)
	x1, c1, d1 := actPairPtrs(xq, i+1, np)
	x2, c2, d2 := actPairPtrs(xq, i+2, np)
	x3, c3, d3 := actPairPtrs(xq, i+3, np)
	ones := archsimd.BroadcastInt16x16(1)
	mask := archsimd.BroadcastUint8x32(0x0f)
	a0 := archsimd.BroadcastFloat32x8(0)
	a1, a2, a3 := a0, a0, a0
	for j := 0; j < np; j++ {
		o := 2 * j * q4Blk
		v, dw := q4Weights(p, o, 2*j+1 < nb, sc)
		lo := v.And(mask)
		hi := v.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(mask)
		l := lo.DotProductPairsSaturated(ldI8x32(x0, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(x0, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(c0, 32*j))
		a0 = l.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(d0, 32*j)), a0)
		l = lo.DotProductPairsSaturated(ldI8x32(x1, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(x1, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(c1, 32*j))
		a1 = l.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(d1, 32*j)), a1)
		l = lo.DotProductPairsSaturated(ldI8x32(x2, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(x2, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(c2, 32*j))
		a2 = l.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(d2, 32*j)), a2)
		l = lo.DotProductPairsSaturated(ldI8x32(x3, 64*j)).Add(hi.DotProductPairsSaturated(ldI8x32(x3, 64*j+32))).DotProductPairs(ones).Sub(ldI32x8(c3, 32*j))
		a3 = l.ConvertToFloat32().MulAdd(dw.Mul(ldF32x8(d3, 32*j)), a3)
	}
	return [4]float32{hsum8(a0), hsum8(a1), hsum8(a2), hsum8(a3)}
}
