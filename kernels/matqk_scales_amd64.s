//go:build amd64 && !purego

#include "textflag.h"

// kqScalesSM16 (matqk_amx_amd64.go): the scale unpacking of kqPanelize
// for a Q4_K/Q5_K panel super-block, all 16 rows at once.

// kqsIdxSC, kqsIdxM: VPERMI2B indices over two vectors of four rows each
// (row r's 16 bytes at 16r: sc_0…7, then m_0…7) gathering byte j of rows
// 0…7 to 8j + r: the 8 sub-blocks' scales (mins) of 8 rows, sub-block-major.
DATA kqsIdxSC<>+0(SB)/8, $0x7060504030201000
DATA kqsIdxSC<>+8(SB)/8, $0x7161514131211101
DATA kqsIdxSC<>+16(SB)/8, $0x7262524232221202
DATA kqsIdxSC<>+24(SB)/8, $0x7363534333231303
DATA kqsIdxSC<>+32(SB)/8, $0x7464544434241404
DATA kqsIdxSC<>+40(SB)/8, $0x7565554535251505
DATA kqsIdxSC<>+48(SB)/8, $0x7666564636261606
DATA kqsIdxSC<>+56(SB)/8, $0x7767574737271707
GLOBL kqsIdxSC<>(SB), RODATA|NOPTR, $64

DATA kqsIdxM<>+0(SB)/8, $0x7868584838281808
DATA kqsIdxM<>+8(SB)/8, $0x7969594939291909
DATA kqsIdxM<>+16(SB)/8, $0x7a6a5a4a3a2a1a0a
DATA kqsIdxM<>+24(SB)/8, $0x7b6b5b4b3b2b1b0b
DATA kqsIdxM<>+32(SB)/8, $0x7c6c5c4c3c2c1c0c
DATA kqsIdxM<>+40(SB)/8, $0x7d6d5d4d3d2d1d0d
DATA kqsIdxM<>+48(SB)/8, $0x7e6e5e4e3e2e1e0e
DATA kqsIdxM<>+56(SB)/8, $0x7f6f5f4f3f2f1f0f
GLOBL kqsIdxM<>(SB), RODATA|NOPTR, $64

// SCM4 turns Z (four rows' 16-byte block heads, a row per 128-bit lane:
// d, dmin, 12 bytes of packed 6-bit scales and mins) into the rows'
// unpacked scales and mins, a row per lane: bytes 0–7 sc_0…7, bytes 8–15
// m_0…7 (tensor.ScaleMinK4; panelizeSMScales's formulas on 64-bit lanes:
// a = bytes 4–11, c = bytes 12–15). Z8–Z13 scratch; Z20–Z23 the masks.
#define SCM4(Z) \
	VPSRLDQ $4, Z, Z8; \
	VPSRLDQ $8, Z8, Z9; \
	VPANDQ  Z20, Z8, Z10; \
	VPANDQ  Z23, Z10, Z11; \
	VPSRLQ  $32, Z10, Z10; \
	VPANDQ  Z21, Z9, Z12; \
	VPSRLQ  $6, Z8, Z13; \
	VPANDQ  Z22, Z13, Z13; \
	VPSLLQ  $4, Z13, Z13; \
	VPORQ   Z13, Z12, Z12; \
	VPSLLQ  $32, Z12, Z12; \
	VPORQ   Z12, Z11, Z11; \
	VPSRLQ  $4, Z9, Z12; \
	VPANDQ  Z21, Z12, Z12; \
	VPSRLQ  $38, Z8, Z13; \
	VPANDQ  Z22, Z13, Z13; \
	VPSLLQ  $4, Z13, Z13; \
	VPORQ   Z13, Z12, Z12; \
	VPSLLQ  $32, Z12, Z12; \
	VPORQ   Z12, Z10, Z10; \
	VPUNPCKLQDQ Z10, Z11, Z

