//go:build amd64 && !purego

#include "textflag.h"

// F32, F16 and BF16 weights against float32 inputs with AVX2 + FMA + F16C.
// See matfloat_avx2_amd64.go: every output (weight row r, input i) is one
// 8-lane chain
//
//	acc = fma(float32(W[r, j:j+8]), x[i, j:j+8], acc)   j = 0, 8, …, cols&^7 − 8
//
// then, when cols%8 = t ≠ 0, one more step over the last 8 elements
// (cols−8 … cols−1) with the lanes already counted (the first 8−t) zeroed
// in both weight and input, then hsum8's lane-sum tree. That is fixed by
// cols alone: the 3×C and 2×C tiles and the 8-row decode kernel compute it
// alike, each product with the weight as the FMA's first source and the
// input as its second (so that even a NaN payload comes out the same).
// Weights convert exactly: F16 by VCVTPH2PS, BF16 by widening and shifting
// 16 bits up.

// tailMask<>+4t is the mask of the last step for t = cols%8: lanes 8−t…7.
DATA tailMask<>+0(SB)/8, $0
DATA tailMask<>+8(SB)/8, $0
DATA tailMask<>+16(SB)/8, $0
DATA tailMask<>+24(SB)/8, $0
DATA tailMask<>+32(SB)/8, $-1
DATA tailMask<>+40(SB)/8, $-1
DATA tailMask<>+48(SB)/8, $-1
DATA tailMask<>+56(SB)/8, $-1
GLOBL tailMask<>(SB), RODATA|NOPTR, $64

// Element loads: 8 weights at element index J of row P into Y, as float32.
#define LDF32(P, J, Y) VMOVUPS (P)(J*4), Y
#define LDF16(P, J, Y) VCVTPH2PS (P)(J*2), Y
#define LDBF16(P, J, Y) VPMOVZXWD (P)(J*2), Y; VPSLLD $16, Y, Y

// FMASKS sets R13 to cols (R14) rounded down to 8, R11 to cols−8 (the
// tail step's start) and Y15 to the tail step's lane mask; leaves cols%8 in
// CX and clobbers R12.
#define FMASKS \
	MOVQ R14, R13; \
	ANDQ $~7, R13; \
	LEAQ -8(R14), R11; \
	MOVQ R14, CX; \
	ANDQ $7, CX; \
	LEAQ tailMask<>(SB), R12; \
	VMOVDQU (R12)(CX*4), Y15

// FHSUM leaves in X's low lane the sum of Y's lanes in hsum8's order.
#define FHSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

// ---- 2×C tiles (C ≤ 6): rows w0, w1 against C inputs, for F16 and BF16 ----
//
// Y12, Y13 hold the two rows' chunk, converted once for all C inputs; Y14
// takes one input chunk at a time (loaded once for both rows); the
// accumulators are Y0–Y5 (row 0, input c in Yc) and Y6–Y11 (row 1, Y6+c);
// Y15 is the tail mask. Inputs at SI, DI, R8, R9, R10, DX.

// TX loads input c's chunk at J into Y14 and adds its products with the
// two rows into A (row 0) and B (row 1); TXM masks the chunk first.
#define TX(XP, J, A, B) \
	VMOVUPS (XP)(J*4), Y14; \
	VFMADD231PS Y14, Y12, A; \
	VFMADD231PS Y14, Y13, B
#define TXM(XP, J, A, B) \
	VMOVUPS (XP)(J*4), Y14; \
	VANDPS Y15, Y14, Y14; \
	VFMADD231PS Y14, Y12, A; \
	VFMADD231PS Y14, Y13, B

#define TX1(J) TX(SI, J, Y0, Y6)
#define TX2(J) TX1(J); TX(DI, J, Y1, Y7)
#define TX3(J) TX2(J); TX(R8, J, Y2, Y8)
#define TX4(J) TX3(J); TX(R9, J, Y3, Y9)
#define TX5(J) TX4(J); TX(R10, J, Y4, Y10)
#define TX6(J) TX5(J); TX(DX, J, Y5, Y11)
#define TXM1(J) TXM(SI, J, Y0, Y6)
#define TXM2(J) TXM1(J); TXM(DI, J, Y1, Y7)
#define TXM3(J) TXM2(J); TXM(R8, J, Y2, Y8)
#define TXM4(J) TXM3(J); TXM(R9, J, Y3, Y9)
#define TXM5(J) TXM4(J); TXM(R10, J, Y4, Y10)
#define TXM6(J) TXM5(J); TXM(DX, J, Y5, Y11)

