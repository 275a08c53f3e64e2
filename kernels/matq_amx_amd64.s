//go:build amd64 && !purego

#include "textflag.h"
#include "amx_amd64.h"

// Q8_0 and Q4_0 panel weights against int8 activations on the AMX tile
// unit (TDPBSSD). See matq_amx_amd64.go for the arithmetic (canon's order:
// the exact int32 dot of each block, then one FMA per block in block
// order) and the loops.
//
// Tiles (amxConfig):
//	tmm0, tmm1  A: 8 inputs × one block (8 rows of 32 signed bytes: an
//	            actQ8 group's block, rows 32 bytes apart)
//	tmm2        B: one panel block, 8 rows of 64 signed bytes, row g the
//	            16 weight rows' values 4g…4g+3 (the panel group, made
//	            signed; for Q4_0 rows 0–3 the low nibbles −8, rows 4–7 the
//	            high ones)
//	tmm3, tmm4  C: 8 inputs × 16 weight rows, int32 exact block dots
//
// The scratch at sc holds the unpacked panel: block b's B tile at b·576,
// its 16 scales as float32 (±Inf made NaN) at b·576+512; then C's two
// tiles (1 KiB) for the float steps.
//
// Vector registers: Z0–Z15 the sums of (input k, 16 rows), Z16 the
// block's scales, Z17–Z24 temporaries, Z28–Z31 constants.

// UNPACKQ8 writes the panel block at BX into the scratch at SI: the
// groups XOR 0x80 (w+128 back to signed w), the scales.
#define UNPACKQ8 \
	VCVTPH2PS (BX), Z16; \
	VFPCLASSPSZ $0x18, Z16, K1; \
	VMOVAPS Z31, K1, Z16; \
	VMOVUPS Z16, 512(SI); \
	VPXORD 32(BX), Z30, Z17; \
	VMOVDQU32 Z17, 0(SI); \
	VPXORD 96(BX), Z30, Z18; \
	VMOVDQU32 Z18, 64(SI); \
	VPXORD 160(BX), Z30, Z19; \
	VMOVDQU32 Z19, 128(SI); \
	VPXORD 224(BX), Z30, Z20; \
	VMOVDQU32 Z20, 192(SI); \
	VPXORD 288(BX), Z30, Z17; \
	VMOVDQU32 Z17, 256(SI); \
	VPXORD 352(BX), Z30, Z18; \
	VMOVDQU32 Z18, 320(SI); \
	VPXORD 416(BX), Z30, Z19; \
	VMOVDQU32 Z19, 384(SI); \
	VPXORD 480(BX), Z30, Z20; \
	VMOVDQU32 Z20, 448(SI)

// UNPACKQ4 does so for a Q4_0 panel block: group g's low nibbles −8 are
// B row g, its high nibbles −8 row 4+g.
#define UNPACKQ4 \
	VCVTPH2PS (BX), Z16; \
	VFPCLASSPSZ $0x18, Z16, K1; \
	VMOVAPS Z31, K1, Z16; \
	VMOVUPS Z16, 512(SI); \
	VMOVDQU32 32(BX), Z17; \
	VPANDD Z29, Z17, Z18; \
	VPSUBB Z28, Z18, Z18; \
	VMOVDQU32 Z18, 0(SI); \
	VPSRLW $4, Z17, Z17; \
	VPANDD Z29, Z17, Z17; \
	VPSUBB Z28, Z17, Z17; \
	VMOVDQU32 Z17, 256(SI); \
	VMOVDQU32 96(BX), Z19; \
	VPANDD Z29, Z19, Z20; \
	VPSUBB Z28, Z20, Z20; \
	VMOVDQU32 Z20, 64(SI); \
	VPSRLW $4, Z19, Z19; \
	VPANDD Z29, Z19, Z19; \
	VPSUBB Z28, Z19, Z19; \
	VMOVDQU32 Z19, 320(SI); \
	VMOVDQU32 160(BX), Z17; \
	VPANDD Z29, Z17, Z18; \
	VPSUBB Z28, Z18, Z18; \
	VMOVDQU32 Z18, 128(SI); \
	VPSRLW $4, Z17, Z17; \
	VPANDD Z29, Z17, Z17; \
	VPSUBB Z28, Z17, Z17; \
	VMOVDQU32 Z17, 384(SI); \
	VMOVDQU32 224(BX), Z19; \
	VPANDD Z29, Z19, Z20; \
	VPSUBB Z28, Z20, Z20; \
	VMOVDQU32 Z20, 192(SI); \
	VPSRLW $4, Z19, Z19; \
	VPANDD Z29, Z19, Z19; \
	VPSUBB Z28, Z19, Z19; \
	VMOVDQU32 Z19, 448(SI)

// EPI is one input's float step for a block: its 16 rows' int32 dots at
// c(AX) converted, times (the rows' scales · its scale at d), added to acc.
#define EPI(c, d, T, U, acc) \
	VCVTDQ2PS c(AX), T; \
	VMULPS.BCST d, Z16, U; \
	VFMADD231PS U, T, acc

