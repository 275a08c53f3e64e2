//go:build amd64 && !purego

package kernels

// addAsm is the residual add of the fast sets: dst[i] += a[i] by VADDPS, 8
// lanes at a time with dst's value as the first operand (as the generic
// loop's ADDSS has it), the last len%8 by the generic loop: one IEEE add per
// element either way, so addGeneric's bits (TestAddVsRef, NaNs compared as
// NaNs). In a 32-sequence decode step of the 110m Q8_0 model at
// one thread the generic loop was 1.8% of the time.
func addAsm(dst, a []float32) {
	n := len(dst)
	a = a[:n]
	full := n &^ 7
	if full > 0 {
		addAVX2(&dst[0], &a[0], full)
	}
	addGeneric(dst[full:], a[full:])
}

// addAVX2 sets dst[i] += a[i] for i < n (a positive multiple of 8).
//
//go:noescape
func addAVX2(dst, a *float32, n int)

func init() {
	addSelector(func(c isaLevel) {
		addImpl = addGeneric
		if c >= isaAVX2 && cpuAVX2 {
			addImpl = addAsm
		}
	})
}
