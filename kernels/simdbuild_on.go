//go:build goexperiment.simd && amd64 && !purego

package kernels

// archsimdBuild is whether this build has the archsimd kernels
// (GOEXPERIMENT=simd on amd64).
const archsimdBuild = true
