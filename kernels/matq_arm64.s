//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The Q8_0/Q4_0 products over int8 activations (matq_arm64.go). Per output
// and 32-block b the integer dot L_b = Σ qW·qX is exact (int32), and
//
//	acc = fma(float32(L_b), dW_b·dX_b, acc)   (b ascending, acc from 0)
//
// with dW_b read through quantScaleTable (f16 → float32, ±Inf made NaN):
// the same operations in every kernel below and on both integer paths.
// R6 holds the table, V30 the byte 0x0F and V31 the byte 8 (Q4_0).

// LDQ8/LDQ4 read one weight block at R (advancing it): the scale into FS
// (R10 is scratch), the 32 weights as int8 into VA (0–15) and VB (16–31).
// Q4_0's byte j holds weight j in its low nibble and j+16 in its high one,
// stored +8.
#define LDQ8(R, VA, VB, FS) \
	MOVHU.P 2(R), R10 \
	FMOVS (R6)(R10<<2), FS \
	VLD1.P 32(R), [VA.B16, VB.B16]

#define LDQ4(R, VA, VB, FS) \
	MOVHU.P 2(R), R10 \
	FMOVS (R6)(R10<<2), FS \
	VLD1.P 16(R), [VA.B16] \
	VUSHR $4, VA.B16, VB.B16 \
	VAND V30.B16, VA.B16, VA.B16 \
	VSUB V31.B16, VA.B16, VA.B16 \
	VSUB V31.B16, VB.B16, VB.B16

// DOT_DP and DOT_SM (neon_arm64.h) give the exact block sums.

// FINISH: lanes of acc (register number a, F register FA) to float32 L,
// then FACC += L · (FW·FX) with FT scratch.
#define FINISH(a, FA, FW, FX, FT, FACC) \
	ADDV4S(a, a) \
	SCVTFS(a, a) \
	FMULS FX, FW, FT \
	FMADDS FT, FACC, FA, FACC

#define QSETUP \
	VMOVI $15, V30.B16 \
	VMOVI $8, V31.B16

// func xxx4x1(dst *float32, w *byte, rb uintptr, x *int8, d *float32, nb int, tab *float32)
// dst[k] = row k · the input, rows at w + k·rb, k = 0..3; the input's
// values at x and block scales at d, nb blocks.
#define QUANT4X1(name, LDQ, DOT) \
TEXT name(SB), NOSPLIT, $0-56 \
	MOVD dst+0(FP), R0 \
	MOVD w+8(FP), R1 \
	MOVD rb+16(FP), R2 \
	MOVD x+24(FP), R3 \
	MOVD d+32(FP), R4 \
	MOVD nb+40(FP), R5 \
	MOVD tab+48(FP), R6 \
	ADD  R2, R1, R7 \
	ADD  R2, R7, R8 \
	ADD  R2, R8, R9 \
	QSETUP \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
loop: \
	VLD1.P 32(R3), [V0.B16, V1.B16] \
	FMOVS.P 4(R4), F2 \
	LDQ(R1, V4, V5, F24) \
	LDQ(R7, V6, V7, F25) \
	LDQ(R8, V8, V9, F26) \
	LDQ(R9, V10, V11, F27) \
	DOT(12, 4, 5, 0, 1, 20) \
	DOT(13, 6, 7, 0, 1, 21) \
	DOT(14, 8, 9, 0, 1, 22) \
	DOT(15, 10, 11, 0, 1, 23) \
	FINISH(12, F12, F24, F2, F24, F16) \
	FINISH(13, F13, F25, F2, F25, F17) \
	FINISH(14, F14, F26, F2, F26, F18) \
	FINISH(15, F15, F27, F2, F27, F19) \
	SUBS $1, R5, R5 \
	BNE  loop \
	FMOVS F16, (R0) \
	FMOVS F17, 4(R0) \
	FMOVS F18, 8(R0) \
	FMOVS F19, 12(R0) \
	RET

// func xxx1x1(dst *float32, w *byte, x *int8, d *float32, nb int, tab *float32)
// dst[0] = the row at w · the input.
#define QUANT1X1(name, LDQ, DOT) \
TEXT name(SB), NOSPLIT, $0-48 \
	MOVD dst+0(FP), R0 \
	MOVD w+8(FP), R1 \
	MOVD x+16(FP), R3 \
	MOVD d+24(FP), R4 \
	MOVD nb+32(FP), R5 \
	MOVD tab+40(FP), R6 \
	QSETUP \
	ZERO(16) \