// TST stores input c's two sums at DI: row 1 at DI+R11 (R11 = 4·(nr−1)),
// then row 0 at DI. With nr = 1 row 1 is row 0 again, the same chain and
// value, so both stores write dst[0] and nothing past the tile is touched.
#define TST(A, AX_, B, BX_) \
	FHSUM(A, AX_, X14); \
	FHSUM(B, BX_, X14); \
	VMOVSS BX_, (DI)(R11*1); \
	VMOVSS AX_, (DI)

#define TST1 TST(Y0, X0, Y6, X6)
#define TST2 TST1; ADDQ R8, DI; TST(Y1, X1, Y7, X7)
#define TST3 TST2; ADDQ R8, DI; TST(Y2, X2, Y8, X8)
#define TST4 TST3; ADDQ R8, DI; TST(Y3, X3, Y9, X9)
#define TST5 TST4; ADDQ R8, DI; TST(Y4, X4, Y10, X10)
#define TST6 TST5; ADDQ R8, DI; TST(Y5, X5, Y11, X11)

// ZEROACC zeroes the twelve accumulators Y0–Y11 (shared by both tile
// shapes; the unused ones cost nothing that matters).
#define ZEROACC \
	VXORPS Y0, Y0, Y0; VXORPS Y1, Y1, Y1; VXORPS Y2, Y2, Y2; VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; VXORPS Y5, Y5, Y5; VXORPS Y6, Y6, Y6; VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; VXORPS Y9, Y9, Y9; VXORPS Y10, Y10, Y10; VXORPS Y11, Y11, Y11

// XPTRS points DI, R8, R9, R10, DX at inputs 1–5 (x at SI, cols in R14);
// pointers past the tile's C inputs are computed, never dereferenced.
#define XPTRS \
	LEAQ (SI)(R14*4), DI; \
	LEAQ (DI)(R14*4), R8; \
	LEAQ (R8)(R14*4), R9; \
	LEAQ (R9)(R14*4), R10; \
	LEAQ (R10)(R14*4), DX

// TILE2 defines name(dst *float32, dstStride uintptr, w0, w1, w2 *E, x
// *float32, cols, nr int) (avx2Tile's contract, w2 unused):
// dst[c·dstStride/4 + r] = row r · input c for r < nr (nr 1 or 2; a
// missing row 1 is passed as row 0 again) and c < C, input c at x +
// c·cols floats. cols ≥ 8.
#define TILE2(name, LD, TXC, TXMC, TSTC) \
TEXT name(SB), NOSPLIT, $0-64; \
	MOVQ cols+48(FP), R14; \
	FMASKS; \
	MOVQ w0+16(FP), AX; \
	MOVQ w1+24(FP), BX; \
	MOVQ x+40(FP), SI; \
	XPTRS; \
	ZEROACC; \
	XORQ R12, R12; \
loop: \
	LD(AX, R12, Y12); \
	LD(BX, R12, Y13); \
	TXC(R12); \
	ADDQ $8, R12; \
	CMPQ R12, R13; \
	JLT loop; \
	CMPQ R13, R14; \
	JGE done; \
	LD(AX, R11, Y12); \
	LD(BX, R11, Y13); \
	VANDPS Y15, Y12, Y12; \
	VANDPS Y15, Y13, Y13; \
	TXMC(R11); \
done: \
	MOVQ dst+0(FP), DI; \
	MOVQ dstStride+8(FP), R8; \
	MOVQ nr+56(FP), R11; \
	DECQ R11; \
	SHLQ $2, R11; \
	TSTC; \
	VZEROUPPER; \
	RET

