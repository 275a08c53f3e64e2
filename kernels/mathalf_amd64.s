//go:build goexperiment.simd && amd64 && !purego

#include "textflag.h"
#include "tiles_amd64.h"

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

TILE(·f16Tile4x1, LDW, LDWT, XP1, ZR1, ST1, STT1, RD1)

TILE(·f16Tile4x2, LDW, LDWT, XP2, ZR2, ST2, STT2, RD2)

TILE(·f16Tile4x3, LDW, LDWT, XP3, ZR3, ST3, STT3, RD3)

TILE(·f16Tile4x4, LDW, LDWT, XP4, ZR4, ST4, STT4, RD4)

TILE(·f16Tile4x5, LDW, LDWT, XP5, ZR5, ST5, STT5, RD5)

TILE(·f16Tile4x6, LDW, LDWT, XP6, ZR6, ST6, STT6, RD6)

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
	VMOVDQU32 sumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ $16, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	VZEROUPPER
	RET

// func f16Far8(dst *float32, w *uint16, x *float32, cols, stride int)
//
// f16Dec8 over 8 rows stride halves apart (rows r, r+h, …, r+7h): eight
// sequential weight streams in eight different places, which the hardware
// prefetchers follow without help. Stores the 8 sums at dst[0:8].
TEXT ·f16Far8(SB), NOSPLIT, $0-40
	MOVQ cols+24(FP), R14
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), SI
	MOVL $4, R15
	MASKS
	MOVQ stride+32(FP), R15
	SHLQ $1, R15
	LEAQ (AX)(R15*1), BX
	LEAQ (BX)(R15*1), CX
	LEAQ (CX)(R15*1), DX
	LEAQ (DX)(R15*1), DI
	LEAQ (DI)(R15*1), R8
	LEAQ (R8)(R15*1), R9
	LEAQ (R9)(R15*1), R10
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	CMPQ R12, R13
	JGE  f8tail
f8loop:
	DSTEP8
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  f8loop
f8tail:
	CMPQ R12, R14
	JGE  f8done
	DTAIL8
f8done:
	VMOVDQU32 sumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ $16, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	VZEROUPPER
	RET
