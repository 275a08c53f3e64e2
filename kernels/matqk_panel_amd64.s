//go:build amd64 && !purego

#include "textflag.h"

// K-quant panel tiles with AVX-512 VNNI: 16 rows of a scratch panel
// (matqk_panel_amd64.go states the layout and the arithmetic) against 8
// Q8_K input rows, whose block b is at x + k·xs + 292b for input k.
//
// Registers: BX the panel's super-block, DI the outputs of the panel
// (input k at DI + k·R8), R9 panels left, DX super-blocks left; R10, R12
// = R10+3xs and R13 = R10+5xs with R11 = xs reach the 8 inputs' blocks
// (k = 0…7: R10, R10+R11, R10+2R11, R12, R10+4R11, R12+2R11, R13+R11,
// R12+4R11). Z0–Z7 level (or pair) vectors, Z8 and Z30 the 16 rows' d and
// dmin as float32 (±Inf made NaN, as FIXNAN does), Z10–Z17 the inputs'
// sub-block sums (then M), Z18–Z25 their I, Z26–Z29 temporaries, Z31
// NaN. The float sums s of the 8 inputs live at k·64(SP).

// DP8 adds the 8 inputs' 4 activation bytes at o (broadcast) times W's 16 rows' 4 unsigned levels, into Z10–Z17.
#define DP8(o, W) \
	VPDPBUSD.BCST o(R10), W, Z10; \
	VPDPBUSD.BCST o(R10)(R11*1), W, Z11; \
	VPDPBUSD.BCST o(R10)(R11*2), W, Z12; \
	VPDPBUSD.BCST o(R12), W, Z13; \
	VPDPBUSD.BCST o(R10)(R11*4), W, Z14; \
	VPDPBUSD.BCST o(R12)(R11*2), W, Z15; \
	VPDPBUSD.BCST o(R13)(R11*1), W, Z16; \
	VPDPBUSD.BCST o(R12)(R11*4), W, Z17

// DW8 adds the 8 inputs' int16 pair at o (broadcast) times W's 16 rows' int16 pairs, into Z10–Z17.
#define DW8(o, W) \
	VPDPWSSD.BCST o(R10), W, Z10; \
	VPDPWSSD.BCST o(R10)(R11*1), W, Z11; \
	VPDPWSSD.BCST o(R10)(R11*2), W, Z12; \
	VPDPWSSD.BCST o(R12), W, Z13; \
	VPDPWSSD.BCST o(R10)(R11*4), W, Z14; \
	VPDPWSSD.BCST o(R12)(R11*2), W, Z15; \
	VPDPWSSD.BCST o(R13)(R11*1), W, Z16; \
	VPDPWSSD.BCST o(R12)(R11*4), W, Z17

// ZACC zeroes Z10–Z17.
#define ZACC \
	VPXORD Z10, Z10, Z10; \
	VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; \
	VPXORD Z13, Z13, Z13; \
	VPXORD Z14, Z14, Z14; \
	VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; \
	VPXORD Z17, Z17, Z17

// ZI zeroes Z18–Z25.
#define ZI \
	VPXORD Z18, Z18, Z18; \
	VPXORD Z19, Z19, Z19; \
	VPXORD Z20, Z20, Z20; \
	VPXORD Z21, Z21, Z21; \
	VPXORD Z22, Z22, Z22; \
	VPXORD Z23, Z23, Z23; \
	VPXORD Z24, Z24, Z24; \
	VPXORD Z25, Z25, Z25

// MULADD8 adds Z10–Z17 times the 16 int32 scales at so(BX) to Z18–Z25.
#define MULADD8(so) \
	VPMULLD so(BX), Z10, Z10; \
	VPMULLD so(BX), Z11, Z11; \
	VPMULLD so(BX), Z12, Z12; \
	VPMULLD so(BX), Z13, Z13; \
	VPMULLD so(BX), Z14, Z14; \
	VPMULLD so(BX), Z15, Z15; \
	VPMULLD so(BX), Z16, Z16; \
	VPMULLD so(BX), Z17, Z17; \
	VPADDD Z10, Z18, Z18; \
	VPADDD Z11, Z19, Z19; \
	VPADDD Z12, Z20, Z20; \
	VPADDD Z13, Z21, Z21; \
	VPADDD Z14, Z22, Z22; \
	VPADDD Z15, Z23, Z23; \
	VPADDD Z16, Z24, Z24; \
	VPADDD Z17, Z25, Z25

// DSCALE sets Z to the 16 f16 at o(BX) as float32, ±Inf made NaN.
#define DSCALE(o, Z) \
	VCVTPH2PS o(BX), Z; \
	VFPCLASSPSZ $0x18, Z, K1; \
	VMOVAPS Z31, K1, Z

