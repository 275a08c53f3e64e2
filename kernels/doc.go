// Package kernels is the math of a forward pass on plain slices: matrix-vector
// and matrix-matrix products over F32/F16/BF16/Q8_0/Q4_0 weights, RMSNorm, RoPE,
// softmax, SiLU/SwiGLU, residual add and masked (GQA, sliding-window, tree)
// attention over a paged KV cache.
//
// # Reference, generic and fast paths
//
// Every kernel has three implementations with one contract:
//
//   - kernels/ref is the slow, obviously-correct oracle (model/ref calls it).
//   - The *Generic functions in *_generic.go are portable Go and produce results
//     bit-identical to kernels/ref: they perform the same float32 operations in
//     the same order, only with less copying and with threads. The end-to-end
//     test relies on this (engine logits == model/ref logits, bit for bit).
//   - Fast paths (GOEXPERIMENT=simd on amd64: *_simd_amd64.go) replace the
//     dispatch variables (`var xxxImpl = xxxGeneric`) from an init() after
//     checking the CPU (AVX-512 or AVX2+FMA), and are only promised to be
//     within a stated tolerance of ref (close_test.go derives it): they use
//     vector lanes and FMA, and for Q8_0/Q4_0 weights they quantize the
//     activations once per call to int8 per 32-block (llama.cpp's q8_0) and
//     take exact integer dot products. They keep batch invariance: each output
//     element's operation order depends only on the shapes, never on n or the
//     thread split. Building with the `purego` tag excludes them; Impl reports
//     which set is active ("generic", "avx2" or "avx512").
//   - On AVX-512 the matrix kernels are Go assembly under the same build tags
//     (VNNI VPDPBUSD, VCVTPH2PS and prefetch, which archsimd lacks), each
//     bit-identical to the archsimd kernel it replaces, which the tests use
//     as its oracle (see docs/ARCHITECTURE.md, "Assembly under the same tags").
//
// # Float recipe shared with kernels/ref
//
// Reductions accumulate in float32 strictly left to right (llama2.c's
// `val += w[i*n+j] * x[j]`). Each product is written float32(a*b): an explicit
// conversion forbids the compiler from fusing the multiply and the add into an
// FMA (Go spec, "Floating-point operators"), which it may otherwise do on some
// architectures or GOAMD64 levels and which would break bit identity between
// two differently shaped loops. exp, sqrt, pow, sin and cos are computed in
// float64 by package math and rounded once to float32.
//
// # Batch invariance
//
// The value of every output element depends only on its own inputs, never on
// how many rows are in a call or on the thread count: threads split output
// elements, never a reduction.
//
// Shape errors (a slice too short for the stated dimensions) are programming
// errors and panic with a message naming the kernel and the sizes, as slice
// indexing would; Weight.Validate reports a bad weight as an error up front.
package kernels
