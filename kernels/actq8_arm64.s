//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// CVT4: the four float32 of Vi times the float64 V18 (both lanes), rounded
// to nearest-even int64 and narrowed back into Vi as four int32.
#define CVT4(i) \
	FCVTLD(24, i) \
	FCVTL2D(25, i) \
	FMUL2D(24, 24, 18) \
	FMUL2D(25, 25, 18) \
	FCVTNS2D(24, 24) \
	FCVTNS2D(25, 25) \
	XTN2S(i, 24) \
	XTN2_4S(i, 25)

// func q8QuantNEON(q *int8, d *float32, x *float32, nb int)
// quantizeBlockQ8 over nb blocks (actq8_arm64.go has the recipe).
TEXT ·q8QuantNEON(SB), NOSPLIT, $0-32
	MOVD q+0(FP), R0
	MOVD d+8(FP), R1
	MOVD x+16(FP), R2
	MOVD nb+24(FP), R3
	MOVW $0x42fe0000, R4         // 127 as float32
	FMOVS R4, F28
	MOVD $0x405fc00000000000, R4 // 127 as float64
	FMOVD R4, F29
	MOVW $0x7f800000, R6         // +Inf: |x| bits at or above it are Inf or NaN
	MOVW $0x7fc00000, R7         // float32(math.NaN())
	ZERO(26)
	ZERO(27)

block:
	VLD1.P 64(R2), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R2), [V4.S4, V5.S4, V6.S4, V7.S4]
	// amax as the largest |x| bit pattern (NaN and ±Inf above every finite).
	FABS4S(16, 0)
	FABS4S(17, 1)
	FABS4S(18, 2)
	FABS4S(19, 3)
	FABS4S(20, 4)
	FABS4S(21, 5)
	FABS4S(22, 6)
	FABS4S(23, 7)
	VUMAX V17.S4, V16.S4, V16.S4
	VUMAX V19.S4, V18.S4, V18.S4
	VUMAX V21.S4, V20.S4, V20.S4
	VUMAX V23.S4, V22.S4, V22.S4
	VUMAX V18.S4, V16.S4, V16.S4
	VUMAX V22.S4, V20.S4, V20.S4
	VUMAX V20.S4, V16.S4, V16.S4
	UMAXV4S(16, 16)
	FMOVS F16, R5
	CMPW R6, R5
	BHS  nonfinite
	CBZW R5, zero

	FDIVS F28, F16, F17          // d = amax / 127 (float32)
	FMOVS.P F17, 4(R1)
	FCVTSD F16, F18
	FDIVD F18, F29, F18          // id = 127 / float64(amax)
	VDUP V18.D[0], V18.D2
	CVT4(0)
	CVT4(1)
	CVT4(2)
	CVT4(3)
	CVT4(4)
	CVT4(5)
	CVT4(6)
	CVT4(7)
	XTN4H(20, 0)
	XTN2_8H(20, 1)
	XTN4H(21, 2)
	XTN2_8H(21, 3)
	XTN4H(22, 4)
	XTN2_8H(22, 5)
	XTN4H(23, 6)
	XTN2_8H(23, 7)
	XTN8B(24, 20)
	XTN2_16B(24, 21)
	XTN8B(25, 22)
	XTN2_16B(25, 23)
	VST1.P [V24.B16, V25.B16], 32(R0)
	B    next

nonfinite:
	MOVW.P R7, 4(R1)
	VST1.P [V26.B16, V27.B16], 32(R0)
	B    next

zero:
	MOVW.P ZR, 4(R1)
	VST1.P [V26.B16, V27.B16], 32(R0)

next:
	SUBS $1, R3, R3
	BNE  block
	RET
