package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The quantizers of this file follow ggml's quantize_row_*_ref, the
// reference (no importance matrix) rounding llama.cpp's quantize tool uses
// for these types, step for step in float32: every product is rounded
// before the next add (a C build that contracts a*b+c into a fused
// multiply-add can differ from them in the last bit of a scale, and then in
// a quant).

// QuantizeRow encodes src (len(src) a multiple of t's block size) into dst
// as t. It supports Q8_0, Q4_0 and the types of kquant.go.
func QuantizeRow(dst []byte, src []float32, t DType) error {
	bs := t.BlockSize()
	if bs <= 1 || len(src)%bs != 0 {
		return fmt.Errorf("tensor: QuantizeRow: %d values of %v: not a whole number of blocks of a quantized type", len(src), t)
	}
	if need := len(src) / bs * t.BlockBytes(); len(dst) < need {
		return fmt.Errorf("tensor: QuantizeRow: %d values of %v need %d bytes, have %d", len(src), t, need, len(dst))
	}
	switch t {
	case Q8_0:
		QuantizeRowQ8_0(dst, src)
	case Q4_0:
		QuantizeRowQ4_0(dst, src)
	case Q4_1:
		QuantizeRowQ4_1(dst, src)
	case Q5_0:
		QuantizeRowQ5_0(dst, src)
	case Q5_1:
		QuantizeRowQ5_1(dst, src)
	case Q2_K:
		QuantizeRowQ2_K(dst, src)
	case Q3_K:
		QuantizeRowQ3_K(dst, src)
	case Q4_K:
		QuantizeRowQ4_K(dst, src)
	case Q5_K:
		QuantizeRowQ5_K(dst, src)
	case Q6_K:
		QuantizeRowQ6_K(dst, src)
	case Q8_K:
		QuantizeRowQ8_K(dst, src)
	default:
		return fmt.Errorf("tensor: QuantizeRow: no quantizer for %v", t)
	}
	return nil
}

func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func absf(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

func sqrtf(f float32) float32 { return float32(math.Sqrt(float64(f))) }

// nearestInt rounds to the nearest integer, ties to even, as ggml's
// nearest_int does by adding 1.5·2²³ (valid for |f| <= 4194303).
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it is all zero.
const groupMaxEps = 1e-15

// QuantizeRowQ4_1 is quantize_row_q4_1_ref: d = (max-min)/15, m = min,
// q = min(15, trunc((x-min)/d + 0.5)).
func QuantizeRowQ4_1(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK4_1; b++ {
		x := src[b*QK4_1 : (b+1)*QK4_1]
		mn, mx := float32(math.MaxFloat32), float32(-math.MaxFloat32)
		for _, v := range x {
			mn, mx = min(mn, v), max(mx, v)
		}
		d := (mx - mn) / 15
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*Q4_1BlockLen:]
		putF16(blk, d)
		putF16(blk[2:], mn)
		for j := 0; j < QK4_1/2; j++ {
			x0 := min(15, int8(float32((x[j]-mn)*id)+0.5))
			x1 := min(15, int8(float32((x[j+QK4_1/2]-mn)*id)+0.5))
			blk[4+j] = byte(x0) | byte(x1)<<4
		}
	}
}

// QuantizeRowQ5_0 is quantize_row_q5_0_ref: the signed value of largest
// magnitude maps to -16, d = max/-16, q = min(31, trunc(x/d + 16.5)).
func QuantizeRowQ5_0(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK5_0; b++ {
		x := src[b*QK5_0 : (b+1)*QK5_0]
		var amax, mx float32
		for _, v := range x {
			if a := absf(v); amax < a {
				amax, mx = a, v
			}
		}
		d := mx / -16
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*Q5_0BlockLen:]
		putF16(blk, d)
		var qh uint32
		for j := 0; j < QK5_0/2; j++ {
			x0 := byte(min(31, int8(float32(x[j]*id)+16.5)))
			x1 := byte(min(31, int8(float32(x[j+QK5_0/2]*id)+16.5)))
			blk[6+j] = x0&0x0f | (x1&0x0f)<<4
			qh |= uint32(x0&0x10) >> 4 << j
			qh |= uint32(x1&0x10) >> 4 << (j + QK5_0/2)
		}
		binary.LittleEndian.PutUint32(blk[2:], qh)
	}
}