TILE2(·f32AVX2Tile2x1, LDF32, TX1, TXM1, TST1)
TILE2(·f16AVX2Tile2x1, LDF16, TX1, TXM1, TST1)
TILE2(·f16AVX2Tile2x2, LDF16, TX2, TXM2, TST2)
TILE2(·f16AVX2Tile2x3, LDF16, TX3, TXM3, TST3)
TILE2(·f16AVX2Tile2x4, LDF16, TX4, TXM4, TST4)
TILE2(·f16AVX2Tile2x5, LDF16, TX5, TXM5, TST5)
TILE2(·f16AVX2Tile2x6, LDF16, TX6, TXM6, TST6)
TILE2(·bf16AVX2Tile2x1, LDBF16, TX1, TXM1, TST1)
TILE2(·bf16AVX2Tile2x2, LDBF16, TX2, TXM2, TST2)
TILE2(·bf16AVX2Tile2x3, LDBF16, TX3, TXM3, TST3)
TILE2(·bf16AVX2Tile2x4, LDBF16, TX4, TXM4, TST4)
TILE2(·bf16AVX2Tile2x5, LDBF16, TX5, TXM5, TST5)
TILE2(·bf16AVX2Tile2x6, LDBF16, TX6, TXM6, TST6)

// ---- 3×C tiles (C ≤ 4): rows w0, w1, w2 against C inputs, for F32 ----
//
// Y12–Y14 hold the three rows' chunk, Y15 one input chunk at a time; the
// accumulators are Y(4k+c) for row k, input c; no register is left for the
// tail mask, so the tail step ANDs with it from memory (R15). Inputs at SI,
// DI, R8, R9.

#define T3X(XP, J, A, B, C) \
	VMOVUPS (XP)(J*4), Y15; \
	VFMADD231PS Y15, Y12, A; \
	VFMADD231PS Y15, Y13, B; \
	VFMADD231PS Y15, Y14, C
#define T3XM(XP, J, A, B, C) \
	VMOVUPS (XP)(J*4), Y15; \
	VANDPS (R15), Y15, Y15; \
	VFMADD231PS Y15, Y12, A; \
	VFMADD231PS Y15, Y13, B; \
	VFMADD231PS Y15, Y14, C

#define T3X1(J) T3X(SI, J, Y0, Y4, Y8)
#define T3X2(J) T3X1(J); T3X(DI, J, Y1, Y5, Y9)
#define T3X3(J) T3X2(J); T3X(R8, J, Y2, Y6, Y10)
#define T3X4(J) T3X3(J); T3X(R9, J, Y3, Y7, Y11)
#define T3XM1(J) T3XM(SI, J, Y0, Y4, Y8)
#define T3XM2(J) T3XM1(J); T3XM(DI, J, Y1, Y5, Y9)
#define T3XM3(J) T3XM2(J); T3XM(R8, J, Y2, Y6, Y10)
#define T3XM4(J) T3XM3(J); T3XM(R9, J, Y3, Y7, Y11)

// T3ST stores input c's three sums at DI: row k at DI + 4·min(k, nr−1)
// (R10 = min(1, nr−1), R11 = nr−1). A missing row repeats the last real
// one, the same chain and value, so its store rewrites that row's output
// with the same bits and nothing past the tile is touched.
#define T3ST(A, AX_, B, BX_, C, CX_) \
	FHSUM(A, AX_, X15); \
	FHSUM(B, BX_, X15); \
	FHSUM(C, CX_, X15); \
	VMOVSS CX_, (DI)(R11*4); \
	VMOVSS BX_, (DI)(R10*4); \
	VMOVSS AX_, (DI)

#define T3ST1 T3ST(Y0, X0, Y4, X4, Y8, X8)
#define T3ST2 T3ST1; ADDQ R8, DI; T3ST(Y1, X1, Y5, X5, Y9, X9)
#define T3ST3 T3ST2; ADDQ R8, DI; T3ST(Y2, X2, Y6, X6, Y10, X10)
#define T3ST4 T3ST3; ADDQ R8, DI; T3ST(Y3, X3, Y7, X7, Y11, X11)

