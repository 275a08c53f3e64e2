//go:build goexperiment.simd && amd64 && !purego

#include "textflag.h"

// F16 matrix tiles (mathalf_asm_amd64.go has the Go side and the contract).
// Every output is one 16-lane float32 chain over its weight row,
//	acc = fma(W[j:j+16], x[j:j+16], acc)   j = 0, 16, 32, …
// with a short last chunk loaded zero-padded under the k-mask K1, then summed
// by hsum16's tree: t[k] = acc[k]+acc[k+8]; a[k] = t[k]+t[k+4];
// result = (a[0]+a[2]) + (a[1]+a[3]). VCVTPH2PS converts halves exactly.
//
// Registers in the 4×C tiles: Z0–Z23 accumulators (input c, row r in
// Z(4c+r)), Z24–Z27 the four converted weight vectors of this j, Z28 the x
// vector, Z29–Z31 scratch. GP: AX BX CX DX the weight rows, SI DI R8–R11 the
// inputs, R12 j (elements), R13 the end of the full chunks, R14 cols, R15 nr.
// K1 masks the short last chunk's lanes, K2 the sums to store.

// Lanes 0, 4, 8, 12: where RED4 leaves its four sums.
DATA halfSumIdx<>+0(SB)/4, $0
DATA halfSumIdx<>+4(SB)/4, $4
DATA halfSumIdx<>+8(SB)/4, $8
DATA halfSumIdx<>+12(SB)/4, $12
DATA halfSumIdx<>+16(SB)/4, $0
DATA halfSumIdx<>+20(SB)/4, $0
DATA halfSumIdx<>+24(SB)/4, $0
DATA halfSumIdx<>+28(SB)/4, $0
DATA halfSumIdx<>+32(SB)/4, $0
DATA halfSumIdx<>+36(SB)/4, $0
DATA halfSumIdx<>+40(SB)/4, $0
DATA halfSumIdx<>+44(SB)/4, $0
DATA halfSumIdx<>+48(SB)/4, $0
DATA halfSumIdx<>+52(SB)/4, $0
DATA halfSumIdx<>+56(SB)/4, $0
DATA halfSumIdx<>+60(SB)/4, $0
GLOBL halfSumIdx<>(SB), RODATA|NOPTR, $64

// ZERO4 zeroes four accumulators.
#define ZERO4(a0, a1, a2, a3) VPXORD a0, a0, a0; VPXORD a1, a1, a1; VPXORD a2, a2, a2; VPXORD a3, a3, a3

// LDW converts the four weight rows' halves j..j+15 (full chunk).
#define LDW \
	VCVTPH2PS (AX)(R12*2), Z24; \
	VCVTPH2PS (BX)(R12*2), Z25; \
	VCVTPH2PS (CX)(R12*2), Z26; \
	VCVTPH2PS (DX)(R12*2), Z27

// LDWT is LDW for the short last chunk: lanes outside K1 are +0.
#define LDWT \
	VMOVDQU16.Z (AX)(R12*2), K1, Y29; VCVTPH2PS Y29, Z24; \
	VMOVDQU16.Z (BX)(R12*2), K1, Y29; VCVTPH2PS Y29, Z25; \
	VMOVDQU16.Z (CX)(R12*2), K1, Y29; VCVTPH2PS Y29, Z26; \
	VMOVDQU16.Z (DX)(R12*2), K1, Y29; VCVTPH2PS Y29, Z27

// FMA4 adds the four rows times Z28 into a0..a3.
#define FMA4(a0, a1, a2, a3) \
	VFMADD231PS Z28, Z24, a0; \
	VFMADD231PS Z28, Z25, a1; \
	VFMADD231PS Z28, Z26, a2; \
	VFMADD231PS Z28, Z27, a3

// STEP is one input's x[j:j+16] (at xp) against the four rows.
#define STEP(xp, a0, a1, a2, a3) VMOVUPS (xp)(R12*4), Z28; FMA4(a0, a1, a2, a3)

// STEPT is STEP for the short last chunk.
#define STEPT(xp, a0, a1, a2, a3) VMOVUPS.Z (xp)(R12*4), K1, Z28; FMA4(a0, a1, a2, a3)

