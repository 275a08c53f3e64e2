//go:build amd64 && !purego

#include "textflag.h"

// q8QuantBlocks is quantizeBlockQ8 over nb consecutive 32-value blocks with
// AVX2, the same bits: see actq8_amd64.go.

DATA q8c127f<>+0(SB)/4, $127.0
GLOBL q8c127f<>(SB), RODATA|NOPTR, $4
DATA q8c127d<>+0(SB)/8, $127.0
GLOBL q8c127d<>(SB), RODATA|NOPTR, $8
DATA q8nanf<>+0(SB)/4, $0x7fc00000
GLOBL q8nanf<>(SB), RODATA|NOPTR, $4

// QUANT4 converts the 4 floats at off(SI) to float64, multiplies by the
// reciprocal in Y14, rounds to nearest even and converts to 4 int32 in X.
#define QUANT4(off, X) \
	VCVTPS2PD off(SI), Y4; \
	VMULPD Y14, Y4, Y4; \
	VROUNDPD $0, Y4, Y4; \
	VCVTPD2DQY Y4, X

// PACK16 quantizes the 16 floats at off(SI) and stores them as int8 at
// qoff(DI) (int32 → int16 → int8 with signed saturation, which never
// triggers: |x·127/amax| rounds to at most 127).
#define PACK16(off, qoff) \
	QUANT4(off, X0); \
	QUANT4(off+16, X1); \
	QUANT4(off+32, X2); \
	QUANT4(off+48, X3); \
	VPACKSSDW X1, X0, X0; \
	VPACKSSDW X3, X2, X2; \
	VPACKSSWB X2, X0, X0; \
	VMOVDQU X0, qoff(DI)

// func q8QuantBlocks(q *int8, d *float32, x *float32, nb int)
TEXT ·q8QuantBlocks(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), DI
	MOVQ d+8(FP), DX
	MOVQ x+16(FP), SI
	MOVQ nb+24(FP), CX
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	TESTQ CX, CX
	JZ    done

blk:
	// amax as the largest |x| bit pattern: finite non-negative floats
	// order as their bits, and NaN and ±Inf come above them all.
	VPAND        (SI), Y15, Y0
	VPAND        32(SI), Y15, Y1
	VPAND        64(SI), Y15, Y2
	VPAND        96(SI), Y15, Y3
	VPMAXSD      Y1, Y0, Y0
	VPMAXSD      Y3, Y2, Y2
	VPMAXSD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXSD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXSD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXSD      X1, X0, X0
	VMOVD        X0, AX
	CMPL         AX, $0x7f7fffff
	JGT          nonfinite
	TESTL        AX, AX
	JZ           zero

	// d = amax/127 in float32; the reciprocal 127/amax in float64
	// (it overflows float32 for subnormal amax).
	VDIVSS       q8c127f<>(SB), X0, X1
	VMOVSS       X1, (DX)
	VCVTSS2SD    X0, X0, X0
	VMOVSD       q8c127d<>(SB), X1
	VDIVSD       X0, X1, X1
	VBROADCASTSD X1, Y14
	PACK16(0, 0)
	PACK16(64, 16)
	JMP          next

nonfinite:
	VMOVSS q8nanf<>(SB), X1
	JMP    clearq

zero:
	VXORPS X1, X1, X1

clearq:
	VMOVSS  X1, (DX)
	VPXOR   Y0, Y0, Y0
	VMOVDQU Y0, (DI)

next:
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $128, SI
	DECQ CX
	JNZ  blk

done:
	VZEROUPPER
	RET
