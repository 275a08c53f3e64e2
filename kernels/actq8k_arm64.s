//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// func q8kBlockNEON(dst *byte, x *float32) bool
//
// quantizeBlockQ8K for one block of 256 floats at x into the 292-byte
// block_q8_K at dst, with its bytes, when every |x| is finite and the
// largest is at least 2^-119 (then -127/amax is a finite float32);
// otherwise it writes nothing and returns false, and the Go code takes
// the block. amax is found on the float bits with their sign cleared (for
// non-negative floats integer order is float order, and NaN and ±Inf are
// the bits from 0x7f800000 up) by UMAX; mx is the first x whose |x| has
// those bits (a scalar scan, as the Go loop's strict > keeps the first);
// iscale = -127/mx and d = 1/iscale by FDIV; q = FCVTNS(iscale·x) (round
// to nearest even, as nearest's add of 1.5·2^23 does for |v| ≤ 127),
// narrowed with signed saturation (the values lie in [-127, 127], so
// min(127, q) is q); bsums by SADDLV over each 16 bytes.

// UMAX Vd.4S, Vn.4S, Vm.4S
#define UMAX4S(d, n, m) ENC3(0x6ea06400, d, n, m)
// FCVTNS Vd.4S, Vn.4S (to int32, round to nearest, ties to even)
#define FCVTNS4S(d, n) ENC2(0x4e21a800, d, n)
// SQXTN Vd.4H, Vn.4S; SQXTN2 Vd.8H, Vn.4S; SQXTN Vd.8B, Vn.8H; SQXTN2
// Vd.16B, Vn.8H (signed saturating narrow)
#define SQXTN4H(d, n) ENC2(0x0e614800, d, n)
#define SQXTN2_8H(d, n) ENC2(0x4e614800, d, n)
#define SQXTN8B(d, n) ENC2(0x0e214800, d, n)
#define SQXTN2_16B(d, n) ENC2(0x4e214800, d, n)
// SADDLV Hd, Vn.16B (sum of the 16 signed bytes)
#define SADDLV16B(d, n) ENC2(0x4e303800, d, n)

TEXT ·q8kBlockNEON(SB), NOSPLIT, $0-17
	MOVD dst+0(FP), R0
	MOVD x+8(FP), R1
	MOVW $0x7fffffff, R2
	VDUP R2, V31.S4
	ZERO(0)
	ZERO(1)
	ZERO(2)
	ZERO(3)
	MOVD R1, R3
	MOVD $16, R4
amax:
	VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]
	VAND V31.B16, V4.B16, V4.B16
	VAND V31.B16, V5.B16, V5.B16
	VAND V31.B16, V6.B16, V6.B16
	VAND V31.B16, V7.B16, V7.B16
	UMAX4S(0, 0, 4)
	UMAX4S(1, 1, 5)
	UMAX4S(2, 2, 6)
	UMAX4S(3, 3, 7)
	SUBS $1, R4
	BNE  amax
	UMAX4S(0, 0, 1)
	UMAX4S(2, 2, 3)
	UMAX4S(0, 0, 2)
	UMAXV4S(0, 0)
	VMOV V0.S[0], R5
	MOVW $0x7f800000, R6
	CMPW R6, R5
	BHS  notaken
	MOVW $0x04000000, R6
	CMPW R6, R5
	BLO  notaken
	MOVD R1, R3
scan:
	MOVWU.P 4(R3), R7
	ANDW $0x7fffffff, R7, R8
	CMPW R5, R8
	BNE  scan
	FMOVS R7, F1
	MOVW  $0xc2fe0000, R9 // -127
	FMOVS R9, F2
	FDIVS F1, F2, F3      // iscale = -127/mx
	FMOVS $1.0, F4
	FDIVS F3, F4, F5      // d = 1/iscale
	FMOVS F5, (R0)
	MOVD  R1, R3
	ADD   $4, R0, R10
	ADD   $260, R0, R11
	MOVD  $16, R4
quant:
	VLD1.P 64(R3), [V4.S4, V5.S4, V6.S4, V7.S4]
	FMUL4SE0(4, 4, 3)
	FMUL4SE0(5, 5, 3)
	FMUL4SE0(6, 6, 3)
	FMUL4SE0(7, 7, 3)
	FCVTNS4S(4, 4)
	FCVTNS4S(5, 5)
	FCVTNS4S(6, 6)
	FCVTNS4S(7, 7)
	SQXTN4H(16, 4)
	SQXTN2_8H(16, 5)
	SQXTN4H(17, 6)
	SQXTN2_8H(17, 7)
	SQXTN8B(18, 16)
	SQXTN2_16B(18, 17)
	VST1.P [V18.B16], 16(R10)
	SADDLV16B(19, 18)
	VMOV  V19.H[0], R12
	MOVH.P R12, 2(R11)
	SUBS  $1, R4
	BNE   quant
	MOVD  $1, R13
	MOVB  R13, ret+16(FP)
	RET
notaken:
	MOVB ZR, ret+16(FP)
	RET
