//go:build goexperiment.simd && amd64 && !purego

package kernels

// UseAVX2 installs the 256-bit kernel sets (so an AVX-512 machine tests
// them too) and returns a func restoring the previous dispatch.
func UseAVX2() (restore func()) {
	restore, _ = SetISA("avx2")
	return restore
}
