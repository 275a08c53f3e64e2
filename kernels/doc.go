// Package kernels is the math of a forward pass on plain slices: matrix-vector
// and matrix-matrix products over F32/F16/BF16/Q8_0/Q4_0 weights (and ggml's
// other block types, K-quants included), RMSNorm, RoPE, softmax, SiLU/SwiGLU,
// GeGLU, soft-capping, residual add and masked (GQA, sliding-window, tree)
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
//     activations once per call to int8 per 32-block (llama.cpp's q8_0, its
//     scale rounded to binary16 as ggml stores it) and
//     take exact integer dot products; for Q4_K/Q5_K/Q6_K weights likewise
//     per 256-block to Q8_K (actq8k.go, matqk_amd64.go: the same bits on
//     the AVX2, AVX-512 and VNNI sets). They keep batch invariance: each
//     output element's operation order depends only on the shapes (and the
//     kernel set), never on n or the thread split. Building with the
//     `purego` tag excludes them. Impl names the set in use ("generic",
//     "avx2", "avx512", "avx512-vnni", "avx512-amx"; on arm64 "neon",
//     "neon-dotprod").
//   - The environment variable SLUICE_ISA (generic, avx2, avx512 or
//     avx512-amx on amd64; generic, neon or neon-dotprod on arm64), read
//     once at init, caps what the selector may pick, so the narrower sets
//     can be run and measured on a wider machine; tests reselect with every
//     cap the CPU allows (TestKernelSets). SLUICE_ISA=avx512 is the VNNI
//     set on a CPU with AMX.
//   - "avx512-amx" (matq_amx_amd64.go) is the VNNI set with AMX-INT8 tile
//     kernels for batches over PanelQ8_0 and PanelQ4_0 weights, where the
//     CPU has AMX-TILE and AMX-INT8 and Linux grants the tile state
//     (arch_prctl, asked once): one TDPBSSD takes the exact int32 block
//     dots of 16 inputs × 16 rows, each then taking canon's float step, so
//     its Q8_0 and Q4_0 bits are the VNNI and AVX2 sets' (Q4_0 is laid
//     out in panels there as on those sets; row-major batches are copied
//     into panels in scratch, a row block at a time, and take the tiles
//     too). Calls of fewer than 16 inputs, and the inputs after the last
//     whole group of 16, run the VNNI set's kernels; the
//     activations are grouped by 16 (actQ8.gw) under this set. Each
//     assembly call configures and releases the tiles itself.
//   - On arm64 (dispatch_arm64.go, `arm64 && !purego`) the same kernels are
//     NEON assembly: the five matrix products, the Q4_K/Q5_K/Q6_K products
//     over Q8_K activations (matqk_arm64.go: the amd64 sets' arithmetic and
//     bits), activation quantization for Q8_0/Q4_0 (bit-identical to
//     quantizeBlockQ8; Q8_K activations use the portable quantizer) and
//     attention's score dots and value sums over float32 or binary16 KV
//     pages (FCVTL widening, the float32 pages' bits on f16-exact values).
//     Integer block sums use SDOT where the CPU has the dot-product
//     extension ("neon-dotprod"), else SMULL/SADALP ("neon"); both are
//     exact and share the float steps, so the two sets give the same
//     bits. F16 weights are widened by FCVTL and multiplied in float32
//     (no half-precision FMLA: it would round every product to f16). The
//     CI runs them under qemu-user (make test-arm64), on qemu's "max" CPU
//     and on a Cortex-A53 model (no dot product); speed is unmeasured
//     there, see "ARM64 cost per block" below.
//   - Attention's score dots, softmax and value sums are assembly too
//     (AVX2 and FMA, on both fast sets, head dims that are multiples of 8; the
//     softmax's exp is the archsimd build's float32 polynomial, on 16 lanes
//     with AVX-512), and so is SwiGLU (swiglu_amd64.go, 8 lanes, the same
//     exp). The attention kernels take every head of a query row in one
//     call per run of visible slots, slot-major (each KV row read once,
//     front to back: many sequences' KV comes from memory each step), with
//     one assembly body for float32 and binary16 pages (the load widens or
//     not); a prompt chunk's rows go up to eight at a time through each
//     KV page (attnRowBlockAVX2); each item's operations are fixed by its
//     shape and visible slots, not by how many rows, heads or slots a call
//     covers.
//     RMSNorm and RoPE stay generic in the default build.
//   - Q8_0 and Q4_0 on the VNNI and AVX2 sets have one float order for
//     both weight layouts (matq8_vnni_amd64.go, matq8_avx2_amd64.go,
//     matq4_vnni_amd64.go, matq4_avx2_amd64.go): per (row, block) the
//     exact integer dot, then acc = fma(float32(dot), dW·dX, acc) in block
//     order. The AVX2 (and AVX-512 without VNNI) and VNNI sets thus give
//     Q8_0 the same bits, and Q4_0 the same bits. The AVX2 integer dot
//     needs no VNNI (VPMADDUBSW, VPMADDWD, as ggml's AVX2 code), so an
//     AVX2-only CPU runs it. A Weight in Layout PanelQ8_0 or PanelQ4_0
//     (Repack, done in place by a store on bytes it owns; Q4_0 only where
//     the installed set has its panel kernel) therefore gives the
//     row-major weight's bits; the sets without a panel kernel honour the
//     layout by copying panels back to rows, and the row-major kernels run
//     batches through panels they make in scratch.
//   - The archsimd code (*_simd_amd64.go, GOEXPERIMENT=simd only) stays, as
//     an oracle and an opt-in, not as a dispatch target for the matrix
//     products: the assembly tests compare the AVX-512 and AVX2 float
//     kernels against the archsimd ones bit for bit (a stronger check than
//     ref's tolerance, and the reason to keep it; the Q8_0 and Q4_0
//     kernels follow their own order, checked bit for bit against its
//     plain Go form); its row-wise kernels
//     (attention with its AVX-512 tiles, softmax, SwiGLU, activation
//     quantization) are installed in that build only, and Impl then ends
//     in "+archsimd". Nothing fast needs the experiment any more; the
//     archsimd files can go once its API settles or the oracle tests are
//     no longer wanted.
//
// # ARM64 cost per block
//
// Instructions per 32 weights of one output row in decode, counted from
// the assembly, against ggml's NEON code (ggml-cpu's arm quants.c and its
// float vec_dot, one row per call, counted from its C source, not from
// compiled code), so that a session on real Arm hardware knows what to
// measure first. Our decode runs 4 rows per call: the activation loads and
// the loop's SUBS/B are shared by four rows (counted as a quarter).
//
//	Q8_0 neon-dotprod: scale load + table load (f16→f32, Inf→NaN) + one
//	  32-byte LD1; MOVI 0, 2 SDOT; ADDV, SCVTF, FMUL, FMADD; ¼ of 4 shared:
//	  11. ggml: 4 LD1 of 16 B (weights and activations), 2 f16 scale loads
//	  and conversions + FMUL, 2 MOVI 0 + 2 SDOT + ADD, SCVTF, FMLA by
//	  scalar into 4 lanes (reduced once per row, where we ADDV per block):
//	  about 16. Our activations carry float32 scales (no conversion) and
//	  are loaded once for four rows.
//	Q4_0 neon-dotprod: as Q8_0 with a 16-byte LD1, then USHR, AND and 2
//	  SUB to signed bytes: 15. ggml: the same unpacking, about 19.
//	Q8_0/Q4_0 neon: each SDOT pair becomes SMULL, SADDLP, SMULL2 and
//	  SADALP ×3: 16 / 20. ggml's fallback (vmull_s8, vpaddlq_s16 and
//	  vaddq_s32 per half) is about 6 more.
//	F32: 4 LD1 of 32 B and 8 FMLA, ¼ of 4 shared LD1 + 4 SUBS/B: 15.
//	  ggml (4 chains of 4 lanes, one row): 8 weight + 8 activation loads
//	  of 16 B (fewer if paired), 8 FMLA: 16–24.
//	F16: F32 plus FCVTL and FCVTL2 per 8 weights: 23, at half the bytes.
//	  ggml with FP16 vector arithmetic converts the activations to f16 and
//	  multiplies and accumulates in f16, 8 lanes per FMLA: about half our
//	  count, and less exact than the float32 products kept here.
//	BF16: F32 plus ZIP1 and ZIP2 against zero per 8 weights: 23.
//	Attention, per slot and 8 dims: 1 LD1 of K (32 B), 2 FMLA, ¼ of a q
//	  load (4 slots a call); value sums: LD1 of V, 2 FMLA by a broadcast
//	  weight (LD1R), the output kept in registers 16 floats at a time.
//	  Over F16 pages: a 16-byte LD1 plus FCVTL and FCVTL2 per 8 dims, at
//	  half the bytes.
//
// K-quants per 32 weights (a super-block's count over 8), one row against
// one input as ggml's ggml_vec_dot_q{4,5,6}_K_q8_K NEON paths (counted from
// their C source, SDOT form, not from compiled code). These are counts, not
// speeds: under qemu-user the kernels are only checked for their bits.
//
//	Q4_K neon-dotprod: 101 per super-block, 12.6. The 12 scale bytes are
//	  unpacked in 32-bit words (22 with the widening to int32); per 64
//	  weights 1 LD1 of 32 B, AND and USHR ×2, one 64-byte activation LD1,
//	  MOVI 0 + 2 SDOT per sub-block and an MLA by element (the sub-block's
//	  scale) into one int32 vector, reduced once; mins by ADDP, SMULL,
//	  SMLAL2; 9 float steps. ggml: about 115 (14.4), with an ADDV, a scale
//	  byte load and a scalar multiply-add per sub-block where we MLA.
//	Q5_K neon-dotprod: 134, 16.8: Q4_K plus the high bits, inserted by
//	  SLI/SRI (AND, SHL, SRI for the high nibble, AND, SLI for the low,
//	  USHR of qh: 6 per 16 bytes). ggml (AND, SHL, OR per level vector,
//	  the nibble AND/USHR, ADDV per sub-block): about 165, 20.6.
//	Q6_K neon-dotprod: 117, 14.6: per 128 weights 2 LD1 and 16 bit
//	  operations (the 2-bit highs joined by SRI/SLI, no masking of the
//	  nibbles), then MOVI 0 + SDOT + MLA by element per 16 weights; the
//	  −32 offset is taken once per super-block from the bsums (SMULL,
//	  SMLAL ×3, SHL, NEG). ggml (AND/SHL or USHR/AND/SHL per
//	  high-bit vector, AND or USHR and ORR per level vector, ADDV and a
//	  scalar multiply-add per 16 weights): about 185, 23.
//	neon (no dot product): the levels are below 64, so SMULL and SMLAL2
//	  (SMLAL, SMLAL2 for a second 16 bytes) sum up to four products in
//	  each int16 lane exactly and one SADDLP widens them: MOVI+2 SDOT
//	  becomes 5 instructions, MOVI+SDOT 3. Q4_K 117 (14.6), Q5_K 150
//	  (18.8), Q6_K 133 (16.6); ggml's fallback dot (SMULL ×2, SADDLP ×2,
//	  ADD ×2 per 16 bytes) costs more per SDOT it replaces.
//	Batched tiles (1 row × 4 inputs) unpack each weight block once for
//	  four inputs and take the float steps on four lanes: Q4_K 231 per
//	  super-block and four inputs, 7.2 per 32 weights and input.
//
// Batched tiles (2 rows × 4 inputs) load each weight block once for four
// inputs; ggml's NEON has no such tile for Q8_0/Q4_0 outside its i8mm
// (SMMLA, 2×2) and repacked paths, which this package does not use on Arm.
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