// T3BODY is one 3×C tile's products: the accumulators zeroed, then the
// rows at AX, BX, CX against the inputs at SI, DI, R8, R9, the masked tail
// step last (R13 = cols&^7, R11 = cols−8, R14 = cols, R15 the mask), for
// TILE3 and ROWS3 alike (labels loop and done are the caller's function's).
#define T3BODY(LD, TXC, TXMC) \
	ZEROACC; \
	XORQ R12, R12; \
loop: \
	LD(AX, R12, Y12); \
	LD(BX, R12, Y13); \
	LD(CX, R12, Y14); \
	TXC(R12); \
	ADDQ $8, R12; \
	CMPQ R12, R13; \
	JLT loop; \
	CMPQ R13, R14; \
	JGE done; \
	LD(AX, R11, Y12); \
	LD(BX, R11, Y13); \
	LD(CX, R11, Y14); \
	VANDPS (R15), Y12, Y12; \
	VANDPS (R15), Y13, Y13; \
	VANDPS (R15), Y14, Y14; \
	TXMC(R11); \
done:

// TILE3 defines name(dst *float32, dstStride uintptr, w0, w1, w2 *E, x
// *float32, cols, nr int) (avx2Tile's contract): dst[c·dstStride/4 + r] =
// row r · input c for r < nr (1 ≤ nr ≤ 3; missing rows passed as the last
// real one again) and c < C. cols ≥ 8.
#define TILE3(name, LD, TXC, TXMC, TSTC) \
TEXT name(SB), NOSPLIT, $0-64; \
	MOVQ cols+48(FP), R14; \
	FMASKS; \
	LEAQ tailMask<>(SB), R15; \
	LEAQ (R15)(CX*4), R15; \
	MOVQ w0+16(FP), AX; \
	MOVQ w1+24(FP), BX; \
	MOVQ w2+32(FP), CX; \
	MOVQ x+40(FP), SI; \
	XPTRS; \
	T3BODY(LD, TXC, TXMC); \
	MOVQ dst+0(FP), DI; \
	MOVQ dstStride+8(FP), R8; \
	MOVQ nr+56(FP), R11; \
	DECQ R11; \
	MOVQ $1, R10; \
	CMPQ R11, R10; \
	CMOVQLT R11, R10; \
	TSTC; \
	VZEROUPPER; \
	RET

TILE3(·f32AVX2Tile3x1, LDF32, T3X1, T3XM1, T3ST1)
TILE3(·f32AVX2Tile3x2, LDF32, T3X2, T3XM2, T3ST2)
TILE3(·f32AVX2Tile3x3, LDF32, T3X3, T3XM3, T3ST3)
TILE3(·f32AVX2Tile3x4, LDF32, T3X4, T3XM4, T3ST4)

// ROWS3 defines name(dst *float32, dstStride uintptr, w unsafe.Pointer,
// rowBytes uintptr, x *float32, cols, nrows int): TILE3 over every row
// triple of the nrows rows at w, w+rowBytes, … (nrows ≥ 1), row r's
// outputs at dst + 4r: triple t is TILE3(dst + 12t, dstStride, rows 3t,
// 3t+1, 3t+2, x, cols, nr) with the last triple clamped as the Go loop did
// (nr = min(3, rows left), missing rows passed as the last real one). The
// loop body from the pointer setup to the stores is TILE3's, instruction
// for instruction, so every output keeps its bits; only the per-triple
// call (Go loop step, indirect call, ABI wrapper, FMASKS) is gone.
//
// Registers as in TILE3, but inputs 1–3 only (DI, R8, R9: XPTRS4) and AX
// = the triple's first row, which the loop leaves in place; the rows left
// and the triple's dst live in the frame (left, d), as DI, R8, R10 and R11
// are the stores' operands.
#define XPTRS4 \
	LEAQ (SI)(R14*4), DI; \
	LEAQ (DI)(R14*4), R8; \
	LEAQ (R8)(R14*4), R9

