//go:build !purego && !(goexperiment.simd && amd64)

package kernels_test

// wantImpl is the kernel set this build must dispatch to: without
// GOEXPERIMENT=simd on amd64 there is no fast path.
var wantImpl = "generic"

// haveSIMD is whether this build compiles the archsimd kernels.
const haveSIMD = false
