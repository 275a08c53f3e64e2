//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math"
	"simd/archsimd"
)

// The attention softmax of the archsimd build: max, exp and sum vectorized,
// with exp a float32 polynomial rather than llama2.c's float64 math.Exp (which
// was a fifth of 110M decode time at 512 context). Numerics differ from ref
// only in the exp (expMaxRelErr) and in the order of the sum; the public
// Softmax stays generic.

// expF32x16 is e^x per lane: within expMaxRelErr of math.Exp for x in
// [expUnder, expOver], 0 below (and for -Inf), +Inf above, NaN for NaN.
func expF32x16(x archsimd.Float32x16) archsimd.Float32x16 {
	t := x.MulAdd(archsimd.BroadcastFloat32x16(expLog2e), archsimd.BroadcastFloat32x16(expRound))
	n := t.Sub(archsimd.BroadcastFloat32x16(expRound))
	r := n.MulAdd(archsimd.BroadcastFloat32x16(-expLn2Hi), x)
	r = n.MulAdd(archsimd.BroadcastFloat32x16(-expLn2Lo), r)
	p := archsimd.BroadcastFloat32x16(expP0)
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expP1))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expP2))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expP3))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expP4))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expP5))
	y := p.MulAdd(r.Mul(r), r).Add(archsimd.BroadcastFloat32x16(1))
	// 2^n: the low bits of t are n + bits(expRound); rebias to n + 127 and
	// shift into the exponent field.
	e := t.AsInt32x16().Sub(archsimd.BroadcastInt32x16(int32(math.Float32bits(expRound)) - 127)).ShiftAllLeft(23)
	y = y.Mul(e.AsFloat32x16())
	y = archsimd.BroadcastFloat32x16(0).Merge(y, x.Less(archsimd.BroadcastFloat32x16(expUnder)))
	return archsimd.BroadcastFloat32x16(float32(math.Inf(1))).Merge(y, x.Greater(archsimd.BroadcastFloat32x16(expOver)))
}

// expF32x8 is expF32x16 on 8 lanes (AVX2), the same operations lane for lane.
func expF32x8(x archsimd.Float32x8) archsimd.Float32x8 {
	t := x.MulAdd(archsimd.BroadcastFloat32x8(expLog2e), archsimd.BroadcastFloat32x8(expRound))
	n := t.Sub(archsimd.BroadcastFloat32x8(expRound))
	r := n.MulAdd(archsimd.BroadcastFloat32x8(-expLn2Hi), x)
	r = n.MulAdd(archsimd.BroadcastFloat32x8(-expLn2Lo), r)
	p := archsimd.BroadcastFloat32x8(expP0)
	p = p.MulAdd(r, archsimd.BroadcastFloat32x8(expP1))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x8(expP2))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x8(expP3))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x8(expP4))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x8(expP5))
	y := p.MulAdd(r.Mul(r), r).Add(archsimd.BroadcastFloat32x8(1))
	e := t.AsInt32x8().Sub(archsimd.BroadcastInt32x8(int32(math.Float32bits(expRound)) - 127)).ShiftAllLeft(23)
	y = y.Mul(e.AsFloat32x8())
	y = archsimd.BroadcastFloat32x8(0).Merge(y, x.Less(archsimd.BroadcastFloat32x8(expUnder)))
	return archsimd.BroadcastFloat32x8(float32(math.Inf(1))).Merge(y, x.Greater(archsimd.BroadcastFloat32x8(expOver)))
}

// softmaxSIMD is softmaxGeneric with expF32x16 (AVX-512) or expF32x8 for the
// exp and a vector sum. Like the generic one it makes every output NaN when
// any input is NaN (or when the max is ±Inf with an equal-infinity input:
// Inf - Inf).
func softmaxSIMD(x []float32) {
	if len(x) == 0 {
		return
	}
	if level == isaAVX512 {
		softmax16(x)
	} else {
		softmax8(x)
	}
}

func softmax16(x []float32) {
	mx := x[0]
	j := 0
	if len(x) >= 16 {
		m := archsimd.LoadFloat32x16Slice(x[:16])
		for j = 16; j+16 <= len(x); j += 16 {
			m = m.Max(archsimd.LoadFloat32x16Slice(x[j : j+16]))
		}
		var a [16]float32
		m.Store(&a)
		for _, v := range a {
			mx = max32(mx, v)
		}
	}
	for _, v := range x[j:] {
		mx = max32(mx, v)
	}
	mv := archsimd.BroadcastFloat32x16(mx)
	sum := archsimd.BroadcastFloat32x16(0)
	for j = 0; j+16 <= len(x); j += 16 {
		e := expF32x16(archsimd.LoadFloat32x16Slice(x[j : j+16]).Sub(mv))
		e.StoreSlice(x[j : j+16])
		sum = sum.Add(e)
	}
	if j < len(x) {
		// The tail through a stack buffer padded with -Inf (exp → 0).
		var b [16]float32
		for k := range b {
			b[k] = float32(math.Inf(-1))
		}
		for k, v := range x[j:] {
			b[k] = v - mx
		}
		e := expF32x16(archsimd.LoadFloat32x16(&b))
		storePart16(e, x[j:])
		sum = sum.Add(e)
	}
	sv := archsimd.BroadcastFloat32x16(hsum16(sum))
	for j = 0; j+16 <= len(x); j += 16 {
		archsimd.LoadFloat32x16Slice(x[j : j+16]).Div(sv).StoreSlice(x[j : j+16])
	}
	if j < len(x) {
		storePart16(loadPart16(x[j:]).Div(sv), x[j:])
	}
}

func softmax8(x []float32) {
	mx := x[0]
	j := 0
	if len(x) >= 8 {
		m := archsimd.LoadFloat32x8Slice(x[:8])
		for j = 8; j+8 <= len(x); j += 8 {
			m = m.Max(archsimd.LoadFloat32x8Slice(x[j : j+8]))
		}
		var a [8]float32
		m.Store(&a)
		for _, v := range a {
			mx = max32(mx, v)
		}
	}
	for _, v := range x[j:] {
		mx = max32(mx, v)
	}
	mv := archsimd.BroadcastFloat32x8(mx)
	sum := archsimd.BroadcastFloat32x8(0)
	for j = 0; j+8 <= len(x); j += 8 {
		e := expF32x8(archsimd.LoadFloat32x8Slice(x[j : j+8]).Sub(mv))
		e.StoreSlice(x[j : j+8])
		sum = sum.Add(e)
	}
	if j < len(x) {
		var b [8]float32
		for k := range b {
			b[k] = float32(math.Inf(-1))
		}
		for k, v := range x[j:] {
			b[k] = v - mx
		}
		e := expF32x8(archsimd.LoadFloat32x8(&b))
		storePart8(e, x[j:])
		sum = sum.Add(e)
	}
	sv := archsimd.BroadcastFloat32x8(hsum8(sum))
	for j = 0; j+8 <= len(x); j += 8 {
		archsimd.LoadFloat32x8Slice(x[j : j+8]).Div(sv).StoreSlice(x[j : j+8])
	}
	if j < len(x) {
		storePart8(loadPart8(x[j:]).Div(sv), x[j:])
	}
}

// max32 is the generic softmax's max step: v replaces mx only if v > mx, so
// a NaN (never greater) is skipped here and poisons the sum instead.
func max32(mx, v float32) float32 {
	if v > mx {
		return v
	}
	return mx
}
