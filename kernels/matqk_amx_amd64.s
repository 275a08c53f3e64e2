//go:build amd64 && !purego

#include "textflag.h"
#include "amx_amd64.h"

// K-quant panels on the AMX-INT8 tile unit: matqk_amx_amd64.go states the
// arithmetic (I as tile products over per-value weight planes, M as the
// VNNI panel tile forms it, then that tile's float step) and the panel
// layout.

// kqaIdxLo, kqaIdxHi: VPERMW indices spreading 16 per-row words over 32
// word lanes, four lanes a row: rows 0–7 (Lo) and rows 8–15 (Hi), to meet
// the levels of 8 rows × 4 values that VPMOVZXBW makes of 32 level bytes.

DATA kqaIdxLo<>+0(SB)/8, $0x0000000000000000
DATA kqaIdxLo<>+8(SB)/8, $0x0001000100010001
DATA kqaIdxLo<>+16(SB)/8, $0x0002000200020002
DATA kqaIdxLo<>+24(SB)/8, $0x0003000300030003
DATA kqaIdxLo<>+32(SB)/8, $0x0004000400040004
DATA kqaIdxLo<>+40(SB)/8, $0x0005000500050005
DATA kqaIdxLo<>+48(SB)/8, $0x0006000600060006
DATA kqaIdxLo<>+56(SB)/8, $0x0007000700070007
GLOBL kqaIdxLo<>(SB), RODATA|NOPTR, $64

DATA kqaIdxHi<>+0(SB)/8, $0x0008000800080008
DATA kqaIdxHi<>+8(SB)/8, $0x0009000900090009
DATA kqaIdxHi<>+16(SB)/8, $0x000a000a000a000a
DATA kqaIdxHi<>+24(SB)/8, $0x000b000b000b000b
DATA kqaIdxHi<>+32(SB)/8, $0x000c000c000c000c
DATA kqaIdxHi<>+40(SB)/8, $0x000d000d000d000d
DATA kqaIdxHi<>+48(SB)/8, $0x000e000e000e000e
DATA kqaIdxHi<>+56(SB)/8, $0x000f000f000f000f
GLOBL kqaIdxHi<>(SB), RODATA|NOPTR, $64

// PLANEG writes one level group (64 bytes at s(SI): 16 rows × 4 levels)
// times the rows' scales (word vectors Z1 for rows 0–7, Z2 for 8–15), less
// Z27 first (words; Q6_K: 32, else 0): the low bytes to d(DI), the high
// bytes (arithmetic shift) to d+4096(DI).
#define PLANEG(s, d) \
	VPMOVZXBW (s)(SI), Z4; \
	VPMOVZXBW (s+32)(SI), Z5; \
	VPSUBW Z27, Z4, Z4; \
	VPSUBW Z27, Z5, Z5; \
	VPMULLW Z1, Z4, Z4; \
	VPMULLW Z2, Z5, Z5; \
	VPMOVWB Z4, Y6; \
	VPMOVWB Z5, Y7; \
	VINSERTI64X4 $1, Y7, Z6, Z6; \
	VMOVDQU64 Z6, (d)(DI); \
	VPSRAW $8, Z4, Z4; \
	VPSRAW $8, Z5, Z5; \
	VPMOVWB Z4, Y6; \
	VPMOVWB Z5, Y7; \
	VINSERTI64X4 $1, Y7, Z6, Z6; \
	VMOVDQU64 Z6, (d+4096)(DI)

// SCW sets Z1 and Z2 to the word vectors of the 16 int32 scales at s(SI).
#define SCW(s) \
	VMOVDQU32 (s)(SI), Z0; \
	VPMOVDW Z0, Y0; \
	VPERMW Z0, Z28, Z1; \
	VPERMW Z0, Z29, Z2

// SMSUBA is sub-block j of a Q4_K/Q5_K super-block: its 8 level groups
// into the planes.
#define SMSUBA(j) \
	SCW(64+64*j); \
	PLANEG(1088+512*j+0, 64+512*j+0); \
	PLANEG(1088+512*j+64, 64+512*j+64); \
	PLANEG(1088+512*j+128, 64+512*j+128); \
	PLANEG(1088+512*j+192, 64+512*j+192); \
	PLANEG(1088+512*j+256, 64+512*j+256); \
	PLANEG(1088+512*j+320, 64+512*j+320); \
	PLANEG(1088+512*j+384, 64+512*j+384); \
	PLANEG(1088+512*j+448, 64+512*j+448)