// LOAD4 gathers four rows' 16-byte heads (SI, SI+R8, SI+2·R8, SI+R9) into
// Z's lanes and steps SI four rows on.
#define LOAD4(Z, X) \
	VMOVDQU      (SI), X; \
	VINSERTI32X4 $1, (SI)(R8*1), Z, Z; \
	VINSERTI32X4 $2, (SI)(R8*2), Z, Z; \
	VINSERTI32X4 $3, (SI)(R9*1), Z, Z; \
	LEAQ         (SI)(R8*4), SI

// DMIN copies row k's d and dmin (the f16 pairs at AX) to 2k and 32+2k.
#define DMIN(k) \
	MOVL (AX), CX; \
	MOVW CX, (2*k)(DI); \
	SHRL $16, CX; \
	MOVW CX, (32+2*k)(DI); \
	ADDQ R8, AX

// SCOUT stores sub-block j's 16 row bytes (lane L of U) as int32 at o.
#define SCOUT(U, L, o) \
	VEXTRACTI32X4 $L, U, X14; \
	VPMOVZXBD     X14, Z15; \
	VMOVDQU32     Z15, (o)(DI)

// MOUT stores them as the int16 pair (m, m) at o.
#define MOUT(U, L, o) \
	VEXTRACTI32X4 $L, U, X14; \
	VPMOVZXBD     X14, Z15; \
	VPSLLD        $16, Z15, Z16; \
	VPORD         Z16, Z15, Z15; \
	VMOVDQU32     Z15, (o)(DI)

// func kqScalesSM16(dst, src *byte, rb int)
TEXT ·kqScalesSM16(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rb+16(FP), R8
	LEAQ (R8)(R8*2), R9
	MOVQ $0x3f3f3f3f3f3f3f3f, AX
	VPBROADCASTQ AX, Z20
	MOVQ $0x0f0f0f0f, AX
	VPBROADCASTQ AX, Z21
	MOVQ $0x03030303, AX
	VPBROADCASTQ AX, Z22
	MOVQ $0xffffffff, AX
	VPBROADCASTQ AX, Z23

	MOVQ SI, AX
	DMIN(0)
	DMIN(1)
	DMIN(2)
	DMIN(3)
	DMIN(4)
	DMIN(5)
	DMIN(6)
	DMIN(7)
	DMIN(8)
	DMIN(9)
	DMIN(10)
	DMIN(11)
	DMIN(12)
	DMIN(13)
	DMIN(14)
	DMIN(15)

	LOAD4(Z0, X0)
	LOAD4(Z1, X1)
	LOAD4(Z2, X2)
	LOAD4(Z3, X3)
	SCM4(Z0)
	SCM4(Z1)
	SCM4(Z2)
	SCM4(Z3)

	// Scales: rows 0–7 and 8–15 sub-block-major, then a sub-block's 16
	// rows per 128-bit lane (j = 2L in Z6, 2L+1 in Z7).
	VMOVDQU64   kqsIdxSC<>(SB), Z4
	VMOVDQU64   Z4, Z5
	VPERMI2B    Z1, Z0, Z4
	VPERMI2B    Z3, Z2, Z5
	VPUNPCKLQDQ Z5, Z4, Z6
	VPUNPCKHQDQ Z5, Z4, Z7
	SCOUT(Z6, 0, 64)
	SCOUT(Z7, 0, 128)
	SCOUT(Z6, 1, 192)
	SCOUT(Z7, 1, 256)
	SCOUT(Z6, 2, 320)
	SCOUT(Z7, 2, 384)
	SCOUT(Z6, 3, 448)
	SCOUT(Z7, 3, 512)

	VMOVDQU64   kqsIdxM<>(SB), Z4
	VMOVDQU64   Z4, Z5
	VPERMI2B    Z1, Z0, Z4
	VPERMI2B    Z3, Z2, Z5
	VPUNPCKLQDQ Z5, Z4, Z6
	VPUNPCKHQDQ Z5, Z4, Z7
	MOUT(Z6, 0, 576)
	MOUT(Z7, 0, 640)
	MOUT(Z6, 1, 704)
	MOUT(Z7, 1, 768)
	MOUT(Z6, 2, 832)
	MOUT(Z7, 2, 896)
	MOUT(Z6, 3, 960)
	MOUT(Z7, 3, 1024)
	VZEROUPPER
	RET
