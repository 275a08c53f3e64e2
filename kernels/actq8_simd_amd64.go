//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math"

	"simd/archsimd"
)

func init() {
	addSelector(func(c isaLevel) {
		quantizeBlockImpl, pairsImpl = quantizeBlockQ8, (*actQ8).pairs
		if c >= isaAVX512 && archsimd.X86.AVX512() {
			quantizeBlockImpl = quantizeBlockQ8AVX512
		}
		if c >= isaAVX2 && archsimd.X86.AVX2() {
			pairsImpl, archsimdRows = pairsAVX2, true
		}
	})
}

// lane4 is the 8 int32 sums of each 4 consecutive values of a 32-value block
// (exact: VPMADDUBSW of ones by q, then VPMADDWD by ones).
func lane4(q []int8) archsimd.Int32x8 {
	return archsimd.BroadcastUint8x32(1).DotProductPairsSaturated(archsimd.LoadInt8x32Slice(q[:tile])).
		DotProductPairs(archsimd.BroadcastInt16x16(1))
}

// pairsAVX2 is (*actQ8).pairs with vector lane sums and copies.
func pairsAVX2(a *actQ8, cols, b0, b1 int) {
	bpr := cols / tile
	rowPairs := (bpr + 1) / 2
	for b := b0; b < b1; b++ {
		q := a.q[b*tile : (b+1)*tile]
		row, rb := b/bpr, b%bpr
		pr, h := row*rowPairs+rb/2, rb%2
		v := archsimd.LoadInt8x32Slice(q)
		o := pr*2*tile + h*tile/2
		v.GetLo().StoreSlice(a.p[o : o+tile/2])
		v.GetHi().StoreSlice(a.p[o+tile : o+tile+tile/2])
		l := lane4(q)
		o = 8*pr + 4*h
		l.GetLo().Add(l.GetHi()).ShiftAllLeft(3).StoreSlice(a.c[o : o+4])
		archsimd.BroadcastFloat32x4(a.d[b]).StoreSlice(a.d4[o : o+4])
	}
}

// quantizeBlockQ8AVX512 is quantizeBlockQ8 in 512-bit lanes, with the same
// bits: the same float32 amax (found as the largest |x| bit pattern, which
// orders finite non-negative floats as their values and puts NaN and ±Inf
// above them), the same float64 reciprocal, product and round-to-even, and
// no clamp needed (|x|·127/amax rounds to at most 127). A prompt chunk of
// 512 rows quantizes 400K activations per matrix, which the scalar loop took
// a tenth of prefill over.
func quantizeBlockQ8AVX512(q []int8, x []float32) float32 {
	q = q[:tile]
	x = x[:tile]
	absMask := archsimd.BroadcastUint32x16(0x7fffffff)
	lo := archsimd.LoadFloat32x16Slice(x[:16])
	hi := archsimd.LoadFloat32x16Slice(x[16:])
	m := lo.AsUint32x16().And(absMask).AsInt32x16().Max(hi.AsUint32x16().And(absMask).AsInt32x16())
	m8 := m.GetLo().Max(m.GetHi())
	var lanes [8]int32
	m8.Store(&lanes)
	amaxBits := lanes[0]
	for _, v := range lanes[1:] {
		amaxBits = max(amaxBits, v)
	}
	if amaxBits > 0x7f7fffff { // NaN or Inf
		clear(q)
		return float32(math.NaN())
	}
	if amaxBits == 0 {
		clear(q)
		return 0
	}
	amax := math.Float32frombits(uint32(amaxBits))
	id := archsimd.BroadcastFloat64x8(127 / float64(amax))
	quant16(q[:16], lo, id)
	quant16(q[16:], hi, id)
	return amax / 127
}

// quant16 stores round(float64(v)·id) for the 16 lanes of v into q.
func quant16(q []int8, v archsimd.Float32x16, id archsimd.Float64x8) {
	a := v.GetLo().ConvertToFloat64().Mul(id).RoundToEvenScaled(0).ConvertToInt32()
	b := v.GetHi().ConvertToFloat64().Mul(id).RoundToEvenScaled(0).ConvertToInt32()
	var w archsimd.Int32x16
	w.SetLo(a).SetHi(b).SaturateToInt8().StoreSlice(q[:16])
}
