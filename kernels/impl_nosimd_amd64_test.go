//go:build amd64 && !purego && !goexperiment.simd

package kernels_test

// withArchsimd is the Impl name of set s in this build: without
// GOEXPERIMENT=simd there are no archsimd kernels.
func withArchsimd(s string) string { return s }
