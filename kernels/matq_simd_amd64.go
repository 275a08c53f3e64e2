//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"unsafe"

	"simd/archsimd"
)

// The archsimd Q4_0 kernel over int8 activations (actQ8), kept as the
// oracle of the VNNI set's Q4_0 kernel (matq4_vnni_amd64.go), which gives
// its bits. (Its Q8_0 sibling went when the AVX2 and VNNI Q8_0 kernels
// moved to one FMA per (row, block), checked against canonQ8_0; the AVX2
// Q4_0 kernel likewise follows canonQ4_0.) It is 256-bit. Per output
// element (weight row r, input i) the operation order is fixed by cols
// alone:
//
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
// For n ≥ 2 the inputs go by in tiles of four, each tile walking a block of
// weight rows (rowBlock) that stays in L2 while its own activations stay in
// L1 (1.1–1.3× at 512 inputs).
//
// One row at a time is deliberate: interleaving four rows (four chains fed by
// one activation load) measured 1.7× faster with the weights in L3 but 1.8×
// slower streaming from DRAM (BenchmarkMatVecDRAM), which is where a decode's
// weights come from: four concurrent streams defeat the hardware prefetcher
// that one sequential stream keeps busy.
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

// actPairPtrs checks input i's Q4_0 pair layout and returns pointers to its
// p, c and d4 (np pairs).
func actPairPtrs(xq *actQ8, i, np int) (p, c, d4 unsafe.Pointer) {
	ps := xq.p[i*np*2*tile : (i+1)*np*2*tile]
	cs := xq.c[8*i*np : 8*(i+1)*np]
	ds := xq.d4[8*i*np : 8*(i+1)*np]
	return unsafe.Pointer(&ps[0]), unsafe.Pointer(&cs[0]), unsafe.Pointer(&ds[0])
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