// EPI16 and EPI8 are the float steps of a tile's inputs (db at R12, and R9
// for the second group).
#define EPI16 \
	EPI(0, 0(R12), Z17, Z18, Z0); \
	EPI(64, 4(R12), Z19, Z20, Z1); \
	EPI(128, 8(R12), Z21, Z22, Z2); \
	EPI(192, 12(R12), Z23, Z24, Z3); \
	EPI(256, 16(R12), Z17, Z18, Z4); \
	EPI(320, 20(R12), Z19, Z20, Z5); \
	EPI(384, 24(R12), Z21, Z22, Z6); \
	EPI(448, 28(R12), Z23, Z24, Z7); \
	EPI(512, 0(R9), Z17, Z18, Z8); \
	EPI(576, 4(R9), Z19, Z20, Z9); \
	EPI(640, 8(R9), Z21, Z22, Z10); \
	EPI(704, 12(R9), Z23, Z24, Z11); \
	EPI(768, 16(R9), Z17, Z18, Z12); \
	EPI(832, 20(R9), Z19, Z20, Z13); \
	EPI(896, 24(R9), Z21, Z22, Z14); \
	EPI(960, 28(R9), Z23, Z24, Z15)

#define EPI8 \
	EPI(0, 0(R12), Z17, Z18, Z0); \
	EPI(64, 4(R12), Z19, Z20, Z1); \
	EPI(128, 8(R12), Z21, Z22, Z2); \
	EPI(192, 12(R12), Z23, Z24, Z3); \
	EPI(256, 16(R12), Z17, Z18, Z4); \
	EPI(320, 20(R12), Z19, Z20, Z5); \
	EPI(384, 24(R12), Z21, Z22, Z6); \
	EPI(448, 28(R12), Z23, Z24, Z7)

#define ZERO16 \
	VPXORD Z0, Z0, Z0; \
	VMOVAPS Z0, Z1; \
	VMOVAPS Z0, Z2; \
	VMOVAPS Z0, Z3; \
	VMOVAPS Z0, Z4; \
	VMOVAPS Z0, Z5; \
	VMOVAPS Z0, Z6; \
	VMOVAPS Z0, Z7; \
	VMOVAPS Z0, Z8; \
	VMOVAPS Z0, Z9; \
	VMOVAPS Z0, Z10; \
	VMOVAPS Z0, Z11; \
	VMOVAPS Z0, Z12; \
	VMOVAPS Z0, Z13; \
	VMOVAPS Z0, Z14; \
	VMOVAPS Z0, Z15

#define ZERO8 \
	VPXORD Z0, Z0, Z0; \
	VMOVAPS Z0, Z1; \
	VMOVAPS Z0, Z2; \
	VMOVAPS Z0, Z3; \
	VMOVAPS Z0, Z4; \
	VMOVAPS Z0, Z5; \
	VMOVAPS Z0, Z6; \
	VMOVAPS Z0, Z7

// STORE16 and STORE8 write the sums, input k's 16 outputs at R13 + k·R8
// (R15 is left at the last input's).
#define STORE16 \
	MOVQ R13, R15; \
	VMOVUPS Z0, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z1, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z2, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z3, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z4, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z5, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z6, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z7, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z8, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z9, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z10, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z11, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z12, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z13, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z14, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z15, (R15)

#define STORE8 \
	MOVQ R13, R15; \
	VMOVUPS Z0, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z1, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z2, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z3, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z4, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z5, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z6, (R15); \
	ADDQ R8, R15; \
	VMOVUPS Z7, (R15)

// AMXPANELS defines name(dst *float32, rows int, w *byte, np, nb int,
// xb *int8, db *float32, t16, t8 int, sc *byte, cfg *byte): the np panels
// at w (nb blocks of blk bytes each, UNPACK unpacking one) against t16
// tiles of 16 inputs (two actQ8 groups of 8) and then t8 (0 or 1) tiles of
// 8, input k's block b at xb + (k/8)·256·nb + b·256 + 32·(k%8) and its
// scale at db + (k/8)·32·nb + b·32 + 4·(k%8) (bytes); output (input k,
// panel p, row j) at dst[k·rows + 16p + j].
//
// Per panel: unpack it into the scratch once, then each tile walks its
// blocks: load B and A, TDPBSSD into C, store C, the float steps.
#define AMXPANELS(name, blk, UNPACK) \
TEXT name(SB), NOSPLIT, $16-88; \
	MOVQ cfg+80(FP), AX; \
	LDTILECFG(AMX_AX, 0); \
	MOVL $0x7fc00000, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z30; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z29; \
	MOVL $0x08080808, AX; \
	VPBROADCASTD AX, Z28; \
	MOVQ dst+0(FP), DI; \
	MOVQ rows+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ w+16(FP), BX; \
	MOVQ $64, CX; \
	MOVQ $32, DX; \
	MOVQ nb+32(FP), AX; \
	IMULQ $576, AX; \
	ADDQ sc+72(FP), AX; \
	MOVQ np+24(FP), R14; \
	MOVQ R14, pl-8(SP); \
	TESTQ R14, R14; \
	JZ done; \