// RED4 sums a0..a3 each by hsum16's tree (all four at once, lane for lane
// the same additions) and stores the first K2 of the four sums at dp.
// Needs the index vector in Z24.
#define RED4(a0, a1, a2, a3, dp) \
	VSHUFF32X4 $0x44, a1, a0, Z29; \
	VSHUFF32X4 $0xEE, a1, a0, Z30; \
	VADDPS Z30, Z29, Z29; \
	VSHUFF32X4 $0x44, a3, a2, Z30; \
	VSHUFF32X4 $0xEE, a3, a2, Z31; \
	VADDPS Z31, Z30, Z30; \
	VSHUFF32X4 $0x88, Z30, Z29, Z31; \
	VSHUFF32X4 $0xDD, Z30, Z29, Z29; \
	VADDPS Z29, Z31, Z29; \
	VPERMILPS $0x4E, Z29, Z30; \
	VADDPS Z30, Z29, Z29; \
	VPERMILPS $0xB1, Z29, Z30; \
	VADDPS Z30, Z29, Z29; \
	VPERMPS Z29, Z24, Z29; \
	VMOVUPS X29, K2, (dp)

// MASKS sets R13 to the end of the full chunks (cols R14 rounded down to
// 16), K1 to the tail's lanes (cols%16 low bits) and K2 to the first R15
// (nr) of 4 sums; it zeroes R12 (j) and clobbers CX.
#define MASKS \
	MOVQ R14, R13; \
	ANDQ $~15, R13; \
	MOVQ R14, CX; \
	SUBQ R13, CX; \
	MOVL $1, R12; \
	SHLL CX, R12; \
	DECL R12; \
	KMOVW R12, K1; \
	MOVQ R15, CX; \
	MOVL $1, R12; \
	SHLL CX, R12; \
	DECL R12; \
	KMOVW R12, K2; \
	XORQ R12, R12

// NEXTX sets to = from + cols floats (the next input's row of x).
#define NEXTX(from, to) LEAQ (from)(R14*4), to

// The decode kernel: Z0–Z7 accumulators, Z8–Z15 converted weights, Z16 x.
// DPRO8, given w in AX and cols in R14, sets BX CX DX DI R8 R9 R10 to the
// next 7 rows (stride cols halves), MASKS with K2 = 0xf (a RED4 stores all
// four sums) and R15 to the row stride in bytes.
#define DPRO8 \
	MOVL $4, R15; \
	MASKS; \
	LEAQ (R14*2), R15; \
	LEAQ (AX)(R15*1), BX; \
	LEAQ (BX)(R15*1), CX; \
	LEAQ (CX)(R15*1), DX; \
	LEAQ (DX)(R15*1), DI; \
	LEAQ (DI)(R15*1), R8; \
	LEAQ (R8)(R15*1), R9; \
	LEAQ (R9)(R15*1), R10

// DSTEP8 is one chunk j..j+15 of the 8 rows.
#define DSTEP8 \
	VMOVUPS (SI)(R12*4), Z16; \
	VCVTPH2PS (AX)(R12*2), Z8; \
	VCVTPH2PS (BX)(R12*2), Z9; \
	VCVTPH2PS (CX)(R12*2), Z10; \
	VCVTPH2PS (DX)(R12*2), Z11; \
	VCVTPH2PS (DI)(R12*2), Z12; \
	VCVTPH2PS (R8)(R12*2), Z13; \
	VCVTPH2PS (R9)(R12*2), Z14; \
	VCVTPH2PS (R10)(R12*2), Z15; \
	VFMADD231PS Z16, Z8, Z0; \
	VFMADD231PS Z16, Z9, Z1; \
	VFMADD231PS Z16, Z10, Z2; \
	VFMADD231PS Z16, Z11, Z3; \
	VFMADD231PS Z16, Z12, Z4; \
	VFMADD231PS Z16, Z13, Z5; \
	VFMADD231PS Z16, Z14, Z6; \
	VFMADD231PS Z16, Z15, Z7

