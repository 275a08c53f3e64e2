//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The F32 and F16 routines share one body each (DOTS, AXPY): the F16 forms
// load binary16 rows and widen them exactly by FCVTL/FCVTL2 into the
// registers the F32 forms load, then run the same FMA chains in the same
// order, so a row of halves gives the bits of its widened float32 row.

// LDK8F32 and LDK8F16 load the next 8 keys of the row at R (post-
// incremented) into Va (keys 0–3) and Vb (4–7); a and b are the numbers.
// LDK4F32 and LDK4F16 do it for the rows at R6–R9 into V2–V9, the four
// loads first.
#define LDK8F32(R, Va, Vb, a, b) VLD1.P 32(R), [Va.S4, Vb.S4]
#define LDK8F16(R, Va, Vb, a, b) VLD1.P 16(R), [Va.H8]; FCVTL2(b, a); FCVTL(a, a)
#define LDK4F32 \
	LDK8F32(R6, V2, V3, 2, 3); LDK8F32(R7, V4, V5, 4, 5); \
	LDK8F32(R8, V6, V7, 6, 7); LDK8F32(R9, V8, V9, 8, 9)
#define LDK4F16 \
	VLD1.P 16(R6), [V2.H8]; VLD1.P 16(R7), [V4.H8]; \
	VLD1.P 16(R8), [V6.H8]; VLD1.P 16(R9), [V8.H8]; \
	FCVTL2(3, 2); FCVTL(2, 2); FCVTL2(5, 4); FCVTL(4, 4); \
	FCVTL2(7, 6); FCVTL(6, 6); FCVTL2(9, 8); FCVTL(8, 8)

// LDV16F32 and LDV16F16 load 16 values of the row at R into V4–V7,
// LDV8F32 and LDV8F16 8 into V4–V5; the F16 loads leave halves that
// CVT16 and CVT8 widen in place (NOCVT for float32 rows).
#define LDV16F32(R) VLD1 (R), [V4.S4, V5.S4, V6.S4, V7.S4]
#define LDV16F16(R) VLD1 (R), [V4.H8, V5.H8]
#define LDV8F32(R) VLD1 (R), [V4.S4, V5.S4]
#define LDV8F16(R) VLD1 (R), [V4.H8]
#define CVT16 FCVTL2(7, 5); FCVTL(6, 5); FCVTL2(5, 4); FCVTL(4, 4)
#define CVT8 FCVTL2(5, 4); FCVTL(4, 4)
#define NOCVT

// DOTS is the body of attnDots{,F16}NEON, LDK8 and LDK4 their key loads.
#define DOTS(LDK8, LDK4) \
	MOVD  sc+0(FP), R0; \
	MOVD  q+8(FP), R1; \
	MOVD  k+16(FP), R2; \
	MOVD  kstride+24(FP), R3; \
	MOVD  n+32(FP), R4; \
	MOVD  d+40(FP), R5; \
	FMOVS scale+48(FP), F30; \
	VDUP  V30.S[0], V30.S4; \
	LSL   $2, R3, R12; \
four: \
	CMP  $4, R4; \
	BLT  one; \
	MOVD R2, R6; \
	ADD  R3, R6, R7; \
	ADD  R3, R7, R8; \
	ADD  R3, R8, R9; \
	MOVD R1, R10; \
	MOVD R5, R11; \
	ZERO(16); ZERO(17); ZERO(18); ZERO(19); \
	ZERO(20); ZERO(21); ZERO(22); ZERO(23); \
loop4: \
	VLD1.P 32(R10), [V0.S4, V1.S4]; \
	LDK4; \
	VFMLA  V0.S4, V2.S4, V16.S4; \
	VFMLA  V1.S4, V3.S4, V17.S4; \
	VFMLA  V0.S4, V4.S4, V18.S4; \
	VFMLA  V1.S4, V5.S4, V19.S4; \
	VFMLA  V0.S4, V6.S4, V20.S4; \
	VFMLA  V1.S4, V7.S4, V21.S4; \
	VFMLA  V0.S4, V8.S4, V22.S4; \
	VFMLA  V1.S4, V9.S4, V23.S4; \
	SUBS   $8, R11, R11; \
	BNE    loop4; \
	FADD4S(16, 16, 17); \
	FADD4S(18, 18, 19); \
	FADD4S(20, 20, 21); \
	FADD4S(22, 22, 23); \
	FADDP4S(16, 16, 18); \
	FADDP4S(20, 20, 22); \
	FADDP4S(16, 16, 20); \
	FMUL4S(16, 16, 30); \
	VST1.P [V16.S4], 16(R0); \
	ADD    R12, R2, R2; \
	SUB    $4, R4, R4; \
	B      four; \
