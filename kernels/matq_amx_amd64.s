//go:build amd64 && !purego

#include "textflag.h"
#include "amx_amd64.h"

// Q8_0 and Q4_0 panel weights against int8 activations on the AMX tile
// unit (TDPBSSD). See matq_amx_amd64.go for the arithmetic (canon's order:
// the exact int32 dot of each block, then one FMA per block in block
// order) and the loops.
//
// Tiles (amxConfig), two sets taking turns block by block:
//	tmm0, tmm3  A: 16 inputs × one block (16 rows of 32 signed bytes: an
//	            actQ8 group's block, rows 32 bytes apart)
//	tmm1, tmm4  B: one panel block, 8 rows of 64 signed bytes, row g the
//	            16 weight rows' values 4g…4g+3 (the panel group, made
//	            signed; for Q4_0 rows 0–3 the low nibbles −8, rows 4–7 the
//	            high ones)
//	tmm2, tmm5  C: 16 inputs × 16 weight rows, int32 exact block dots
//
// The scratch at sc holds the unpacked panels: block b of panel p, its B
// tile at (p·nb+b)·576, its 16 scales as float32 (±Inf made NaN) 512
// bytes on; then two buffers of a C tile (1 KiB each) for the float steps.
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

// EPI16(buf) is the float steps of a tile's 16 inputs for one block: its
// C tile at AX+buf, its scales at R15, the inputs' scales at R12.
#define EPI16(buf) \
	VMOVUPS (R15), Z16; \
	EPI(buf+0, 0(R12), Z17, Z18, Z0); \
	EPI(buf+64, 4(R12), Z19, Z20, Z1); \
	EPI(buf+128, 8(R12), Z21, Z22, Z2); \
	EPI(buf+192, 12(R12), Z23, Z24, Z3); \
	EPI(buf+256, 16(R12), Z17, Z18, Z4); \
	EPI(buf+320, 20(R12), Z19, Z20, Z5); \
	EPI(buf+384, 24(R12), Z21, Z22, Z6); \
	EPI(buf+448, 28(R12), Z23, Z24, Z7); \
	EPI(buf+512, 32(R12), Z17, Z18, Z8); \
	EPI(buf+576, 36(R12), Z19, Z20, Z9); \
	EPI(buf+640, 40(R12), Z21, Z22, Z10); \
	EPI(buf+704, 44(R12), Z23, Z24, Z11); \
	EPI(buf+768, 48(R12), Z17, Z18, Z12); \
	EPI(buf+832, 52(R12), Z19, Z20, Z13); \
	EPI(buf+896, 56(R12), Z21, Z22, Z14); \
	EPI(buf+960, 60(R12), Z23, Z24, Z15)

// LOADT(a, b) loads block SI's B tile into tmm(b) and the group's A
// tile (R10) into tmm(a); MULT(a, b, c) multiplies them into tmm(c); STORET
// stores tmm(c) at AX+buf. The two tile sets and buffers take turns (see
// the loop).
#define LOADT(a, b) \
	TILELOADD(b, AMX_SI, AMX_CX, 0); \
	TILELOADD(a, AMX_R10, AMX_DX, 0)

#define MULT(a, b, c) \
	TILEZERO(c); \
	TDPBSSD(c, a, b)

#define STORET(c, buf) \
	TILESTORED(AMX_AX, AMX_CX, buf, c)

// ADVT steps the tile loads to the next block, ADVE the float steps.
#define ADVT \
	ADDQ $576, SI; \
	ADDQ $512, R10

#define ADVE \
	ADDQ $576, R15; \
	ADDQ $64, R12

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

// STORE16 writes the sums, input k's 16 outputs at R13 + k·R8
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

