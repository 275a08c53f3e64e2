//go:build amd64 && !purego

package kernels

// swiGLUAsm is the FFN gate of the default build's fast sets: the archsimd
// build's swiGLU8 (silu8: g·(1/(1+e^−g)) with exp.go's float32 exp, −0 for
// g = −Inf, times up) with its loop in assembly (swiglu_amd64.s); the last
// len%8 values go through a zero-padded block. Against swiGLUGeneric (= ref's
// float64 math.Exp) it differs by the exp's error and the float32 division,
// within TestSwiGLUAsm's bound. Each output depends on its own inputs only.
// At stories260K (hidden 172) the generic gate's math.Exp was 18% of a
// one-thread decode.
func swiGLUAsm(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	full := n &^ 7
	if full > 0 {
		swiGLUAVX2(&dst[0], &gate[0], &up[0], full)
	}
	if full < n {
		var g, u, d [8]float32
		copy(g[:], gate[full:])
		copy(u[:], up[full:])
		swiGLUAVX2(&d[0], &g[0], &u[0], 8)
		copy(dst[full:], d[:])
	}
}

//go:noescape
func swiGLUAVX2(dst, gate, up *float32, n int)

// The default build's avx2 and avx512 sets use swiGLUAsm; a
// GOEXPERIMENT=simd build keeps its archsimd selector.
func init() {
	if archsimdBuild {
		return
	}
	addSelector(func(c isaLevel) {
		swiGLUImpl = swiGLUGeneric
		if c >= isaAVX2 && cpuAVX2 {
			swiGLUImpl = swiGLUAsm
		}
	})
}