one: \
	CBZ  R4, done; \
	MOVD R2, R6; \
	MOVD R1, R10; \
	MOVD R5, R11; \
	ZERO(16); \
	ZERO(17); \
loop1: \
	VLD1.P 32(R10), [V0.S4, V1.S4]; \
	LDK8(R6, V2, V3, 2, 3); \
	VFMLA  V0.S4, V2.S4, V16.S4; \
	VFMLA  V1.S4, V3.S4, V17.S4; \
	SUBS   $8, R11, R11; \
	BNE    loop1; \
	FADD4S(16, 16, 17); \
	FADDP4S(16, 16, 16); \
	FADDPS(16, 16); \
	FMULS  F30, F16, F16; \
	FMOVS.P F16, 4(R0); \
	ADD    R3, R2, R2; \
	SUB    $1, R4, R4; \
	B      one; \
done: \
	RET

// AXPY is the body of attnAxpy{,F16}NEON: LDV16, CV16, LDV8 and CV8
// their value loads and conversions, vb the bytes of 16 values in a row.
#define AXPY(LDV16, CV16, LDV8, CV8, vb) \
	MOVD out+0(FP), R0; \
	MOVD a+8(FP), R1; \
	MOVD v+16(FP), R2; \
	MOVD vstride+24(FP), R3; \
	MOVD n+32(FP), R4; \
	MOVD d+40(FP), R5; \
chunk16: \
	CMP  $16, R5; \
	BLT  chunk8; \
	VLD1 (R0), [V16.S4, V17.S4, V18.S4, V19.S4]; \
	MOVD R1, R8; \
	MOVD R2, R7; \
	MOVD R4, R9; \
loop16: \
	VLD1R.P 4(R8), [V0.S4]; \
	LDV16(R7); \
	ADD  R3, R7, R7; \
	CV16; \
	VFMLA V0.S4, V4.S4, V16.S4; \
	VFMLA V0.S4, V5.S4, V17.S4; \
	VFMLA V0.S4, V6.S4, V18.S4; \
	VFMLA V0.S4, V7.S4, V19.S4; \
	SUBS $1, R9, R9; \
	BNE  loop16; \
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R0); \
	ADD  $vb, R2, R2; \
	SUB  $16, R5, R5; \
	B    chunk16; \
chunk8: \
	CBZ  R5, done; \
	VLD1 (R0), [V16.S4, V17.S4]; \
	MOVD R1, R8; \
	MOVD R2, R7; \
	MOVD R4, R9; \
loop8: \
	VLD1R.P 4(R8), [V0.S4]; \
	LDV8(R7); \
	ADD  R3, R7, R7; \
	CV8; \
	VFMLA V0.S4, V4.S4, V16.S4; \
	VFMLA V0.S4, V5.S4, V17.S4; \
	SUBS $1, R9, R9; \
	BNE  loop8; \
	VST1 [V16.S4, V17.S4], (R0); \
done: \
	RET

// func attnDotsNEON(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)
// sc[j] = (q · k_j) · scale for the n rows k_j at k + j·kstride bytes, d
// (a positive multiple of 8) floats each. Each dot is two 4-lane FMA chains
// (elements 8i..8i+3 and 8i+4..8i+7) combined as ((A+B)[0]+(A+B)[1]) +
// ((A+B)[2]+(A+B)[3]), four slots at a time or one, the same operations.
TEXT ·attnDotsNEON(SB), NOSPLIT, $0-52
	DOTS(LDK8F32, LDK4F32)

// func attnAxpyNEON(out *float32, a *float32, v *float32, vstride uintptr, n, d int)
// out[t] = fma(a_j, v_j[t], out[t]) for j = 0..n−1 in order (n ≥ 1), the
// rows v_j at v + j·vstride bytes, d (a positive multiple of 8) floats:
// out is kept in registers 16 floats (or a last 8) at a time.
TEXT ·attnAxpyNEON(SB), NOSPLIT, $0-48
	AXPY(LDV16F32, NOCVT, LDV8F32, NOCVT, 64)

// func attnDotsF16NEON(sc *float32, q *float32, k *uint16, kstride uintptr, n, d int, scale float32)
// attnDotsNEON over binary16 rows.
TEXT ·attnDotsF16NEON(SB), NOSPLIT, $0-52
	DOTS(LDK8F16, LDK4F16)

// func attnAxpyF16NEON(out *float32, a *float32, v *uint16, vstride uintptr, n, d int)
// attnAxpyNEON over binary16 rows.
TEXT ·attnAxpyF16NEON(SB), NOSPLIT, $0-48
	AXPY(LDV16F16, CVT16, LDV8F16, CVT8, 32)
