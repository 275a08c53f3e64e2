//go:build amd64 && !purego

package kernels

// The AVX-512 SwiGLU (swiglu_amd64.s): llama2.c's g·(1/(1+e^-g))·up with
// the same float32 operations in the same order, the exp being the float32
// polynomial of exp_amd64.go (relative error ≤ expMaxRelErr; expF32x16 in
// the archsimd build is the same code, and the oracle of TestSwiGLUAsm)
// instead of float64 math.Exp rounded to float32. math.Exp was ~7% of 1b
// prefill and 17% of a 32-sequence 110m decode once the Q8_0 kernel was
// fast. Lanes are independent, and a short last vector is computed in a
// padded copy by the same instructions, so an element's bits never depend
// on where it falls in a call (batch invariance).
//
// Against swiGLUGeneric, for every finite result:
//
//	|got − want| ≤ swiGLUMaxRelErr·|want| + 2^-119·|up| + 2^-148.
//
// swiGLUMaxRelErr: each side is within, relative to the exact silu(g)·up,
// its exp's error (expMaxRelErr = 1.5e-7 here, 2^-24 for the rounded
// math.Exp) plus one rounding (2^-24) for each of 1+e, the reciprocal, g·r
// and ·up: 1.5e-7 + 9·2^-24 ≈ 6.9e-7 in all, rounded up to 1e-6 (8.4 ulp).
// The absolute terms: for g < -87.3 the generic reciprocal is subnormal and
// the vector exp saturates to +Inf above expOver (result −0), but there
// |silu(g)| ≤ 87.3·e^-87.3 < 2^-119; a result that is itself subnormal may
// round differently (2^-148). Results near MaxFloat32 may overflow on one
// side only.
//
// Special values: NaN gives NaN, silu(+Inf) = +Inf, and silu(−Inf) = −0 (the
// limit), where the generic formula computes −Inf·0 = NaN; so dst = −0·up
// there (NaN only when up is ±Inf or NaN).
const swiGLUMaxRelErr = 1e-6

func init() {
	addSelector(func(c isaLevel) {
		if !archsimdBuild {
			// The archsimd build's selector (which runs first) resets
			// it, and installs its own under the avx2 cap.
			swiGLUImpl = swiGLUGeneric
		}
		if c >= isaAVX512 && cpuAVX512 {
			swiGLUImpl = swiGLUAsm
		}
	})
}

// swiGLUAsm is SwiGLU over whole vectors of 16 in assembly and the last
// len%16 values in a padded copy.
func swiGLUAsm(dst, gate, up []float32) {
	n := len(dst)
	gate, up = gate[:n], up[:n]
	m := n &^ 15
	if m > 0 {
		swiGLU16Asm(&dst[0], &gate[0], &up[0], m/16)
	}
	if m < n {
		var g, u, d [16]float32
		copy(g[:], gate[m:])
		copy(u[:], up[m:])
		swiGLU16Asm(&d[0], &g[0], &u[0], 1)
		copy(dst[m:], d[:n-m])
	}
}

// swiGLU16Asm computes dst[i] = silu(gate[i])·up[i] for nv vectors of 16.
//
//go:noescape
func swiGLU16Asm(dst, gate, up *float32, nv int)