#define ROWS3(name, LD, TXC, TXMC, TSTC) \
TEXT name(SB), NOSPLIT, $16-56; \
	MOVQ cols+40(FP), R14; \
	FMASKS; \
	LEAQ tailMask<>(SB), R15; \
	LEAQ (R15)(CX*4), R15; \
	MOVQ x+32(FP), SI; \
	MOVQ w+16(FP), AX; \
	MOVQ dst+0(FP), DX; \
	MOVQ DX, d-16(SP); \
	MOVQ nrows+48(FP), DX; \
	MOVQ DX, left-8(SP); \
triple: \
	MOVQ rowBytes+24(FP), DX; \
	LEAQ (AX)(DX*1), BX; \
	LEAQ (BX)(DX*1), CX; \
	CMPQ left-8(SP), $2; \
	CMOVQLT AX, BX; \
	CMOVQLT AX, CX; \
	CMOVQEQ BX, CX; \
	XPTRS4; \
	LEAQ -8(R14), R11; \
	T3BODY(LD, TXC, TXMC); \
	MOVQ d-16(SP), DI; \
	MOVQ dstStride+8(FP), R8; \
	MOVQ left-8(SP), R11; \
	DECQ R11; \
	MOVQ $1, R10; \
	CMPQ R11, R10; \
	CMOVQLT R11, R10; \
	MOVQ $2, R12; \
	CMPQ R11, R12; \
	CMOVQGT R12, R11; \
	TSTC; \
	ADDQ $12, d-16(SP); \
	MOVQ rowBytes+24(FP), DX; \
	LEAQ (DX)(DX*2), DX; \
	ADDQ DX, AX; \
	SUBQ $3, left-8(SP); \
	JGT triple; \
	VZEROUPPER; \
	RET

ROWS3(·f32AVX2Rows3x1, LDF32, T3X1, T3XM1, T3ST1)
ROWS3(·f32AVX2Rows3x2, LDF32, T3X2, T3XM2, T3ST2)
ROWS3(·f32AVX2Rows3x3, LDF32, T3X3, T3XM3, T3ST3)
ROWS3(·f32AVX2Rows3x4, LDF32, T3X4, T3XM4, T3ST4)

// ---- decode: 8 rows far apart against one input ----

// FW is row P's chunk at J times the input chunk (Y8) into A; FWM masks
// the weights first (the tail step; the input is masked already).
#define FW(LD, P, J, A) LD(P, J, Y9); VFMADD231PS Y8, Y9, A
#define FWM(LD, P, J, A) LD(P, J, Y9); VANDPS Y15, Y9, Y9; VFMADD231PS Y8, Y9, A

#define FSTEP(F, LD, J) \
	F(LD, AX, J, Y0); \
	F(LD, BX, J, Y1); \
	F(LD, CX, J, Y2); \
	F(LD, DX, J, Y3); \
	F(LD, DI, J, Y4); \
	F(LD, R8, J, Y5); \
	F(LD, R9, J, Y6); \
	F(LD, R10, J, Y7)

#define FST(A, X, off) FHSUM(A, X, X11); VMOVSS X, off(SI)

// FAR8 defines name(dst *float32, w *E, x *float32, cols, stride int):
// dst[k] = row k·stride (elements of size 1<<shift) of w · x for k < 8:
// eight sequential weight streams far apart, eight chains. cols ≥ 8. size
// is 1<<shift again, as the literal an index scale must be.
//
// The loop takes U steps of 8 elements, a 64-byte cache line of each
// stream, and prefetches each stream's line PFAR bytes ahead (past a
// row's end that is the stream's next row, which the next call reads).
// Eight streams are more than the hardware prefetchers keep far enough
// ahead on some cores: on an AMD EPYC (Zen 5) held to AVX2 the F16
// kernel read DRAM at 21.6 GB/s without it and 26.9 with it, the F32
// kernel 23.0 and 26.3 (BenchmarkDecodeStream, 1 GiB, medians of 6
// alternating runs on a shared host; 512 and 2048 bytes ahead measured
// no better, PREFETCHT1/T2 worse, NTA the same but it would keep a model
// that fits in L3 from staying there). The leftover steps run one at a
// time, then the masked tail, so every chain adds the same products in
// the same order as without the unroll.
#define FPF(P, J, size) PREFETCHT0 PFAR(P)(J*size)

