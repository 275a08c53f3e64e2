//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// func attnDotsNEON(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)
// sc[j] = (q · k_j) · scale for the n rows k_j at k + j·kstride bytes, d
// (a positive multiple of 8) floats each. Each dot is two 4-lane FMA chains
// (elements 8i..8i+3 and 8i+4..8i+7) combined as ((A+B)[0]+(A+B)[1]) +
// ((A+B)[2]+(A+B)[3]), four slots at a time or one, the same operations.
TEXT ·attnDotsNEON(SB), NOSPLIT, $0-52
	MOVD  sc+0(FP), R0
	MOVD  q+8(FP), R1
	MOVD  k+16(FP), R2
	MOVD  kstride+24(FP), R3
	MOVD  n+32(FP), R4
	MOVD  d+40(FP), R5
	FMOVS scale+48(FP), F30
	VDUP  V30.S[0], V30.S4
	LSL   $2, R3, R12 // 4 slots

four:
	CMP  $4, R4
	BLT  one
	MOVD R2, R6
	ADD  R3, R6, R7
	ADD  R3, R7, R8
	ADD  R3, R8, R9
	MOVD R1, R10
	MOVD R5, R11
	ZERO(16)
	ZERO(17)
	ZERO(18)
	ZERO(19)
	ZERO(20)
	ZERO(21)
	ZERO(22)
	ZERO(23)

loop4:
	VLD1.P 32(R10), [V0.S4, V1.S4]
	VLD1.P 32(R6), [V2.S4, V3.S4]
	VLD1.P 32(R7), [V4.S4, V5.S4]
	VLD1.P 32(R8), [V6.S4, V7.S4]
	VLD1.P 32(R9), [V8.S4, V9.S4]
	VFMLA  V0.S4, V2.S4, V16.S4
	VFMLA  V1.S4, V3.S4, V17.S4
	VFMLA  V0.S4, V4.S4, V18.S4
	VFMLA  V1.S4, V5.S4, V19.S4
	VFMLA  V0.S4, V6.S4, V20.S4
	VFMLA  V1.S4, V7.S4, V21.S4
	VFMLA  V0.S4, V8.S4, V22.S4
	VFMLA  V1.S4, V9.S4, V23.S4
	SUBS   $8, R11, R11
	BNE    loop4
	FADD4S(16, 16, 17)
	FADD4S(18, 18, 19)
	FADD4S(20, 20, 21)
	FADD4S(22, 22, 23)
	FADDP4S(16, 16, 18)
	FADDP4S(20, 20, 22)
	FADDP4S(16, 16, 20)
	FMUL4S(16, 16, 30)
	VST1.P [V16.S4], 16(R0)
	ADD    R12, R2, R2
	SUB    $4, R4, R4
	B      four

one:
	CBZ  R4, done
	MOVD R2, R6
	MOVD R1, R10
	MOVD R5, R11
	ZERO(16)
	ZERO(17)

loop1:
	VLD1.P 32(R10), [V0.S4, V1.S4]
	VLD1.P 32(R6), [V2.S4, V3.S4]
	VFMLA  V0.S4, V2.S4, V16.S4
	VFMLA  V1.S4, V3.S4, V17.S4
	SUBS   $8, R11, R11
	BNE    loop1
	FADD4S(16, 16, 17)
	FADDP4S(16, 16, 16)
	FADDPS(16, 16)
	FMULS  F30, F16, F16
	FMOVS.P F16, 4(R0)
	ADD    R3, R2, R2
	SUB    $1, R4, R4
	B      one

done:
	RET

// func attnAxpyNEON(out *float32, a *float32, v *float32, vstride uintptr, n, d int)
// out[t] = fma(a_j, v_j[t], out[t]) for j = 0..n−1 in order (n ≥ 1), the
// rows v_j at v + j·vstride bytes, d (a positive multiple of 8) floats:
// out is kept in registers 16 floats (or a last 8) at a time.
TEXT ·attnAxpyNEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD a+8(FP), R1
	MOVD v+16(FP), R2
	MOVD vstride+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5

chunk16:
	CMP  $16, R5
	BLT  chunk8
	VLD1 (R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	MOVD R1, R8
	MOVD R2, R7
	MOVD R4, R9

loop16:
	VLD1R.P 4(R8), [V0.S4]
	VLD1 (R7), [V4.S4, V5.S4, V6.S4, V7.S4]
	ADD  R3, R7, R7
	VFMLA V0.S4, V4.S4, V16.S4
	VFMLA V0.S4, V5.S4, V17.S4
	VFMLA V0.S4, V6.S4, V18.S4
	VFMLA V0.S4, V7.S4, V19.S4
	SUBS $1, R9, R9
	BNE  loop16
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R0)
	ADD  $64, R2, R2
	SUB  $16, R5, R5
	B    chunk16

chunk8:
	CBZ  R5, done
	VLD1 (R0), [V16.S4, V17.S4]
	MOVD R1, R8
	MOVD R2, R7
	MOVD R4, R9

loop8:
	VLD1R.P 4(R8), [V0.S4]
	VLD1 (R7), [V4.S4, V5.S4]
	ADD  R3, R7, R7
	VFMLA V0.S4, V4.S4, V16.S4
	VFMLA V0.S4, V5.S4, V17.S4
	SUBS $1, R9, R9
	BNE  loop8
	VST1 [V16.S4, V17.S4], (R0)

done:
	RET

