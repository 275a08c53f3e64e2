//go:build !purego

package kernels_test

// wantImpl is the kernel set this build must dispatch to. The archsimd work
// adds a goexperiment.simd && amd64 variant of this file.
const wantImpl = "generic"
