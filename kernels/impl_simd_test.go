//go:build goexperiment.simd && amd64 && !purego

package kernels_test

import "simd/archsimd"

// haveSIMD is whether this build compiles the archsimd kernels (klauspost's
// haveSeqdecAsm pattern): the Impl test then demands the widest set this CPU
// supports, so a build that silently stays generic fails.
const haveSIMD = true

var wantImpl = func() string {
	switch {
	case archsimd.X86.AVX512() && archsimd.X86.FMA():
		return "avx512"
	case archsimd.X86.AVX2() && archsimd.X86.FMA():
		return "avx2"
	}
	return "generic"
}()
