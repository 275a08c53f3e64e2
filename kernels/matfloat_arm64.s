//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The float-weight products (matfloat_arm64.go). Every output is two
// 4-lane FMA chains, A over elements 8i..8i+3 and B over 8i+4..8i+7 of the
// first c8 columns (c8 a positive multiple of 8), combined as
// (A+B) then (l0+l1)+(l2+l3): the same operations in every kernel below.

// LDW_* load 8 weights from R (advancing it) as float32 into VA, VB (two
// consecutive registers a, b): F32 as they are, F16 by FCVTL/FCVTL2
// (exact), BF16 by interleaving zero halves below the bf16 bits (V12 must
// hold zero).
#define LDW_F32(R, VA, VB, a, b) \
	VLD1.P 32(R), [VA.S4, VB.S4]

#define LDW_F16(R, VA, VB, a, b) \
	VLD1.P 16(R), [VA.H8] \
	FCVTL2(b, a) \
	FCVTL(a, a)

#define LDW_BF16(R, VA, VB, a, b) \
	VLD1.P 16(R), [VA.H8] \
	VZIP2 VA.H8, V12.H8, VB.H8 \
	VZIP1 VA.H8, V12.H8, VA.H8

// func xxxNEON4x1(dst *float32, w unsafe.Pointer, rb uintptr, x *float32, c8 int)
// dst[k] = row k · x for the rows at w + k·rb, k = 0..3.
#define FLOAT4X1(name, LDW) \
TEXT name(SB), NOSPLIT, $0-40 \
	MOVD dst+0(FP), R0 \
	MOVD w+8(FP), R1 \
	MOVD rb+16(FP), R2 \
	MOVD x+24(FP), R3 \
	MOVD c8+32(FP), R4 \
	ADD  R2, R1, R5 \
	ADD  R2, R5, R6 \
	ADD  R2, R6, R7 \
	ZERO(12) \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
	ZERO(20) \
	ZERO(21) \
	ZERO(22) \
	ZERO(23) \
loop: \
	VLD1.P 32(R3), [V0.S4, V1.S4] \
	LDW(R1, V2, V3, 2, 3) \
	LDW(R5, V4, V5, 4, 5) \
	LDW(R6, V6, V7, 6, 7) \
	LDW(R7, V8, V9, 8, 9) \
	VFMLA V0.S4, V2.S4, V16.S4 \
	VFMLA V1.S4, V3.S4, V17.S4 \
	VFMLA V0.S4, V4.S4, V18.S4 \
	VFMLA V1.S4, V5.S4, V19.S4 \
	VFMLA V0.S4, V6.S4, V20.S4 \
	VFMLA V1.S4, V7.S4, V21.S4 \
	VFMLA V0.S4, V8.S4, V22.S4 \
	VFMLA V1.S4, V9.S4, V23.S4 \
	SUBS $8, R4, R4 \
	BNE  loop \
	FADD4S(16, 16, 17) \
	FADD4S(18, 18, 19) \
	FADD4S(20, 20, 21) \
	FADD4S(22, 22, 23) \
	FADDP4S(16, 16, 18) \
	FADDP4S(20, 20, 22) \
	FADDP4S(16, 16, 20) \
	VST1 [V16.S4], (R0) \
	RET

// func xxxNEON1x1(dst *float32, w unsafe.Pointer, x *float32, c8 int)
// dst[0] = the row at w · x.
#define FLOAT1X1(name, LDW) \
TEXT name(SB), NOSPLIT, $0-32 \
	MOVD dst+0(FP), R0 \
	MOVD w+8(FP), R1 \
	MOVD x+16(FP), R3 \
	MOVD c8+24(FP), R4 \
	ZERO(12) \
	ZERO(16) \
	ZERO(17) \
