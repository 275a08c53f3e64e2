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
//   - Fast paths replace the dispatch variables (`var xxxImpl = xxxGeneric`)
//     from a selector run at init (dispatch_amd64.go) after checking the CPU
//     with golang.org/x/sys/cpu. They are Go assembly, built in the default
//     amd64 build (`amd64 && !purego`, no GOEXPERIMENT): AVX-512 (VNNI for
//     Q8_0/Q4_0 where present) or AVX2+FMA+F16C. They are only promised to
//     be within a stated tolerance of ref (close_test.go derives it): they
//     use vector lanes and FMA, and for Q8_0/Q4_0 weights they quantize the
//     activations once per call to int8 per 32-block (llama.cpp's q8_0) and
//     take exact integer dot products. They keep batch invariance: each
//     output element's operation order depends only on the shapes (and the
//     kernel set), never on n or the thread split. Building with the
//     `purego` tag excludes them. Impl names the set in use ("generic",
//     "avx2", "avx512", "avx512-vnni").
//   - The environment variable SLUICE_ISA (generic, avx2 or avx512), read
//     once at init, caps what the selector may pick, so the narrower sets
//     can be run and measured on a wider machine; tests reselect with every
//     cap the CPU allows (TestKernelSets).
//   - Attention's score dots and value sums are assembly too (AVX2 + FMA,
//     on both fast sets, head dims that are multiples of 8), and SwiGLU on
//     the AVX-512 sets (swiglu_amd64.go); softmax, RMSNorm and RoPE stay
//     generic in the default build.
//   - Q8_0 on the VNNI set has one float order for both weight layouts
//     (matq8_vnni_amd64.go): per (row, block) the exact integer dot, then
//     acc = fma(float32(dot), dW·dX, acc) in block order. A Weight in
//     Layout PanelQ8_0 (Repack, done in place by a store on bytes it owns)
//     therefore gives the row-major weight's bits; the sets without a
//     panel kernel honour the layout by copying panels back to rows.
//   - The archsimd code (*_simd_amd64.go, GOEXPERIMENT=simd only) stays, as
//     an oracle and an opt-in, not as a dispatch target for the matrix
//     products: the assembly tests compare the AVX-512 and AVX2 matrix
//     kernels against the archsimd ones bit for bit (a stronger check than
//     ref's tolerance, and the reason to keep it); its row-wise kernels
//     (attention with its AVX-512 tiles, softmax, SwiGLU, activation
//     quantization) are installed in that build only, and Impl then ends
//     in "+archsimd". Nothing fast needs the experiment any more; the
//     archsimd files can go once its API settles or the oracle tests are
//     no longer wanted.
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