// func attnDotsF16NEON(sc *float32, q *float32, k *uint16, kstride uintptr, n, d int, scale float32)
// attnDotsNEON over binary16 rows: each 8 keys are loaded as 16 bytes and
// widened exactly by FCVTL/FCVTL2 into the two registers attnDotsNEON
// loads, then the same FMA chains and the same combination, so a row of
// halves gives the bits of its widened float32 row.
TEXT ·attnDotsF16NEON(SB), NOSPLIT, $0-52
	MOVD  sc+0(FP), R0
	MOVD  q+8(FP), R1
	MOVD  k+16(FP), R2
	MOVD  kstride+24(FP), R3
	MOVD  n+32(FP), R4
	MOVD  d+40(FP), R5
	FMOVS scale+48(FP), F30
	VDUP  V30.S[0], V30.S4
	LSL   $2, R3, R12 // 4 slots

four:
	CMP  $4, R4
	BLT  one
	MOVD R2, R6
	ADD  R3, R6, R7
	ADD  R3, R7, R8
	ADD  R3, R8, R9
	MOVD R1, R10
	MOVD R5, R11
	ZERO(16)
	ZERO(17)
	ZERO(18)
	ZERO(19)
	ZERO(20)
	ZERO(21)
	ZERO(22)
	ZERO(23)

loop4:
	VLD1.P 32(R10), [V0.S4, V1.S4]
	VLD1.P 16(R6), [V2.H8]
	VLD1.P 16(R7), [V4.H8]
	VLD1.P 16(R8), [V6.H8]
	VLD1.P 16(R9), [V8.H8]
	FCVTL2(3, 2)
	FCVTL(2, 2)
	FCVTL2(5, 4)
	FCVTL(4, 4)
	FCVTL2(7, 6)
	FCVTL(6, 6)
	FCVTL2(9, 8)
	FCVTL(8, 8)
	VFMLA  V0.S4, V2.S4, V16.S4
	VFMLA  V1.S4, V3.S4, V17.S4
	VFMLA  V0.S4, V4.S4, V18.S4
	VFMLA  V1.S4, V5.S4, V19.S4
	VFMLA  V0.S4, V6.S4, V20.S4
	VFMLA  V1.S4, V7.S4, V21.S4
	VFMLA  V0.S4, V8.S4, V22.S4
	VFMLA  V1.S4, V9.S4, V23.S4
	SUBS   $8, R11, R11
	BNE    loop4
	FADD4S(16, 16, 17)
	FADD4S(18, 18, 19)
	FADD4S(20, 20, 21)
	FADD4S(22, 22, 23)
	FADDP4S(16, 16, 18)
	FADDP4S(20, 20, 22)
	FADDP4S(16, 16, 20)
	FMUL4S(16, 16, 30)
	VST1.P [V16.S4], 16(R0)
	ADD    R12, R2, R2
	SUB    $4, R4, R4
	B      four

one:
	CBZ  R4, done
	MOVD R2, R6
	MOVD R1, R10
	MOVD R5, R11
	ZERO(16)
	ZERO(17)

loop1:
	VLD1.P 32(R10), [V0.S4, V1.S4]
	VLD1.P 16(R6), [V2.H8]
	FCVTL2(3, 2)
	FCVTL(2, 2)
	VFMLA  V0.S4, V2.S4, V16.S4
	VFMLA  V1.S4, V3.S4, V17.S4
	SUBS   $8, R11, R11
	BNE    loop1
	FADD4S(16, 16, 17)
	FADDP4S(16, 16, 16)
	FADDPS(16, 16)
	FMULS  F30, F16, F16
	FMOVS.P F16, 4(R0)
	ADD    R3, R2, R2
	SUB    $1, R4, R4
	B      one

done:
	RET

// func attnAxpyF16NEON(out *float32, a *float32, v *uint16, vstride uintptr, n, d int)
// attnAxpyNEON over binary16 rows, each value widened exactly by
// FCVTL/FCVTL2 before the same fused multiply-adds in the same order.
TEXT ·attnAxpyF16NEON(SB), NOSPLIT, $0-48
	MOVD out+0(FP), R0
	MOVD a+8(FP), R1
	MOVD v+16(FP), R2
	MOVD vstride+24(FP), R3
	MOVD n+32(FP), R4
	MOVD d+40(FP), R5

chunk16:
	CMP  $16, R5
	BLT  chunk8
	VLD1 (R0), [V16.S4, V17.S4, V18.S4, V19.S4]
	MOVD R1, R8
	MOVD R2, R7
	MOVD R4, R9

loop16:
	VLD1R.P 4(R8), [V0.S4]
	VLD1 (R7), [V4.H8, V5.H8]
	ADD  R3, R7, R7
	FCVTL2(7, 5)
	FCVTL(6, 5)
	FCVTL2(5, 4)
	FCVTL(4, 4)
	VFMLA V0.S4, V4.S4, V16.S4
	VFMLA V0.S4, V5.S4, V17.S4
	VFMLA V0.S4, V6.S4, V18.S4
	VFMLA V0.S4, V7.S4, V19.S4
	SUBS $1, R9, R9
	BNE  loop16
	VST1.P [V16.S4, V17.S4, V18.S4, V19.S4], 64(R0)
	ADD  $32, R2, R2
	SUB  $16, R5, R5
	B    chunk16

chunk8:
	CBZ  R5, done
	VLD1 (R0), [V16.S4, V17.S4]
	MOVD R1, R8
	MOVD R2, R7
	MOVD R4, R9

loop8:
	VLD1R.P 4(R8), [V0.S4]
	VLD1 (R7), [V4.H8]
	ADD  R3, R7, R7
	FCVTL2(5, 4)
	FCVTL(4, 4)
	VFMLA V0.S4, V4.S4, V16.S4
	VFMLA V0.S4, V5.S4, V17.S4
	SUBS $1, R9, R9
	BNE  loop8
	VST1 [V16.S4, V17.S4], (R0)

done:
	RET