// SMFLT is one input's float step for Q4_K/Q5_K, A its block's d: s (at
// so(SP)) = s + (float32(I)·(d·dx) − float32(M)·(dmin·dx)).
#define SMFLT(A, I, M, so) \
	VMULPS.BCST A, Z8, Z26; \
	VMULPS.BCST A, Z30, Z27; \
	VCVTDQ2PS I, Z28; \
	VCVTDQ2PS M, Z29; \
	VMULPS Z26, Z28, Z28; \
	VMULPS Z27, Z29, Z29; \
	VSUBPS Z29, Z28, Z28; \
	VMOVUPS so(SP), Z26; \
	VADDPS Z28, Z26, Z26; \
	VMOVUPS Z26, so(SP)

// Q6FLT is Q6_K's: s = s + float32(I)·(d·dx).
#define Q6FLT(A, I, so) \
	VMULPS.BCST A, Z8, Z26; \
	VCVTDQ2PS I, Z28; \
	VMULPS Z26, Z28, Z28; \
	VMOVUPS so(SP), Z27; \
	VADDPS Z28, Z27, Z27; \
	VMOVUPS Z27, so(SP)

// SMSUB is Q4_K/Q5_K sub-block j (values 32j…32j+31, level groups 8j…8j+7).
#define SMSUB(j) \
	VMOVDQU32 (1088+512*j+0)(BX), Z0; \
	VMOVDQU32 (1088+512*j+64)(BX), Z1; \
	VMOVDQU32 (1088+512*j+128)(BX), Z2; \
	VMOVDQU32 (1088+512*j+192)(BX), Z3; \
	VMOVDQU32 (1088+512*j+256)(BX), Z4; \
	VMOVDQU32 (1088+512*j+320)(BX), Z5; \
	VMOVDQU32 (1088+512*j+384)(BX), Z6; \
	VMOVDQU32 (1088+512*j+448)(BX), Z7; \
	ZACC; \
	DP8(4+32*j+0, Z0); \
	DP8(4+32*j+4, Z1); \
	DP8(4+32*j+8, Z2); \
	DP8(4+32*j+12, Z3); \
	DP8(4+32*j+16, Z4); \
	DP8(4+32*j+20, Z5); \
	DP8(4+32*j+24, Z6); \
	DP8(4+32*j+28, Z7); \
	MULADD8(64+64*j)

// Q6SUB is Q6_K sub-block s (values 16s…16s+15, level groups 4s…4s+3).
#define Q6SUB(s) \
	VMOVDQU32 (1600+256*s+0)(BX), Z0; \
	VMOVDQU32 (1600+256*s+64)(BX), Z1; \
	VMOVDQU32 (1600+256*s+128)(BX), Z2; \
	VMOVDQU32 (1600+256*s+192)(BX), Z3; \
	ZACC; \
	DP8(4+16*s+0, Z0); \
	DP8(4+16*s+4, Z1); \
	DP8(4+16*s+8, Z2); \
	DP8(4+16*s+12, Z3); \
	MULADD8(64+64*s)

// PAIRS loads the 8 pair vectors at o(BX) into Z0–Z7 and sums them
// against the inputs' bsums pairs into Z10–Z17.
#define PAIRS(o) \
	VMOVDQU32 (o+0)(BX), Z0; \
	VMOVDQU32 (o+64)(BX), Z1; \
	VMOVDQU32 (o+128)(BX), Z2; \
	VMOVDQU32 (o+192)(BX), Z3; \
	VMOVDQU32 (o+256)(BX), Z4; \
	VMOVDQU32 (o+320)(BX), Z5; \
	VMOVDQU32 (o+384)(BX), Z6; \
	VMOVDQU32 (o+448)(BX), Z7; \
	ZACC; \
	DW8(260, Z0); \
	DW8(264, Z1); \
	DW8(268, Z2); \
	DW8(272, Z3); \
	DW8(276, Z4); \
	DW8(280, Z5); \
	DW8(284, Z6); \
	DW8(288, Z7)

// func kqSMPanel8VNNI(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)
// Q4_K and Q5_K panels (kqpSM bytes a super-block): per super-block the 8
// sub-blocks' sums times their scales into I, then M from the (m, m)
// pairs and the bsums, then the float step.
TEXT ·kqSMPanel8VNNI(SB), $512-56
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	SHLQ $2, R8
	MOVQ w+16(FP), BX
	MOVQ np+24(FP), R9
	MOVQ xs+48(FP), R11
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z31
	TESTQ R9, R9
	JZ done
panel:
	MOVQ x+40(FP), R10
	LEAQ (R10)(R11*2), R12
	ADDQ R11, R12
	LEAQ (R12)(R11*2), R13
	MOVQ nb+32(FP), DX
	VPXORD Z26, Z26, Z26
	VMOVUPS Z26, 0(SP)
	VMOVUPS Z26, 64(SP)
	VMOVUPS Z26, 128(SP)
	VMOVUPS Z26, 192(SP)
	VMOVUPS Z26, 256(SP)
	VMOVUPS Z26, 320(SP)
	VMOVUPS Z26, 384(SP)
	VMOVUPS Z26, 448(SP)
