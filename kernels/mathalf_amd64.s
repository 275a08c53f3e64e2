//go:build amd64 && !purego

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

// f16Far8 is the F16 decode kernel (see FAR8): 8 chains in flight over 8
// rows an eighth of the matrix apart. Eight adjacent rows (8 streams within
// a few pages) measured 13 GB/s on the 110m shapes, 23.5 with a sequential
// prefetch of the next group, 24.8 far apart (BenchmarkMatVecDRAM); 4 or 16
// rows were slower.
FAR8(·f16Far8, 1, DSTEP8, DTAIL8)