// DTAIL8 is DSTEP8 for the short last chunk.
#define DTAIL8 \
	VMOVUPS.Z (SI)(R12*4), K1, Z16; \
	VMOVDQU16.Z (AX)(R12*2), K1, Y8; VCVTPH2PS Y8, Z8; \
	VMOVDQU16.Z (BX)(R12*2), K1, Y9; VCVTPH2PS Y9, Z9; \
	VMOVDQU16.Z (CX)(R12*2), K1, Y10; VCVTPH2PS Y10, Z10; \
	VMOVDQU16.Z (DX)(R12*2), K1, Y11; VCVTPH2PS Y11, Z11; \
	VMOVDQU16.Z (DI)(R12*2), K1, Y12; VCVTPH2PS Y12, Z12; \
	VMOVDQU16.Z (R8)(R12*2), K1, Y13; VCVTPH2PS Y13, Z13; \
	VMOVDQU16.Z (R9)(R12*2), K1, Y14; VCVTPH2PS Y14, Z14; \
	VMOVDQU16.Z (R10)(R12*2), K1, Y15; VCVTPH2PS Y15, Z15; \
	VFMADD231PS Z16, Z8, Z0; \
	VFMADD231PS Z16, Z9, Z1; \
	VFMADD231PS Z16, Z10, Z2; \
	VFMADD231PS Z16, Z11, Z3; \
	VFMADD231PS Z16, Z12, Z4; \
	VFMADD231PS Z16, Z13, Z5; \
	VFMADD231PS Z16, Z14, Z6; \
	VFMADD231PS Z16, Z15, Z7

// The 4×C tiles. Each computes, for rows w0..w3 (repeat a row to fill a
// tile: same chain, same bits) and inputs x, x+cols, …, x+(C−1)·cols, the
// sums dst[c·dstStride + r] for r < nr (dstStride in bytes).

// func f16Tile4x1(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x1(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	ZERO4(Z0, Z1, Z2, Z3)
	CMPQ R12, R13
	JGE  tail1
loop1:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop1
tail1:
	CMPQ R12, R14
	JGE  done1
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
done1:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	RED4(Z0, Z1, Z2, Z3, DI)
	VZEROUPPER
	RET

// func f16Tile4x2(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x2(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	NEXTX(SI, DI)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	CMPQ R12, R13
	JGE  tail2
loop2:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	STEP(DI, Z4, Z5, Z6, Z7)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop2
tail2:
	CMPQ R12, R14
	JGE  done2
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
	STEPT(DI, Z4, Z5, Z6, Z7)
done2:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ R8, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	VZEROUPPER
	RET

// func f16Tile4x3(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x3(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	NEXTX(SI, DI)
	NEXTX(DI, R8)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	CMPQ R12, R13
	JGE  tail3
loop3:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	STEP(DI, Z4, Z5, Z6, Z7)
	STEP(R8, Z8, Z9, Z10, Z11)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop3
tail3:
	CMPQ R12, R14
	JGE  done3
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
	STEPT(DI, Z4, Z5, Z6, Z7)
	STEPT(R8, Z8, Z9, Z10, Z11)
done3:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ R8, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	ADDQ R8, DI
	RED4(Z8, Z9, Z10, Z11, DI)
	VZEROUPPER
	RET

// func f16Tile4x4(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x4(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	NEXTX(SI, DI)
	NEXTX(DI, R8)
	NEXTX(R8, R9)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	CMPQ R12, R13
	JGE  tail4
loop4:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	STEP(DI, Z4, Z5, Z6, Z7)
	STEP(R8, Z8, Z9, Z10, Z11)
	STEP(R9, Z12, Z13, Z14, Z15)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop4
tail4:
	CMPQ R12, R14
	JGE  done4
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
	STEPT(DI, Z4, Z5, Z6, Z7)
	STEPT(R8, Z8, Z9, Z10, Z11)
	STEPT(R9, Z12, Z13, Z14, Z15)
done4:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ R8, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	ADDQ R8, DI
	RED4(Z8, Z9, Z10, Z11, DI)
	ADDQ R8, DI
	RED4(Z12, Z13, Z14, Z15, DI)
	VZEROUPPER
	RET

// func f16Tile4x5(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x5(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	NEXTX(SI, DI)
	NEXTX(DI, R8)
	NEXTX(R8, R9)
	NEXTX(R9, R10)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	ZERO4(Z16, Z17, Z18, Z19)
	CMPQ R12, R13
	JGE  tail5
loop5:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	STEP(DI, Z4, Z5, Z6, Z7)
	STEP(R8, Z8, Z9, Z10, Z11)
	STEP(R9, Z12, Z13, Z14, Z15)
	STEP(R10, Z16, Z17, Z18, Z19)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop5
tail5:
	CMPQ R12, R14
	JGE  done5
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
	STEPT(DI, Z4, Z5, Z6, Z7)
	STEPT(R8, Z8, Z9, Z10, Z11)
	STEPT(R9, Z12, Z13, Z14, Z15)
	STEPT(R10, Z16, Z17, Z18, Z19)