block:
	ZI
	SMSUB(0)
	SMSUB(1)
	SMSUB(2)
	SMSUB(3)
	SMSUB(4)
	SMSUB(5)
	SMSUB(6)
	SMSUB(7)
	PAIRS(576)
	DSCALE(0, Z8)
	DSCALE(32, Z30)
	SMFLT(0(R10), Z18, Z10, 0)
	SMFLT(0(R10)(R11*1), Z19, Z11, 64)
	SMFLT(0(R10)(R11*2), Z20, Z12, 128)
	SMFLT(0(R12), Z21, Z13, 192)
	SMFLT(0(R10)(R11*4), Z22, Z14, 256)
	SMFLT(0(R12)(R11*2), Z23, Z15, 320)
	SMFLT(0(R13)(R11*1), Z24, Z16, 384)
	SMFLT(0(R12)(R11*4), Z25, Z17, 448)
	ADDQ $5184, BX
	ADDQ $292, R10
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ DX
	JNZ block
	MOVQ DI, AX
	VMOVUPS 0(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 64(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 128(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 192(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 256(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 320(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 384(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 448(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ $64, DI
	DECQ R9
	JNZ panel
done:
	VZEROUPPER
	RET

// func kq6Panel8VNNI(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)
// Q6_K panels (kqp6 bytes a super-block): per super-block the 16
// sub-blocks' sums times their scales into I, minus 32·Σ sc_s·bsums[s]
// from the scale pairs, then the float step.
TEXT ·kq6Panel8VNNI(SB), $512-56
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	SHLQ $2, R8
	MOVQ w+16(FP), BX
	MOVQ np+24(FP), R9
	MOVQ xs+48(FP), R11
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z31
	TESTQ R9, R9
	JZ done
panel:
	MOVQ x+40(FP), R10
	LEAQ (R10)(R11*2), R12
	ADDQ R11, R12
	LEAQ (R12)(R11*2), R13
	MOVQ nb+32(FP), DX
	VPXORD Z26, Z26, Z26
	VMOVUPS Z26, 0(SP)
	VMOVUPS Z26, 64(SP)
	VMOVUPS Z26, 128(SP)
	VMOVUPS Z26, 192(SP)
	VMOVUPS Z26, 256(SP)
	VMOVUPS Z26, 320(SP)
	VMOVUPS Z26, 384(SP)
	VMOVUPS Z26, 448(SP)
block:
	ZI
	Q6SUB(0)
	Q6SUB(1)
	Q6SUB(2)
	Q6SUB(3)
	Q6SUB(4)
	Q6SUB(5)
	Q6SUB(6)
	Q6SUB(7)
	Q6SUB(8)
	Q6SUB(9)
	Q6SUB(10)
	Q6SUB(11)
	Q6SUB(12)
	Q6SUB(13)
	Q6SUB(14)
	Q6SUB(15)
	PAIRS(1088)
	VPSLLD $5, Z10, Z10
	VPSUBD Z10, Z18, Z18
	VPSLLD $5, Z11, Z11
	VPSUBD Z11, Z19, Z19
	VPSLLD $5, Z12, Z12
	VPSUBD Z12, Z20, Z20
	VPSLLD $5, Z13, Z13
	VPSUBD Z13, Z21, Z21
	VPSLLD $5, Z14, Z14
	VPSUBD Z14, Z22, Z22
	VPSLLD $5, Z15, Z15
	VPSUBD Z15, Z23, Z23
	VPSLLD $5, Z16, Z16
	VPSUBD Z16, Z24, Z24
	VPSLLD $5, Z17, Z17
	VPSUBD Z17, Z25, Z25
	DSCALE(0, Z8)
	Q6FLT(0(R10), Z18, 0)
	Q6FLT(0(R10)(R11*1), Z19, 64)
	Q6FLT(0(R10)(R11*2), Z20, 128)
	Q6FLT(0(R12), Z21, 192)
	Q6FLT(0(R10)(R11*4), Z22, 256)
	Q6FLT(0(R12)(R11*2), Z23, 320)
	Q6FLT(0(R13)(R11*1), Z24, 384)
	Q6FLT(0(R12)(R11*4), Z25, 448)
	ADDQ $5696, BX
	ADDQ $292, R10
	ADDQ $292, R12
	ADDQ $292, R13
	DECQ DX
	JNZ block
	MOVQ DI, AX
	VMOVUPS 0(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 64(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 128(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 192(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 256(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 320(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 384(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ R8, AX
	VMOVUPS 448(SP), Z26
	VMOVUPS Z26, (AX)
	ADDQ $64, DI
	DECQ R9
	JNZ panel
done:
	VZEROUPPER
	RET