#define FAR8(name, shift, size, LD, U, FLINE) \
TEXT name(SB), NOSPLIT, $0-40; \
	MOVQ cols+24(FP), R14; \
	FMASKS; \
	MOVQ w+8(FP), AX; \
	MOVQ x+16(FP), SI; \
	MOVQ stride+32(FP), R15; \
	SHLQ $shift, R15; \
	LEAQ (AX)(R15*1), BX; \
	LEAQ (BX)(R15*1), CX; \
	LEAQ (CX)(R15*1), DX; \
	LEAQ (DX)(R15*1), DI; \
	LEAQ (DI)(R15*1), R8; \
	LEAQ (R8)(R15*1), R9; \
	LEAQ (R9)(R15*1), R10; \
	LEAQ -8*(U-1)(R13), R15; \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	XORQ R12, R12; \
line: \
	CMPQ R12, R15; \
	JGE step; \
	FPF(AX, R12, size); \
	FPF(BX, R12, size); \
	FPF(CX, R12, size); \
	FPF(DX, R12, size); \
	FPF(DI, R12, size); \
	FPF(R8, R12, size); \
	FPF(R9, R12, size); \
	FPF(R10, R12, size); \
	FLINE(LD); \
	JMP line; \
step: \
	CMPQ R12, R13; \
	JGE tail; \
	FONE(LD); \
	JMP step; \
tail: \
	CMPQ R13, R14; \
	JGE done; \
	VMOVUPS (SI)(R11*4), Y8; \
	VANDPS Y15, Y8, Y8; \
	FSTEP(FWM, LD, R11); \
done: \
	MOVQ dst+0(FP), SI; \
	FST(Y0, X0, 0); \
	FST(Y1, X1, 4); \
	FST(Y2, X2, 8); \
	FST(Y3, X3, 12); \
	FST(Y4, X4, 16); \
	FST(Y5, X5, 20); \
	FST(Y6, X6, 24); \
	FST(Y7, X7, 28); \
	VZEROUPPER; \
	RET

// FONE is one step of 8 elements of every stream; FLINE2 and FLINE4 are
// a cache line of F32 and of 16-bit weights.
#define FONE(LD) VMOVUPS (SI)(R12*4), Y8; FSTEP(FW, LD, R12); ADDQ $8, R12
#define FLINE2(LD) FONE(LD); FONE(LD)
#define FLINE4(LD) FONE(LD); FONE(LD); FONE(LD); FONE(LD)

#define PFAR 1024

FAR8(·f32AVX2Far8, 2, 4, LDF32, 2, FLINE2)
FAR8(·f16AVX2Far8, 1, 2, LDF16, 4, FLINE4)
FAR8(·bf16AVX2Far8, 1, 2, LDBF16, 4, FLINE4)

// func fmaPeakAVX2(iters int): 12 independent FMA chains in registers, 12
// FMAs per iteration, no loads: the core's 256-bit FMA peak, for
// BenchmarkFMAPeakAVX2 to set the tiles' rates against.
TEXT ·fmaPeakAVX2(SB), NOSPLIT, $0-8
	MOVQ iters+0(FP), CX
	ZEROACC
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
peak:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ CX
	JNZ peak
	VZEROUPPER
	RET

// WIDEN defines name(dst *float32, src *E, n int): dst[0:n] = the n
// weights at src as float32, exactly (LD's conversion, the tiles' own).
// n ≥ 8: 8 at a time, the last 8 ending at n (overlapping elements are
// written twice with the same value).
#define WIDEN(name, LD) \
TEXT name(SB), NOSPLIT, $0-24; \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ n+16(FP), CX; \
	LEAQ -8(CX), DX; \
	XORQ R12, R12; \
loop: \
	CMPQ R12, DX; \
	JGE last; \
	LD(SI, R12, Y0); \
	VMOVUPS Y0, (DI)(R12*4); \
	ADDQ $8, R12; \
	JMP loop; \
last: \
	LD(SI, DX, Y0); \
	VMOVUPS Y0, (DI)(DX*4); \
	VZEROUPPER; \
	RET

WIDEN(·widenF16AVX2, LDF16)
WIDEN(·widenBF16AVX2, LDBF16)
