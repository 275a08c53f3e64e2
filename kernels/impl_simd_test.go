//go:build goexperiment.simd && amd64 && !purego

package kernels_test

// withArchsimd is the Impl name of set s in this build: GOEXPERIMENT=simd
// adds the archsimd row-wise kernels to every fast set.
func withArchsimd(s string) string { return s + "+archsimd" }
