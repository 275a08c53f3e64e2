//go:build amd64 && !purego

#include "textflag.h"

// func q8kBlockAVX2(dst *byte, x *float32) bool
//
// quantizeBlockQ8K for one block of 256 floats at x into the 292-byte
// block_q8_K at dst, with its bits, when every |x| is finite and the
// largest is at least 2^-119 (then -127/amax is a finite float32);
// otherwise it writes nothing and returns false, and the Go code takes
// the block. amax is found on the float bits with their sign cleared
// (for non-negative floats integer order is float order, and NaN and
// ±Inf are the bits from 0x7f800000 up); mx is the first x whose |x| has
// those bits, as the Go loop's strict > keeps the first; iscale = -127/mx
// and d = 1/iscale by VDIVSS; q = VCVTPS2DQ(iscale·x) (round to nearest
// even, as nearest's add of 1.5·2^23 does for |v| ≤ 127) packed with
// signed saturation (the values lie in [-127, 127], so min(127, q) is
// q); bsums from the int32 values before packing.
TEXT ·q8kBlockAVX2(SB), NOSPLIT, $0-17
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVL $0x7fffffff, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	XORQ CX, CX
amax:
	VPAND 0(SI)(CX*1), Y15, Y4
	VPAND 32(SI)(CX*1), Y15, Y5
	VPAND 64(SI)(CX*1), Y15, Y6
	VPAND 96(SI)(CX*1), Y15, Y7
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ $128, CX
	CMPQ CX, $1024
	JNE amax
	VPMAXUD Y1, Y0, Y0
	VPMAXUD Y3, Y2, Y2
	VPMAXUD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	VMOVD X0, AX
	CMPL AX, $0x7f800000
	JAE other
	CMPL AX, $0x04000000
	JB other
	VPBROADCASTD X0, Y0
	XORQ CX, CX
find:
	VPAND (SI)(CX*4), Y15, Y4
	VPCMPEQD Y0, Y4, Y4
	VMOVMSKPS Y4, AX
	TESTL AX, AX
	JNZ found
	ADDQ $8, CX
	JMP find
found:
	BSFL AX, AX
	ADDQ AX, CX
	VMOVSS (SI)(CX*4), X1
	MOVL $0xc2fe0000, AX // -127
	VMOVD AX, X2
	VDIVSS X1, X2, X2    // iscale = -127/mx
	MOVL $0x3f800000, AX // 1
	VMOVD AX, X3
	VDIVSS X2, X3, X3    // d = 1/iscale
	VMOVSS X3, (DI)
	VBROADCASTSS X2, Y2
	VMOVDQU q8kPerm<>(SB), Y14
	XORQ CX, CX
	LEAQ 260(DI), BX
quant:
	VMULPS 0(SI), Y2, Y4
	VMULPS 32(SI), Y2, Y5
	VMULPS 64(SI), Y2, Y6
	VMULPS 96(SI), Y2, Y7
	VCVTPS2DQ Y4, Y4
	VCVTPS2DQ Y5, Y5
	VCVTPS2DQ Y6, Y6
	VCVTPS2DQ Y7, Y7
	// bsums of values 0–15 and 16–31 of the 32.
	VPADDD Y5, Y4, Y8
	VPADDD Y7, Y6, Y9
	VPHADDD Y9, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDD X9, X8, X8
	VPHADDD X8, X8, X8
	VPACKSSDW X8, X8, X8
	VMOVD X8, (BX)(CX*1)
	// The 32 values as int8, in order.
	VPACKSSDW Y5, Y4, Y8
	VPACKSSDW Y7, Y6, Y9
	VPACKSSWB Y9, Y8, Y8
	VPERMD Y8, Y14, Y8
	VMOVDQU Y8, 4(DI)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, CX
	CMPQ CX, $32
	JNE quant
	MOVB $1, ret+16(FP)
	VZEROUPPER
	RET
other:
	MOVB $0, ret+16(FP)
	VZEROUPPER
	RET

// q8kPerm: VPERMD indices putting VPACKSSWB's dwords (lane 0: values 0–3
// of each of the four vectors, lane 1: values 4–7) back in order.
DATA q8kPerm<>+0(SB)/4, $0
DATA q8kPerm<>+4(SB)/4, $4
DATA q8kPerm<>+8(SB)/4, $1
DATA q8kPerm<>+12(SB)/4, $5
DATA q8kPerm<>+16(SB)/4, $2
DATA q8kPerm<>+20(SB)/4, $6
DATA q8kPerm<>+24(SB)/4, $3
DATA q8kPerm<>+28(SB)/4, $7
GLOBL q8kPerm<>(SB), RODATA|NOPTR, $32