done5:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ R8, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	ADDQ R8, DI
	RED4(Z8, Z9, Z10, Z11, DI)
	ADDQ R8, DI
	RED4(Z12, Z13, Z14, Z15, DI)
	ADDQ R8, DI
	RED4(Z16, Z17, Z18, Z19, DI)
	VZEROUPPER
	RET

// func f16Tile4x6(dst *float32, dstStride uintptr, w0, w1, w2, w3 *uint16, x *float32, cols, nr int)
TEXT ·f16Tile4x6(SB), NOSPLIT, $0-72
	MOVQ cols+56(FP), R14
	MOVQ nr+64(FP), R15
	MASKS
	MOVQ w0+16(FP), AX
	MOVQ w1+24(FP), BX
	MOVQ w2+32(FP), CX
	MOVQ w3+40(FP), DX
	MOVQ x+48(FP), SI
	NEXTX(SI, DI)
	NEXTX(DI, R8)
	NEXTX(R8, R9)
	NEXTX(R9, R10)
	NEXTX(R10, R11)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	ZERO4(Z8, Z9, Z10, Z11)
	ZERO4(Z12, Z13, Z14, Z15)
	ZERO4(Z16, Z17, Z18, Z19)
	ZERO4(Z20, Z21, Z22, Z23)
	CMPQ R12, R13
	JGE  tail6
loop6:
	LDW
	STEP(SI, Z0, Z1, Z2, Z3)
	STEP(DI, Z4, Z5, Z6, Z7)
	STEP(R8, Z8, Z9, Z10, Z11)
	STEP(R9, Z12, Z13, Z14, Z15)
	STEP(R10, Z16, Z17, Z18, Z19)
	STEP(R11, Z20, Z21, Z22, Z23)
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop6
tail6:
	CMPQ R12, R14
	JGE  done6
	LDWT
	STEPT(SI, Z0, Z1, Z2, Z3)
	STEPT(DI, Z4, Z5, Z6, Z7)
	STEPT(R8, Z8, Z9, Z10, Z11)
	STEPT(R9, Z12, Z13, Z14, Z15)
	STEPT(R10, Z16, Z17, Z18, Z19)
	STEPT(R11, Z20, Z21, Z22, Z23)
done6:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	MOVQ dstStride+8(FP), R8
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ R8, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	ADDQ R8, DI
	RED4(Z8, Z9, Z10, Z11, DI)
	ADDQ R8, DI
	RED4(Z12, Z13, Z14, Z15, DI)
	ADDQ R8, DI
	RED4(Z16, Z17, Z18, Z19, DI)
	ADDQ R8, DI
	RED4(Z20, Z21, Z22, Z23, DI)
	VZEROUPPER
	RET

// f16Dec8 is the decode kernel: 8 consecutive weight rows from w (stride
// cols) against one input, storing 8 sums at dst: 8 chains in flight, 8
// sequential weight streams (measured faster from DRAM than 4 or 16).

// func f16Dec8(dst *float32, w *uint16, x *float32, cols int)
TEXT ·f16Dec8(SB), NOSPLIT, $0-32
	MOVQ cols+24(FP), R14
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), SI
	DPRO8
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	CMPQ R12, R13
	JGE  d8tail
	// R11 walks the next 8 rows' bytes in memory order, 256 per step
	// (a step consumes 8 rows × 32 bytes): one sequential prefetch stream
	// instead of 8 interleaved ones, which the hardware prefetchers follow
	// badly when rows are short (768 halves: 13 → 23.5 GB/s on the 110m
	// shapes, BenchmarkMatVecDRAM; 25 → 26–30 GB/s at 8192 columns).
	// PREFETCHT0, or two groups ahead, measured slower.
	MOVQ R14, R11
	SHLQ $4, R11
	ADDQ AX, R11
d8loop:
	PREFETCHT1 (R11)
	PREFETCHT1 64(R11)
	PREFETCHT1 128(R11)
	PREFETCHT1 192(R11)
	ADDQ $256, R11
	DSTEP8
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  d8loop
d8tail:
	CMPQ R12, R14
	JGE  d8done
	DTAIL8
d8done:
	VMOVDQU32 halfSumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ $16, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	VZEROUPPER
	RET