// QuantizeRowQ5_1 is quantize_row_q5_1_ref: d = (max-min)/31, m = min,
// q = trunc((x-min)/d + 0.5).
func QuantizeRowQ5_1(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK5_1; b++ {
		x := src[b*QK5_1 : (b+1)*QK5_1]
		mn, mx := float32(math.MaxFloat32), float32(-math.MaxFloat32)
		for _, v := range x {
			mn, mx = min(mn, v), max(mx, v)
		}
		d := (mx - mn) / 31
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		blk := dst[b*Q5_1BlockLen:]
		putF16(blk, d)
		putF16(blk[2:], mn)
		var qh uint32
		for j := 0; j < QK5_1/2; j++ {
			x0 := uint8(int32(float32((x[j]-mn)*id) + 0.5))
			x1 := uint8(int32(float32((x[j+QK5_1/2]-mn)*id) + 0.5))
			blk[8+j] = x0&0x0f | (x1&0x0f)<<4
			qh |= uint32(x0&0x10) >> 4 << j
			qh |= uint32(x1&0x10) >> 4 << (j + QK5_1/2)
		}
		binary.LittleEndian.PutUint32(blk[4:], qh)
	}
}

// makeQkx2Quants is ggml's make_qkx2_quants: the scale and min (returned
// as -min in theMin) of an asymmetric nmax-level fit of x under weights,
// the best of a grid of nstep+1 trial scales by weighted squared (or, with
// useMad, absolute) error. L gets the levels.
func makeQkx2Quants(nmax int32, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int, useMad bool) (scale, theMin float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		mn, mx = min(mn, x[i]), max(mx, x[i])
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L[:n])
		return 0, -mn
	}
	fmax := float32(nmax)
	iscale := fmax / (mx - mn)
	scale = 1 / iscale
	errOf := func(diff float32) float32 {
		if useMad {
			return absf(diff)
		}
		return float32(diff * diff)
	}
	var bestErr float32
	for i := range n {
		l := nearestInt(float32(iscale * (x[i] - mn)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+mn) - x[i]
		bestErr += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -mn
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fmax) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := max(0, min(nmax, nearestInt(float32(iscale*(x[i]-mn)))))
			laux[i] = uint8(l)
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curErr float32
			for i := range n {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				curErr += float32(weights[i] * errOf(diff))
			}
			if curErr < bestErr {
				copy(L[:n], laux[:n])
				bestErr, scale, mn = curErr, thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// makeQxQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights (weights x²): a symmetric fit with levels -nmax..nmax-1 stored as
// 0..2nmax-1 in L, trying 18 scales around nmax/max.
func makeQxQuants(nmax int32, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := absf(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	fit := func(iscale float32) (sumlx, suml2 float32) {
		for _, v := range x {
			l := float32(max(-nmax, min(nmax-1, nearestInt(float32(iscale*v)))))
			w := float32(v * v)
			sumlx += float32(float32(w*v) * l)
			suml2 += float32(float32(w*l) * l)
		}
		return
	}
	setL := func(iscale float32) {
		for i, v := range x {
			L[i] = int8(nmax + max(-nmax, min(nmax-1, nearestInt(float32(iscale*v)))))
		}
	}
	iscale := float32(-nmax) / mx
	setL(iscale)
	sumlx, suml2 := fit(iscale)
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(float32(0.1)*float32(is))) / mx
		sumlx, suml2 = fit(iscale)
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			setL(iscale)
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: a symmetric fit with
// levels -nmax..nmax-1 (stored +nmax in L), refined by up to five passes of
// coordinate descent on the x²-weighted error.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := absf(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(float32(iscale*v))))
		L[i] = int8(l)
		w, fl := float32(v*v), float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for range 5 {
		changed := 0
		for i, v := range x {
			w, li := float32(v*v), float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newL := max(-nmax, min(nmax-1, nearestInt(float32(v*sl2)/slx)))
				if newL != int32(L[i]) {
					fn := float32(newL)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i], sumlx, suml2 = int8(newL), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	if suml2 > 0 {
		return sumlx / suml2
	}
	return 0
}

// QuantizeRowQ2_K is quantize_row_q2_K_ref.
func QuantizeRowQ2_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	var laux [16]uint8
	var weights [16]float32
	var mins, scales [QK_K / 16]float32
	const q4scale = 15
	for b := 0; b < len(src)/QK_K; b++ {
		x := src[b*QK_K : (b+1)*QK_K]
		blk := dst[b*Q2_KBlockLen : (b+1)*Q2_KBlockLen]
		sc, qs := blk[0:16], blk[16:80]
		var maxScale, maxMin float32
		for j := range QK_K / 16 {
			for l := range 16 {
				weights[l] = absf(x[16*j+l])
			}
			scales[j], mins[j] = makeQkx2Quants(3, x[16*j:16*j+16], weights[:], L[16*j:16*j+16], laux[:], -0.5, 0.1, 15, true)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		if maxScale > 0 {
			iscale := q4scale / maxScale
			for j := range QK_K / 16 {
				sc[j] = uint8(nearestInt(float32(iscale * scales[j])))
			}
			putF16(blk[80:], maxScale/q4scale)
		} else {
			clear(sc)
			putF16(blk[80:], 0)
		}
		if maxMin > 0 {
			iscale := q4scale / maxMin
			for j := range QK_K / 16 {
				sc[j] |= uint8(nearestInt(float32(iscale*mins[j]))) << 4
			}
			putF16(blk[82:], maxMin/q4scale)
		} else {
			putF16(blk[82:], 0)
		}
		d, dmin := f16At(blk, 80), f16At(blk, 82)
		for j := range QK_K / 16 {
			dl := float32(d * float32(sc[j]&0x0f))
			if dl == 0 {
				continue
			}
			dm := float32(dmin * float32(sc[j]>>4))
			for ii := range 16 {
				L[16*j+ii] = uint8(max(0, min(3, nearestInt((x[16*j+ii]+dm)/dl))))
			}
		}
		for h := range 2 {
			for l := range 32 {
				j := 128 * h
				qs[32*h+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
			}
		}
	}
}

// QuantizeRowQ3_K is quantize_row_q3_K_ref.
func QuantizeRowQ3_K(dst []byte, src []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for b := 0; b < len(src)/QK_K; b++ {
		x := src[b*QK_K : (b+1)*QK_K]
		blk := dst[b*Q3_KBlockLen : (b+1)*Q3_KBlockLen]
		hmask, qs, sc := blk[0:32], blk[32:96], blk[96:108]
		var maxScale, amax float32
		for j := range QK_K / 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := absf(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		clear(sc)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range QK_K / 16 {
				l := int8(nearestInt(float32(iscale * scales[j])))
				l = max(-32, min(31, l)) + 32
				if j < 8 {
					sc[j] = byte(l) & 0x0f
				} else {
					sc[j-8] |= (byte(l) & 0x0f) << 4
				}
				l >>= 4
				sc[j%4+8] |= byte(l) << (2 * (j / 4))
			}
			putF16(blk[108:], 1/iscale)
		} else {
			putF16(blk[108:], 0)
		}
		d := f16At(blk, 108)
		for j := range QK_K / 16 {
			dl := float32(d * float32(q3Scale(sc, j)-32))
			if dl == 0 {
				continue
			}
			for ii := range 16 {
				L[16*j+ii] = int8(max(-4, min(3, nearestInt(x[16*j+ii]/dl))) + 4)
			}
		}
		clear(hmask)
		m, hm := 0, byte(1)
		for j := range QK_K {
			if L[j] > 3 {
				hmask[m] |= hm
				L[j] -= 4
			}
			if m++; m == QK_K/8 {
				m, hm = 0, hm<<1
			}
		}
		for h := range 2 {
			for l := range 32 {
				j := 128 * h
				qs[32*h+l] = byte(L[j+l]) | byte(L[j+l+32])<<2 | byte(L[j+l+64])<<4 | byte(L[j+l+96])<<6
			}
		}
	}
}

// packScaleMinK4 stores 6-bit ls and lm of sub-block j as ScaleMinK4 reads
// them (sc must start zeroed for j >= 4's OR).
func packScaleMinK4(sc []byte, j int, ls, lm uint8) {
	if j < 4 {
		sc[j], sc[j+4] = ls, lm
		return
	}
	sc[j+4] = ls&0x0f | (lm&0x0f)<<4
	sc[j-4] |= (ls >> 4) << 6
	sc[j] |= (lm >> 4) << 6
}

// quantizeK4 is the part Q4_K and Q5_K share: the 8 sub-block fits, the
// packed scales and the super-block d and dmin, then the requantized levels
// (0..nmax) in L.
func quantizeK4(x []float32, head []byte, nmax int32, rmin, rdelta float32, nstep int, L *[QK_K]uint8) {
	var laux [32]uint8
	var weights [32]float32
	var mins, scales [QK_K / 32]float32
	var maxScale, maxMin float32
	for j := range QK_K / 32 {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrtf(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + absf(v)
		}
		scales[j], mins[j] = makeQkx2Quants(nmax, xs, weights[:], L[32*j:32*j+32], laux[:], rmin, rdelta, nstep, false)
		maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	sc := head[4:16]
	clear(sc)
	for j := range QK_K / 32 {
		ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
		lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
		packScaleMinK4(sc, j, ls, lm)
	}
	putF16(head[0:], maxScale/63)
	putF16(head[2:], maxMin/63)
	d, dmin := f16At(head, 0), f16At(head, 2)
	for j := range QK_K / 32 {
		s, m := ScaleMinK4(j, sc)
		dl := float32(d * float32(s))
		if dl == 0 {
			continue
		}
		dm := float32(dmin * float32(m))
		for ii := range 32 {
			L[32*j+ii] = uint8(max(0, min(nmax, nearestInt((x[32*j+ii]+dm)/dl))))
		}
	}
}

// QuantizeRowQ4_K is quantize_row_q4_K_ref.
func QuantizeRowQ4_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	for b := 0; b < len(src)/QK_K; b++ {
		blk := dst[b*Q4_KBlockLen : (b+1)*Q4_KBlockLen]
		quantizeK4(src[b*QK_K:(b+1)*QK_K], blk, 15, -1, 0.1, 20, &L)
		qs := blk[16:144]
		for p := range 4 {
			for l := range 32 {
				qs[32*p+l] = L[64*p+l] | L[64*p+l+32]<<4
			}
		}
	}
}

// QuantizeRowQ5_K is quantize_row_q5_K_ref.
func QuantizeRowQ5_K(dst []byte, src []float32) {
	var L [QK_K]uint8
	for b := 0; b < len(src)/QK_K; b++ {
		blk := dst[b*Q5_KBlockLen : (b+1)*Q5_KBlockLen]
		quantizeK4(src[b*QK_K:(b+1)*QK_K], blk, 31, -0.5, 0.1, 15, &L)
		qh, ql := blk[16:48], blk[48:176]
		clear(qh)
		for p := range 4 {
			m1, m2 := byte(1)<<(2*p), byte(2)<<(2*p)
			for j := range 32 {
				l1, l2 := L[64*p+j], L[64*p+j+32]
				if l1 > 15 {
					l1 -= 16
					qh[j] |= m1
				}
				if l2 > 15 {
					l2 -= 16
					qh[j] |= m2
				}
				ql[32*p+j] = l1 | l2<<4
			}
		}
	}
}

// QuantizeRowQ6_K is quantize_row_q6_K_ref.
func QuantizeRowQ6_K(dst []byte, src []float32) {
	var L [QK_K]int8
	var scales [QK_K / 16]float32
	for b := 0; b < len(src)/QK_K; b++ {
		x := src[b*QK_K : (b+1)*QK_K]
		blk := dst[b*Q6_KBlockLen : (b+1)*Q6_KBlockLen]
		var maxScale, maxAbs float32
		for ib := range QK_K / 16 {
			scales[ib] = makeQxQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			if a := absf(scales[ib]); a > maxAbs {
				maxAbs, maxScale = a, scales[ib]
			}
		}
		if maxAbs < groupMaxEps {
			clear(blk)
			continue
		}
		ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
		iscale := -128 / maxScale
		putF16(blk[208:], 1/iscale)
		for ib := range QK_K / 16 {
			sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		d := f16At(blk, 208)
		for j := range QK_K / 16 {
			dl := float32(d * float32(int8(sc[j])))
			if dl == 0 {
				continue
			}
			for ii := range 16 {
				L[16*j+ii] = int8(max(-32, min(31, nearestInt(x[16*j+ii]/dl))) + 32)
			}
		}
		for h := range 2 {
			j := 128 * h
			for l := range 32 {
				q1, q2 := byte(L[j+l])&0x0f, byte(L[j+l+32])&0x0f
				q3, q4 := byte(L[j+l+64])&0x0f, byte(L[j+l+96])&0x0f
				ql[64*h+l] = q1 | q3<<4
				ql[64*h+l+32] = q2 | q4<<4
				qh[32*h+l] = byte(L[j+l])>>4 | byte(L[j+l+32])>>4<<2 | byte(L[j+l+64])>>4<<4 | byte(L[j+l+96])>>4<<6
			}
		}
	}
}

// QuantizeRowQ8_K is quantize_row_q8_K_ref: the signed value of largest
// magnitude maps to -127 (so q = min(127, round(-127·x/max))), d = max/-127
// as float32, and bsums the sums of each 16 quants.
func QuantizeRowQ8_K(dst []byte, src []float32) {
	for b := 0; b < len(src)/QK_K; b++ {
		x := src[b*QK_K : (b+1)*QK_K]
		blk := dst[b*Q8_KBlockLen : (b+1)*Q8_KBlockLen]
		var mx, amax float32
		for _, v := range x {
			if a := absf(v); a > amax {
				amax, mx = a, v
			}
		}
		if amax == 0 {
			// ggml leaves bsums unwritten here; zero is their value.
			clear(blk)
			continue
		}
		iscale := -127 / mx
		qs := blk[4 : 4+QK_K]
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(float32(iscale*v)))))
		}
		for j := range QK_K / 16 {
			var sum int16
			for _, q := range qs[16*j : 16*j+16] {
				sum += int16(int8(q))
			}
			binary.LittleEndian.PutUint16(blk[4+QK_K+2*j:], uint16(sum))
		}
		binary.LittleEndian.PutUint32(blk, math.Float32bits(1/iscale))
	}
}
