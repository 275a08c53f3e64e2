//go:build goexperiment.simd && amd64 && !purego

package kernels

// UseAVX2 installs the 256-bit kernel set (so an AVX-512 machine tests it too)
// and returns a func restoring the previous dispatch.
func UseAVX2() (restore func()) {
	f32, f16, bf16, q8, q4, name := matF32Impl, matF16Impl, matBF16Impl, matQ8_0ActImpl, matQ4_0ActImpl, implName
	setAVX2()
	return func() {
		matF32Impl, matF16Impl, matBF16Impl, matQ8_0ActImpl, matQ4_0ActImpl, implName = f32, f16, bf16, q8, q4, name
	}
}

// SetRowBlockBytes sets the weight bytes a batched kernel keeps hot per input
// tile (small values force many row blocks) and returns a func restoring it.
func SetRowBlockBytes(v int) (restore func()) {
	old := rowBlockBytes
	rowBlockBytes = v
	return func() { rowBlockBytes = old }
}