// MPAIR writes the rows' (m_2u, m_2u+1) int16 pairs: the low words of the
// VNNI panel's (m_2u, m_2u) pairs, the high words of its (m_2u+1,
// m_2u+1) pairs (K2 selects the odd words).
#define MPAIR(u) \
	VMOVDQU64 (576+128*u)(SI), Z3; \
	VPBLENDMW (576+128*u+64)(SI), Z3, K2, Z3; \
	VMOVDQU64 Z3, (8256+64*u)(DI)

// Q6SUBA is sub-block s of a Q6_K super-block: its 4 level groups.
#define Q6SUBA(s) \
	SCW(64+64*s); \
	PLANEG(1600+256*s+0, 64+256*s+0); \
	PLANEG(1600+256*s+64, 64+256*s+64); \
	PLANEG(1600+256*s+128, 64+256*s+128); \
	PLANEG(1600+256*s+192, 64+256*s+192)

#define PLANECONST \
	VMOVDQU64 kqaIdxLo<>(SB), Z28; \
	VMOVDQU64 kqaIdxHi<>(SB), Z29

// func kqAMXFromSM(dst, src *byte, nb int)
TEXT ·kqAMXFromSM(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	PLANECONST
	VPXORD Z27, Z27, Z27
	MOVL $0xaaaaaaaa, AX
	KMOVD AX, K2
	TESTQ CX, CX
	JZ done
block:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 Z0, (DI)

	MPAIR(0)
	MPAIR(1)
	MPAIR(2)
	MPAIR(3)
	SMSUBA(0)
	SMSUBA(1)
	SMSUBA(2)
	SMSUBA(3)
	SMSUBA(4)
	SMSUBA(5)
	SMSUBA(6)
	SMSUBA(7)
	ADDQ $5184, SI
	ADDQ $8512, DI
	DECQ CX
	JNZ block
done:
	VZEROUPPER
	RET

// func kqAMXFrom6(dst, src *byte, nb int)
TEXT ·kqAMXFrom6(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	PLANECONST
	MOVL $0x00200020, AX
	VPBROADCASTD AX, Z27
	TESTQ CX, CX
	JZ done
block:
	VMOVDQU64 (SI), Z0
	VMOVDQU64 Z0, (DI)

	Q6SUBA(0)
	Q6SUBA(1)
	Q6SUBA(2)
	Q6SUBA(3)
	Q6SUBA(4)
	Q6SUBA(5)
	Q6SUBA(6)
	Q6SUBA(7)
	Q6SUBA(8)
	Q6SUBA(9)
	Q6SUBA(10)
	Q6SUBA(11)
	Q6SUBA(12)
	Q6SUBA(13)
	Q6SUBA(14)
	Q6SUBA(15)
	ADDQ $5696, SI
	ADDQ $8256, DI
	DECQ CX
	JNZ block
done:
	VZEROUPPER
	RET

// The tiles, for one tile of 16 inputs over np panels. Tiles (kqaConfig):
// tmm0, tmm1 A (16 inputs × 64 activation bytes, taking turns by chunk),
// tmm2, tmm3 B (the lo and hi planes' chunk: 16 groups × 16 rows × 4
// bytes), tmm5, tmm6 C (16 inputs × 16 rows: Σ lo·q, Σ hi·q).
//
// Registers: DI the panel's outputs (input k at DI + k·R8), BX the
// super-block being multiplied, R10 its activation bytes (input k at
// R10 + k·R11), CX 64 (the planes' and C buffers' row stride), SI the C
// buffer being stored, R15 the one whose float steps run, R13 that one's
// super-block, R12 its inputs' scales (16 float32 dx, then for Q4_K/Q5_K
// their four (s_2u, s_2u+1) sub-block sum pairs, 16 bytes each), DX
// super-blocks left,
// R9 panels left, R14 the inputs to store. Z0–Z15 the 16 inputs' float
// sums s, Z16 and Z17 the rows' d and dmin, Z18–Z29 temporaries (Q4_K,
// Q5_K: Z22–Z25 the rows' 4 min pair vectors), Z31 NaN.
//
// Each super-block's C tiles are stored to one of two buffers, and the
// float steps of the one before run after that store, so that the vector
// units work on block b−1 while the tile unit multiplies block b.

// CHUNKSM multiplies the 64 values of chunk c: A into tmm(a), then each
// plane's B tile into tmm2, tmm3 and its product into tmm5, tmm6. CHUNK6
// is Q6_K's: the hi bytes signed (TDPBSSD).
#define CHUNKSM(a, c) \
	TILELOADD(a, AMX_R10, AMX_R11, 64*c); \
	TILELOADD(2, AMX_BX, AMX_CX, 64+1024*c); \
	TDPBSUD(5, a, 2); \
	TILELOADD(3, AMX_BX, AMX_CX, 4160+1024*c); \
	TDPBSUD(6, a, 3)

#define CHUNK6(a, c) \
	TILELOADD(a, AMX_R10, AMX_R11, 64*c); \
	TILELOADD(2, AMX_BX, AMX_CX, 64+1024*c); \
	TDPBSUD(5, a, 2); \
	TILELOADD(3, AMX_BX, AMX_CX, 4160+1024*c); \
	TDPBSSD(6, a, 3)

#define COMPSM \
	TILEZERO(5); \
	TILEZERO(6); \
	CHUNKSM(0, 0); \
	CHUNKSM(1, 1); \
	CHUNKSM(0, 2); \
	CHUNKSM(1, 3); \
	TILESTORED(AMX_SI, AMX_CX, 0, 5); \
	TILESTORED(AMX_SI, AMX_CX, 1024, 6)

#define COMP6 \
	TILEZERO(5); \
	TILEZERO(6); \
	CHUNK6(0, 0); \
	CHUNK6(1, 1); \
	CHUNK6(0, 2); \
	CHUNK6(1, 3); \
	TILESTORED(AMX_SI, AMX_CX, 0, 5); \
	TILESTORED(AMX_SI, AMX_CX, 1024, 6)

// DSC sets Z to the 16 f16 at o(R13) as float32, ±Inf made NaN (FIXNAN).
#define DSC(o, Z) \
	VCVTPH2PS o(R13), Z; \
	VFPCLASSPSZ $0x18, Z, K1; \
	VMOVAPS Z31, K1, Z

// EPIKSM is input k's float step for a Q4_K/Q5_K block (SMFLT of the VNNI
// tile, operand for operand): I = lo + hi<<8 from the C buffer at R15; M
// = Σ_u (m_2u, m_2u+1)·(s_2u, s_2u+1) by VPDPWSSD, the rows' pairs in
// Z22–Z25 and input k's sub-block sums s_j = bsums[2j] + bsums[2j+1] at
// 64+16k(R12): the same integer as the VNNI tile's eight VPDPWSSD of
// (m_j, m_j) by (bsums[2j], bsums[2j+1]) (exact int32 sums, |M| < 2^21),
// in half the instructions; s = s + (float32(I)·(d·dx) −
// float32(M)·(dmin·dx)).
#define EPIKSM(k, S) \
	VPXORD Z20, Z20, Z20; \
	VPDPWSSD.BCST (64+16*k+0)(R12), Z22, Z20; \
	VPDPWSSD.BCST (64+16*k+4)(R12), Z23, Z20; \
	VPDPWSSD.BCST (64+16*k+8)(R12), Z24, Z20; \
	VPDPWSSD.BCST (64+16*k+12)(R12), Z25, Z20; \
	VMOVDQU32 (1024+64*k)(R15), Z18; \
	VPSLLD $8, Z18, Z18; \
	VPADDD (64*k)(R15), Z18, Z18; \
	VCVTDQ2PS Z18, Z18; \
	VMULPS.BCST (4*k)(R12), Z16, Z19; \
	VMULPS Z19, Z18, Z18; \
	VCVTDQ2PS Z20, Z20; \
	VMULPS.BCST (4*k)(R12), Z17, Z21; \
	VMULPS Z21, Z20, Z20; \
	VSUBPS Z20, Z18, Z18; \
	VADDPS Z18, S, S

// EPIK6 is Q6_K's (Q6FLT): s = s + float32(I)·(d·dx).
#define EPIK6(k, S, T1, T2, T3, T4) \
	VMOVDQU32 (1024+64*k)(R15), T1; \
	VPSLLD $8, T1, T1; \
	VPADDD (64*k)(R15), T1, T1; \
	VCVTDQ2PS T1, T1; \
	VMULPS.BCST (4*k)(R12), Z16, T2; \
	VMULPS T2, T1, T1; \
	VADDPS T1, S, S

#define EPISM \
	DSC(0, Z16); \
	DSC(32, Z17); \
	VMOVDQU64 (8256+64*0)(R13), Z22; \
	VMOVDQU64 (8256+64*1)(R13), Z23; \
	VMOVDQU64 (8256+64*2)(R13), Z24; \
	VMOVDQU64 (8256+64*3)(R13), Z25; \
	EPIKSM(0, Z0); \
	EPIKSM(1, Z1); \
	EPIKSM(2, Z2); \
	EPIKSM(3, Z3); \
	EPIKSM(4, Z4); \
	EPIKSM(5, Z5); \
	EPIKSM(6, Z6); \
	EPIKSM(7, Z7); \
	EPIKSM(8, Z8); \
	EPIKSM(9, Z9); \
	EPIKSM(10, Z10); \
	EPIKSM(11, Z11); \
	EPIKSM(12, Z12); \
	EPIKSM(13, Z13); \
	EPIKSM(14, Z14); \
	EPIKSM(15, Z15)

#define EPI6 \
	DSC(0, Z16); \
	EPIK6(0, Z0, Z18, Z19, Z20, Z21); \
	EPIK6(1, Z1, Z22, Z23, Z24, Z25); \
	EPIK6(2, Z2, Z26, Z27, Z28, Z29); \
	EPIK6(3, Z3, Z18, Z19, Z20, Z21); \
	EPIK6(4, Z4, Z22, Z23, Z24, Z25); \
	EPIK6(5, Z5, Z26, Z27, Z28, Z29); \
	EPIK6(6, Z6, Z18, Z19, Z20, Z21); \
	EPIK6(7, Z7, Z22, Z23, Z24, Z25); \
	EPIK6(8, Z8, Z26, Z27, Z28, Z29); \
	EPIK6(9, Z9, Z18, Z19, Z20, Z21); \
	EPIK6(10, Z10, Z22, Z23, Z24, Z25); \
	EPIK6(11, Z11, Z26, Z27, Z28, Z29); \
	EPIK6(12, Z12, Z18, Z19, Z20, Z21); \
	EPIK6(13, Z13, Z22, Z23, Z24, Z25); \
	EPIK6(14, Z14, Z26, Z27, Z28, Z29); \
	EPIK6(15, Z15, Z18, Z19, Z20, Z21)

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

// STOREOUT writes the first R14 inputs' sums, input k's at DI + k·R8.
#define STOREOUT \
	MOVQ DI, AX; \
	VMOVUPS Z0, (AX); \
	CMPQ R14, $2; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z1, (AX); \
	CMPQ R14, $3; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z2, (AX); \
	CMPQ R14, $4; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z3, (AX); \
	CMPQ R14, $5; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z4, (AX); \
	CMPQ R14, $6; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z5, (AX); \
	CMPQ R14, $7; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z6, (AX); \
	CMPQ R14, $8; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z7, (AX); \
	CMPQ R14, $9; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z8, (AX); \
	CMPQ R14, $10; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z9, (AX); \
	CMPQ R14, $11; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z10, (AX); \
	CMPQ R14, $12; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z11, (AX); \
	CMPQ R14, $13; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z12, (AX); \
	CMPQ R14, $14; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z13, (AX); \
	CMPQ R14, $15; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z14, (AX); \
	CMPQ R14, $16; \
	JLT stored; \
	ADDQ R8, AX; \
	VMOVUPS Z15, (AX)

// KQATILE defines name(dst *float32, rows int, w *byte, np, nb int, x
// *byte, xs int, dx *byte, m int, cbuf *byte, cfg *byte) for super-blocks
// of blk bytes (matqk_amx_amd64.go, kqAMXTile).
#define KQATILE(name, blk, COMP, EPI, dxs) \
TEXT name(SB), NOSPLIT, $0-88; \
	MOVQ cfg+80(FP), AX; \
	LDTILECFG(AMX_AX, 0); \
	MOVL $0x7fc00000, AX; \
	VPBROADCASTD AX, Z31; \
	MOVQ rows+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ dst+0(FP), DI; \
	MOVQ w+16(FP), BX; \
	MOVQ np+24(FP), R9; \
	MOVQ xs+48(FP), R11; \
	MOVQ m+64(FP), R14; \
	MOVQ $64, CX; \
	TESTQ R9, R9; \
	JZ done; \
	MOVQ nb+32(FP), DX; \
	TESTQ DX, DX; \
	JZ done; \
panel: \
	MOVQ x+40(FP), R10; \
	ADDQ $4, R10; \
	MOVQ dx+56(FP), R12; \
	MOVQ cbuf+72(FP), SI; \
	LEAQ 3072(SI), R15; \
	MOVQ nb+32(FP), DX; \
	ZERO16; \
	COMP; \
	MOVQ BX, R13; \
	XCHGQ SI, R15; \
	ADDQ $blk, BX; \
	ADDQ $292, R10; \
	DECQ DX; \
loop: \
	TESTQ DX, DX; \
	JZ last; \
	COMP; \
	EPI; \
	MOVQ BX, R13; \
	XCHGQ SI, R15; \
	ADDQ $blk, BX; \
	ADDQ $292, R10; \
	ADDQ $dxs, R12; \
	DECQ DX; \
	JMP loop; \
last: \
	EPI; \
	STOREOUT; \
stored: \
	ADDQ $64, DI; \
	DECQ R9; \
	JNZ panel; \
done: \
	TILERELEASE; \
	VZEROUPPER; \
	RET

KQATILE(·kqSMAMXTile, 8512, COMPSM, EPISM, 320)
KQATILE(·kq6AMXTile, 8256, COMP6, EPI6, 64)