// AMXPANELS defines name(dst *float32, rows int, w *byte, np, nb int,
// xb *int8, db *float32, t16 int, sc *byte, cfg *byte): the np panels at w
// (nb blocks of blk bytes each, UNPACK unpacking one) against t16 tiles of
// 16 inputs (actQ8 groups of 16), input k's block b at xb + (k/16)·512·nb
// + b·512 + 32·(k%16) and its scale at db + (k/16)·64·nb + b·64 + 4·(k%16)
// (bytes); output (input k, panel p, row j) at dst[k·rows + 16p + j].
//
// First all np panels are unpacked into the scratch (the row block
// matPanel hands over, which stays in L2); then each tile of 16 inputs
// walks the panels, and each panel's blocks with two tile sets taking
// turns, in the order
//
//	store C(b); multiply b+1 (loaded in the step before); load b+2;
//	float steps of b
//
// so that the tile unit has the next block's product while the vector
// units take this one's float steps. A tile writes its 16 outputs' rows
// panel after panel, each a sequential stream: panels outside and tiles
// inside, which kept one panel's B tiles in L1, wrote 64 bytes to every
// input's row per panel and ran at about the VNNI kernel's speed inside
// the model (110m Q8_0 prefill, 512 tokens) although 1.5× faster alone.
// (Deeper pipelines, a float step two blocks behind its store or loads
// two blocks ahead with a third tile set, measured the same: the tile
// product and its store take about 18 ns per block by themselves.)
#define AMXPANELS(name, blk, UNPACK) \
TEXT name(SB), NOSPLIT, $24-80; \
	MOVQ cfg+72(FP), AX; \
	LDTILECFG(AMX_AX, 0); \
	MOVL $0x7fc00000, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL $0x80808080, AX; \
	VPBROADCASTD AX, Z30; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z29; \
	MOVL $0x08080808, AX; \
	VPBROADCASTD AX, Z28; \
	MOVQ rows+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ $64, CX; \
	MOVQ $32, DX; \
	MOVQ np+24(FP), R14; \
	TESTQ R14, R14; \
	JZ done; \
	MOVQ t16+56(FP), R14; \
	TESTQ R14, R14; \
	JZ done; \
	MOVQ w+16(FP), BX; \
	MOVQ sc+64(FP), SI; \
	MOVQ nb+32(FP), R14; \
	IMULQ np+24(FP), R14; \
unpack: \
	UNPACK; \
	ADDQ $blk, BX; \
	ADDQ $576, SI; \
	DECQ R14; \
	JNZ unpack; \
	MOVQ SI, AX; \
	MOVQ xb+40(FP), R9; \
	MOVQ db+48(FP), R11; \
	MOVQ dst+0(FP), DI; \
	MOVQ t16+56(FP), R14; \
	MOVQ R14, tl-16(SP); \
tile: \
	MOVQ DI, R13; \
	MOVQ sc+64(FP), BX; \
	MOVQ np+24(FP), R14; \
	MOVQ R14, pl-8(SP); \
panel: \
	MOVQ R9, R10; \
	MOVQ R11, R12; \
	MOVQ BX, SI; \
	MOVQ nb+32(FP), R14; \
	LEAQ 512(SI), R15; \
	ZERO16; \
	LOADT(0, 1); \
	ADVT; \
	MULT(0, 1, 2); \
	CMPQ R14, $2; \
	JLT loop16; \
	LOADT(3, 4); \
	ADVT; \
loop16: \
	STORET(2, 0); \
	CMPQ R14, $2; \
	JLT fin16a; \
	MULT(3, 4, 5); \
	CMPQ R14, $3; \
	JLT epi16a; \
	LOADT(0, 1); \
	ADVT; \
epi16a: \
	EPI16(0); \
	ADVE; \
	DECQ R14; \
	STORET(5, 1024); \
	CMPQ R14, $2; \
	JLT fin16b; \
	MULT(0, 1, 2); \
	CMPQ R14, $3; \
	JLT epi16b; \
	LOADT(3, 4); \
	ADVT; \
epi16b: \
	EPI16(1024); \
	ADVE; \
	DECQ R14; \
	JMP loop16; \
fin16a: \
	EPI16(0); \
	JMP end16; \
fin16b: \
	EPI16(1024); \
end16: \
	STORE16; \
	ADDQ $64, R13; \
	MOVQ SI, BX; \
	DECQ pl-8(SP); \
	JNZ panel; \
	MOVQ R10, R9; \
	ADDQ $64, R12; \
	MOVQ R12, R11; \
	MOVQ R8, R15; \
	SHLQ $4, R15; \
	ADDQ R15, DI; \
	DECQ tl-16(SP); \
	JNZ tile; \
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