panel: \
	MOVQ sc+72(FP), SI; \
	MOVQ nb+32(FP), R14; \
unpack: \
	UNPACK; \
	ADDQ $blk, BX; \
	ADDQ $576, SI; \
	DECQ R14; \
	JNZ unpack; \
	MOVQ xb+40(FP), R10; \
	MOVQ db+48(FP), R12; \
	MOVQ DI, R13; \
	MOVQ t16+56(FP), R14; \
	MOVQ R14, tl-16(SP); \
	TESTQ R14, R14; \
	JZ tail8; \
tile16: \
	MOVQ nb+32(FP), R14; \
	MOVQ R14, R15; \
	SHLQ $8, R15; \
	LEAQ (R10)(R15*1), R11; \
	SHRQ $3, R15; \
	LEAQ (R12)(R15*1), R9; \
	MOVQ sc+72(FP), SI; \
	ZERO16; \
block16: \
	TILELOADD(2, AMX_SI, AMX_CX, 0); \
	TILELOADD(0, AMX_R10, AMX_DX, 0); \
	TILELOADD(1, AMX_R11, AMX_DX, 0); \
	TILEZERO(3); \
	TILEZERO(4); \
	TDPBSSD(3, 0, 2); \
	TDPBSSD(4, 1, 2); \
	TILESTORED(AMX_AX, AMX_CX, 0, 3); \
	TILESTORED(AMX_AX, AMX_CX, 512, 4); \
	VMOVUPS 512(SI), Z16; \
	EPI16; \
	ADDQ $576, SI; \
	ADDQ $256, R10; \
	ADDQ $256, R11; \
	ADDQ $32, R12; \
	ADDQ $32, R9; \
	DECQ R14; \
	JNZ block16; \
	STORE16; \
	LEAQ (R15)(R8*1), R13; \
	MOVQ R11, R10; \
	MOVQ R9, R12; \
	DECQ tl-16(SP); \
	JNZ tile16; \
tail8: \
	MOVQ t8+64(FP), R14; \
	TESTQ R14, R14; \
	JZ pnext; \
	MOVQ nb+32(FP), R14; \
	MOVQ sc+72(FP), SI; \
	ZERO8; \
block8: \
	TILELOADD(2, AMX_SI, AMX_CX, 0); \
	TILELOADD(0, AMX_R10, AMX_DX, 0); \
	TILEZERO(3); \
	TDPBSSD(3, 0, 2); \
	TILESTORED(AMX_AX, AMX_CX, 0, 3); \
	VMOVUPS 512(SI), Z16; \
	EPI8; \
	ADDQ $576, SI; \
	ADDQ $256, R10; \
	ADDQ $32, R12; \
	DECQ R14; \
	JNZ block8; \
	STORE8; \
pnext: \
	ADDQ $64, DI; \
	DECQ pl-8(SP); \
	JNZ panel; \
done: \
	TILERELEASE; \
	VZEROUPPER; \
	RET

AMXPANELS(·amxQ8Panels, 544, UNPACKQ8)
AMXPANELS(·amxQ4Panels, 288, UNPACKQ4)

// func amxProbe(cfg *byte, a, b *byte, c *int32, op int)
//
// One 16×64 by 64×16 tile product for TestAMXEncodings: a (16 rows of 64
// bytes) and b (16 rows of 64 bytes, VNNI layout) into c (16 rows of 16
// int32), by TDPBSSD (op 0), TDPBSUD (1), TDPBUSD (2) or TDPBUUD (3),
// through low and extended base registers and displacements
// of 1 to 4 bytes.
TEXT ·amxProbe(SB), NOSPLIT, $0-40
	MOVQ cfg+0(FP), R13
	LDTILECFG(AMX_R13, 0)
	MOVQ a+8(FP), SI
	SUBQ $200, SI
	MOVQ b+16(FP), R11
	SUBQ $64, R11
	MOVQ c+24(FP), R12
	SUBQ $70000, R12
	MOVQ $64, R9
	MOVQ $64, DI
	TILELOADD(5, AMX_SI, AMX_DI, 200)
	TILELOADD(6, AMX_R11, AMX_R9, 64)
	TILEZERO(7)
	MOVQ op+32(FP), AX
	CMPQ AX, $1
	JEQ su
	CMPQ AX, $2
	JEQ us
	CMPQ AX, $3
	JEQ uu
	TDPBSSD(7, 5, 6)
	JMP st
su:
	TDPBSUD(7, 5, 6)
	JMP st
us:
	TDPBUSD(7, 5, 6)
	JMP st
uu:
	TDPBUUD(7, 5, 6)
st:
	TILESTORED(AMX_R12, AMX_R9, 70000, 7)
	TILERELEASE
	RET
