//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"math"

	"simd/archsimd"
)

// The archsimd SwiGLU: the same float32 operations, lane for lane, as the
// assembly one (swiglu_amd64.s; its tolerance against swiGLUGeneric is
// derived in swiglu_amd64.go), which the default build installs; this one
// is its oracle and the GOEXPERIMENT=simd build's opt-in.

func init() {
	addSelector(func(c isaLevel) {
		swiGLUImpl = swiGLUGeneric
		if c >= isaAVX2 && archsimd.X86.AVX2() && archsimd.X86.FMA() {
			swiGLUImpl, archsimdRows = swiGLUSIMD, true
		}
	})
}

func swiGLUSIMD(dst, gate, up []float32) {
	gate, up = gate[:len(dst)], up[:len(dst)]
	if level == isaAVX512 {
		swiGLU16(dst, gate, up)
	} else {
		swiGLU8(dst, gate, up)
	}
}

func swiGLU16(dst, gate, up []float32) {
	j := 0
	for ; j+16 <= len(dst); j += 16 {
		g := archsimd.LoadFloat32x16Slice(gate[j : j+16])
		u := archsimd.LoadFloat32x16Slice(up[j : j+16])
		silu16(g).Mul(u).StoreSlice(dst[j : j+16])
	}
	if j < len(dst) {
		storePart16(silu16(loadPart16(gate[j:])).Mul(loadPart16(up[j:])), dst[j:])
	}
}

// silu16 is g·(1/(1+e^-g)) per lane, −0 for g = −Inf.
func silu16(g archsimd.Float32x16) archsimd.Float32x16 {
	one := archsimd.BroadcastFloat32x16(1)
	e := expF32x16(archsimd.BroadcastFloat32x16(0).Sub(g))
	s := g.Mul(one.Div(one.Add(e)))
	negInf := archsimd.BroadcastFloat32x16(float32(math.Inf(-1)))
	return archsimd.BroadcastFloat32x16(float32(math.Copysign(0, -1))).Merge(s, g.Equal(negInf))
}

func swiGLU8(dst, gate, up []float32) {
	j := 0
	for ; j+8 <= len(dst); j += 8 {
		g := archsimd.LoadFloat32x8Slice(gate[j : j+8])
		u := archsimd.LoadFloat32x8Slice(up[j : j+8])
		silu8(g).Mul(u).StoreSlice(dst[j : j+8])
	}
	if j < len(dst) {
		storePart8(silu8(loadPart8(gate[j:])).Mul(loadPart8(up[j:])), dst[j:])
	}
}

// silu8 is silu16 on 8 lanes (AVX2).
func silu8(g archsimd.Float32x8) archsimd.Float32x8 {
	one := archsimd.BroadcastFloat32x8(1)
	e := expF32x8(archsimd.BroadcastFloat32x8(0).Sub(g))
	s := g.Mul(one.Div(one.Add(e)))
	negInf := archsimd.BroadcastFloat32x8(float32(math.Inf(-1)))
	return archsimd.BroadcastFloat32x8(float32(math.Copysign(0, -1))).Merge(s, g.Equal(negInf))
}
