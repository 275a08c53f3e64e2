package kernels

// implName names the matrix kernel set in use: "generic", "avx2", "avx512"
// (AVX-512 float kernels, AVX2 integer ones: a CPU without VNNI),
// "avx512-vnni" or "avx512-amx" (VNNI plus AMX tiles for panel batches) on
// amd64; "neon" or "neon-dotprod" on arm64. Only a
// selector in a build-tagged fast-path file (never compiled with the purego
// tag) may change it, together with the dispatch variables it replaces.
var implName = "generic"

// archsimdRows is set when a GOEXPERIMENT=simd build has installed its
// archsimd row-wise kernels (attention, softmax, SwiGLU, activation
// quantization).
var archsimdRows = false

// Impl names the active kernel implementation: "generic" for portable Go
// (always the case when built with -tags purego or under SLUICE_ISA=generic),
// else the matrix kernel set ("avx2", "avx512", "avx512-vnni",
// "avx512-amx"; on arm64
// "neon", "neon-dotprod"), with "+archsimd" appended when a
// GOEXPERIMENT=simd build also runs its archsimd row-wise kernels. Tests assert it so a silently mis-dispatched build cannot
// pass for a fast one.
func Impl() string {
	if archsimdRows {
		return implName + "+archsimd"
	}
	return implName
}