loop: \
	VLD1.P 32(R3), [V0.B16, V1.B16] \
	FMOVS.P 4(R4), F2 \
	LDQ(R1, V4, V5, F24) \
	DOT(12, 4, 5, 0, 1, 20) \
	FINISH(12, F12, F24, F2, F24, F16) \
	SUBS $1, R5, R5 \
	BNE  loop \
	FMOVS F16, (R0) \
	RET

// One input's step of QUANT2X4: the input's block at RX (values) and RD
// (scale) against the two rows' blocks (V0, V1 scale F24; V2, V3 scale
// F25), into FA (row 0) and FB (row 1).
#define QSTEP2(DOT, RX, RD, FA, FB) \
	VLD1.P 32(RX), [V4.B16, V5.B16] \
	FMOVS.P 4(RD), F6 \
	DOT(12, 0, 1, 4, 5, 14) \
	DOT(13, 2, 3, 4, 5, 15) \
	FINISH(12, F12, F24, F6, F7, FA) \
	FINISH(13, F13, F25, F6, F8, FB)

// func xxx2x4(dst *float32, dstStride uintptr, w *byte, rb uintptr, x *int8, xStride uintptr, d *float32, dStride uintptr, nb int, tab *float32)
// dst[k·dstStride/4 + r] = row r · input k, rows at w + r·rb (r = 0, 1),
// input k's values at x + k·xStride and scales at d + k·dStride bytes.
#define QUANT2X4(name, LDQ, DOT) \
TEXT name(SB), NOSPLIT, $0-80 \
	MOVD dst+0(FP), R0 \
	MOVD dstStride+8(FP), R1 \
	MOVD w+16(FP), R2 \
	MOVD rb+24(FP), R3 \
	MOVD x+32(FP), R4 \
	MOVD xStride+40(FP), R8 \
	MOVD d+48(FP), R5 \
	MOVD dStride+56(FP), R13 \
	MOVD nb+64(FP), R17 \
	MOVD tab+72(FP), R6 \
	ADD  R3, R2, R7 \
	ADD  R8, R4, R9 \
	ADD  R8, R9, R11 \
	ADD  R8, R11, R12 \
	ADD  R13, R5, R14 \
	ADD  R13, R14, R15 \
	ADD  R13, R15, R16 \
	QSETUP \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
	ZERO(20) \
	ZERO(21) \
	ZERO(22) \
	ZERO(23) \
loop: \
	LDQ(R2, V0, V1, F24) \
	LDQ(R7, V2, V3, F25) \
	QSTEP2(DOT, R4, R5, F16, F20) \
	QSTEP2(DOT, R9, R14, F17, F21) \
	QSTEP2(DOT, R11, R15, F18, F22) \
	QSTEP2(DOT, R12, R16, F19, F23) \
	SUBS $1, R17, R17 \
	BNE  loop \
	FMOVS F16, (R0) \
	FMOVS F20, 4(R0) \
	ADD  R1, R0, R0 \
	FMOVS F17, (R0) \
	FMOVS F21, 4(R0) \
	ADD  R1, R0, R0 \
	FMOVS F18, (R0) \
	FMOVS F22, 4(R0) \
	ADD  R1, R0, R0 \
	FMOVS F19, (R0) \
	FMOVS F23, 4(R0) \
	RET

QUANT4X1(·q8DotProd4x1, LDQ8, DOT_DP)
QUANT1X1(·q8DotProd1x1, LDQ8, DOT_DP)
QUANT2X4(·q8DotProd2x4, LDQ8, DOT_DP)
QUANT4X1(·q4DotProd4x1, LDQ4, DOT_DP)
QUANT1X1(·q4DotProd1x1, LDQ4, DOT_DP)
QUANT2X4(·q4DotProd2x4, LDQ4, DOT_DP)
QUANT4X1(·q8NEON4x1, LDQ8, DOT_SM)
QUANT1X1(·q8NEON1x1, LDQ8, DOT_SM)
QUANT2X4(·q8NEON2x4, LDQ8, DOT_SM)
QUANT4X1(·q4NEON4x1, LDQ4, DOT_SM)
QUANT1X1(·q4NEON1x1, LDQ4, DOT_SM)
QUANT2X4(·q4NEON2x4, LDQ4, DOT_SM)
