//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestMatQ8_0AVX2 checks the AVX2 kernels over both layouts give exactly
// canonQ8_0's bits (the VNNI set's order) on every shape, sub-range, tile
// remainder and input count, including zero, subnormal, infinite and NaN
// scales and activations, and row blocks smaller than a panel block.
func TestMatQ8_0AVX2(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("SKIP avx2 Q8_0 kernels: CPU lacks AVX2+FMA+F16C")
	}
	defer func(v bool) { q8Major = v }(q8Major)
	q8Major = true
	checkQ8_0Kernels(t, rand.New(rand.NewPCG(13, 14)), matQ8_0AVX2, matQ8_0AVX2Panel)
}