loop: \
	VLD1.P 32(R3), [V0.S4, V1.S4] \
	LDW(R1, V2, V3, 2, 3) \
	VFMLA V0.S4, V2.S4, V16.S4 \
	VFMLA V1.S4, V3.S4, V17.S4 \
	SUBS $8, R4, R4 \
	BNE  loop \
	FADD4S(16, 16, 17) \
	FADDP4S(16, 16, 16) \
	FADDPS(16, 16) \
	FMOVS F16, (R0) \
	RET

// One input's step of FLOAT2X4: input k at R into VX0, VX1, times the two
// rows' V0, V1 (row 0) and V2, V3 (row 1), into A0, A1 (row 0), B0, B1.
#define STEP2(R, VX0, VX1, A0, A1, B0, B1) \
	VLD1.P 32(R), [VX0.S4, VX1.S4] \
	VFMLA VX0.S4, V0.S4, A0.S4 \
	VFMLA VX1.S4, V1.S4, A1.S4 \
	VFMLA VX0.S4, V2.S4, B0.S4 \
	VFMLA VX1.S4, V3.S4, B1.S4

// One input's reduction and store of FLOAT2X4: a, b (row 0's chains), c, d
// (row 1's) to dst[0], dst[1] at R0, then R0 += the dst stride R1.
#define DONE2(a, b, c, d, F) \
	FADD4S(a, a, b) \
	FADD4S(c, c, d) \
	FADDP4S(a, a, c) \
	FADDP4S(a, a, a) \
	FMOVD F, (R0) \
	ADD  R1, R0, R0

// func xxxNEON2x4(dst *float32, dstStride uintptr, w unsafe.Pointer, rb uintptr, x *float32, xStride uintptr, c8 int)
// dst[k·dstStride/4 + r] = row r · input k for the rows at w + r·rb, r = 0, 1,
// and the inputs at x + k·xStride bytes, k = 0..3.
#define FLOAT2X4(name, LDW) \
TEXT name(SB), NOSPLIT, $0-56 \
	MOVD dst+0(FP), R0 \
	MOVD dstStride+8(FP), R1 \
	MOVD w+16(FP), R2 \
	MOVD rb+24(FP), R3 \
	MOVD x+32(FP), R4 \
	MOVD xStride+40(FP), R5 \
	MOVD c8+48(FP), R6 \
	ADD  R3, R2, R7 \
	ADD  R5, R4, R8 \
	ADD  R5, R8, R9 \
	ADD  R5, R9, R10 \
	ZERO(12) \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
	ZERO(20) \
	ZERO(21) \
	ZERO(22) \
	ZERO(23) \
	ZERO(24) \
	ZERO(25) \
	ZERO(26) \
	ZERO(27) \
	ZERO(28) \
	ZERO(29) \
	ZERO(30) \
	ZERO(31) \
loop: \
	LDW(R2, V0, V1, 0, 1) \
	LDW(R7, V2, V3, 2, 3) \
	STEP2(R4, V4, V5, V16, V17, V24, V25) \
	STEP2(R8, V6, V7, V18, V19, V26, V27) \
	STEP2(R9, V8, V9, V20, V21, V28, V29) \
	STEP2(R10, V10, V11, V22, V23, V30, V31) \
	SUBS $8, R6, R6 \
	BNE  loop \
	DONE2(16, 17, 24, 25, F16) \
	DONE2(18, 19, 26, 27, F18) \
	DONE2(20, 21, 28, 29, F20) \
	DONE2(22, 23, 30, 31, F22) \
	RET

FLOAT4X1(·f32NEON4x1, LDW_F32)
FLOAT1X1(·f32NEON1x1, LDW_F32)
FLOAT2X4(·f32NEON2x4, LDW_F32)
FLOAT4X1(·f16NEON4x1, LDW_F16)
FLOAT1X1(·f16NEON1x1, LDW_F16)
FLOAT2X4(·f16NEON2x4, LDW_F16)
FLOAT4X1(·bf16NEON4x1, LDW_BF16)
FLOAT1X1(·bf16NEON1x1, LDW_BF16)
FLOAT2X4(·bf16NEON2x4, LDW_BF16)
