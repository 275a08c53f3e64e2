//go:build arm64 && !purego

#include "textflag.h"

// The level transposition of a K-quant panel super-block (kqPanelizeNEON,
// matqk_panel_arm64.go): the 16 rows' levels, one byte each, into 64
// groups of 64 bytes (group g = values 4g…4g+3 of rows 0…15, row k at
// 4k). Four rows at a time: each row's levels unpacked into registers of
// 16 values (4 words of 4 values), the four rows' registers transposed as
// a 4×4 matrix of words (TRN1/TRN2 on words, then on doublewords), so a
// register holds one group's bytes for the 4 rows, stored at 16 bytes per
// quad into the group (R5, advancing 64 a group, every group in order).
//
// Registers: R0 the quad's first group, R1–R4 the quad's blocks, R6 rb,
// R7 quads left, R9 = 64, R5 the store pointer, R8 and R10–R13 addresses;
// V0–V15 unpacked levels, V16–V23 transposition and unpacking
// temporaries, V28–V31 masks.

// TR4 transposes the words of rows a, b, c, d (16 values each) and stores
// the 4 groups.
#define TR4(a, b, c, d) \
	VTRN1 b.S4, a.S4, V16.S4 \
	VTRN2 b.S4, a.S4, V17.S4 \
	VTRN1 d.S4, c.S4, V18.S4 \
	VTRN2 d.S4, c.S4, V19.S4 \
	VTRN1 V18.D2, V16.D2, V20.D2 \
	VTRN1 V19.D2, V17.D2, V21.D2 \
	VTRN2 V18.D2, V16.D2, V22.D2 \
	VTRN2 V19.D2, V17.D2, V23.D2 \
	VST1.P [V20.B16], (R5)(R9) \
	VST1.P [V21.B16], (R5)(R9) \
	VST1.P [V22.B16], (R5)(R9) \
	VST1.P [V23.B16], (R5)(R9)

// QUADS runs BODY for the 4 quads of rows: R1–R4 the quad's blocks, R5
// its first group.
#define QUADS(BODY) \
	MOVD dst+0(FP), R0 \
	MOVD src+8(FP), R1 \
	MOVD rb+16(FP), R6 \
	MOVD $64, R9 \
	MOVD $4, R7 \
quad: \
	ADD  R6, R1, R2 \
	ADD  R6, R2, R3 \
	ADD  R6, R3, R4 \
	MOVD R0, R5 \
	BODY \
	ADD  $16, R0 \
	ADD  R6<<2, R1 \
	SUBS $1, R7 \
	BNE  quad \
	RET

// SMCHUNK loads the next 32 nibble bytes of the 4 rows (at R10–R13,
// advancing): byte l holds level 64c+l low and 64c+32+l high, so the low
// nibbles of bytes 0–15 and 16–31 go to V0/V1 (row 0), V2/V3 … V6/V7 and
// the high ones to V8/V9 … V14/V15.
#define SMCHUNK \
	VLD1.P 32(R10), [V0.B16, V1.B16] \
	VLD1.P 32(R11), [V2.B16, V3.B16] \
	VLD1.P 32(R12), [V4.B16, V5.B16] \
	VLD1.P 32(R13), [V6.B16, V7.B16] \
	VUSHR $4, V0.B16, V8.B16 \
	VUSHR $4, V1.B16, V9.B16 \
	VUSHR $4, V2.B16, V10.B16 \
	VUSHR $4, V3.B16, V11.B16 \
	VUSHR $4, V4.B16, V12.B16 \
	VUSHR $4, V5.B16, V13.B16 \
	VUSHR $4, V6.B16, V14.B16 \
	VUSHR $4, V7.B16, V15.B16 \
	VAND V31.B16, V0.B16, V0.B16 \
	VAND V31.B16, V1.B16, V1.B16 \
	VAND V31.B16, V2.B16, V2.B16 \
	VAND V31.B16, V3.B16, V3.B16 \
	VAND V31.B16, V4.B16, V4.B16 \
	VAND V31.B16, V5.B16, V5.B16 \
	VAND V31.B16, V6.B16, V6.B16 \
	VAND V31.B16, V7.B16, V7.B16

// SMSTORE stores the chunk's 64 values of the 4 rows (16 groups).
#define SMSTORE \
	TR4(V0, V2, V4, V6) \
	TR4(V1, V3, V5, V7) \
	TR4(V8, V10, V12, V14) \
	TR4(V9, V11, V13, V15)

// QS points R10–R13 at the quad's nibbles, off bytes into each block.
#define QS(off) \
	ADD $off, R1, R10 \
	ADD $off, R2, R11 \
	ADD $off, R3, R12 \
	ADD $off, R4, R13

#define Q4BODY \
	QS(16) \
	SMCHUNK \
	SMSTORE \
	SMCHUNK \
	SMSTORE \
	SMCHUNK \
	SMSTORE \
	SMCHUNK \
	SMSTORE

// func kqLevelsQ4NEON(dst, src *byte, rb int)
// The Q4_K levels of the 16 blocks at src + k·rb into the 4096 level
// bytes at dst.
TEXT ·kqLevelsQ4NEON(SB), NOSPLIT, $0-24
	VMOVI $15, V31.B16
	QUADS(Q4BODY)

// Q5HI inserts bit s0 of the row's qh (at 16(R), 32 bytes) at bit 4 of
// its low levels lo0/lo1 and bit s0+1 at bit 4 of its high levels
// hi0/hi1 (chunk c: s0 = 2c ≥ 2; Q5HI0 is chunk 0). V30 is the byte 1.
#define Q5HI(R, lo0, lo1, hi0, hi1, s0, s1) \
	ADD   $16, R, R8 \
	VLD1  (R8), [V16.B16, V17.B16] \
	VUSHR $s0, V16.B16, V18.B16 \
	VUSHR $s0, V17.B16, V19.B16 \
	VUSHR $s1, V16.B16, V20.B16 \
	VUSHR $s1, V17.B16, V21.B16 \
	Q5INS(lo0, lo1, hi0, hi1)

#define Q5HI0(R, lo0, lo1, hi0, hi1) \
	ADD   $16, R, R8 \
	VLD1  (R8), [V18.B16, V19.B16] \
	VUSHR $1, V18.B16, V20.B16 \
	VUSHR $1, V19.B16, V21.B16 \
	Q5INS(lo0, lo1, hi0, hi1)

#define Q5INS(lo0, lo1, hi0, hi1) \
	VAND V30.B16, V18.B16, V18.B16 \
	VAND V30.B16, V19.B16, V19.B16 \
	VAND V30.B16, V20.B16, V20.B16 \
	VAND V30.B16, V21.B16, V21.B16 \
	VSLI $4, V18.B16, lo0.B16 \
	VSLI $4, V19.B16, lo1.B16 \
	VSLI $4, V20.B16, hi0.B16 \
	VSLI $4, V21.B16, hi1.B16

#define Q5CHUNK(s0, s1) \
	SMCHUNK \
	Q5HI(R1, V0, V1, V8, V9, s0, s1) \
	Q5HI(R2, V2, V3, V10, V11, s0, s1) \
	Q5HI(R3, V4, V5, V12, V13, s0, s1) \
	Q5HI(R4, V6, V7, V14, V15, s0, s1) \
	SMSTORE

#define Q5BODY \
	QS(48) \
	SMCHUNK \
	Q5HI0(R1, V0, V1, V8, V9) \
	Q5HI0(R2, V2, V3, V10, V11) \
	Q5HI0(R3, V4, V5, V12, V13) \
	Q5HI0(R4, V6, V7, V14, V15) \
	SMSTORE \
	Q5CHUNK(2, 3) \
	Q5CHUNK(4, 5) \
	Q5CHUNK(6, 7)

// func kqLevelsQ5NEON(dst, src *byte, rb int)
// The Q5_K levels of the 16 blocks at src + k·rb (qh at 16, nibbles at
// 48) into the 4096 level bytes at dst.
TEXT ·kqLevelsQ5NEON(SB), NOSPLIT, $0-24
	VMOVI $15, V31.B16
	VMOVI $1, V30.B16
	QUADS(Q5BODY)

// Q6_K: in half n, 32 values g (0…3) take the nibbles of ql[64n…64n+31]
// (g even) or ql[64n+32…64n+63] (odd), low (g < 2) or high, and bits 2g,
// 2g+1 of qh[128+32n…128+32n+31] above them; stored minus 32 (signed).
// Q6LD loads the row's 32 nibble bytes at ql(R) into V16/V17 and its 32
// qh bytes at qh(R) into V18/V19.
#define Q6LD(R, ql, qh) \
	ADD  $ql, R, R8 \
	VLD1 (R8), [V16.B16, V17.B16] \
	ADD  $qh, R, R8 \
	VLD1 (R8), [V18.B16, V19.B16]

// Q6LV makes the level bytes o0/o1 from nibbles V16/V17 (already shifted)
// and the 2 bits in V18/V19's low bits (already shifted; masked unless g
// = 3), minus 32. V28 the byte 15, V29 the byte 3, V30 the byte 32.
#define Q6LV(o0, o1) \
	VSLI $4, V18.B16, o0.B16 \
	VSLI $4, V19.B16, o1.B16 \
	VSUB V30.B16, o0.B16, o0.B16 \
	VSUB V30.B16, o1.B16, o1.B16

#define Q6G0(R, n, o0, o1) \
	Q6LD(R, 64*n, 128+32*n) \
	VAND V28.B16, V16.B16, o0.B16 \
	VAND V28.B16, V17.B16, o1.B16 \
	VAND V29.B16, V18.B16, V18.B16 \
	VAND V29.B16, V19.B16, V19.B16 \
	Q6LV(o0, o1)

#define Q6G1(R, n, o0, o1) \
	Q6LD(R, 64*n+32, 128+32*n) \
	VAND  V28.B16, V16.B16, o0.B16 \
	VAND  V28.B16, V17.B16, o1.B16 \
	VUSHR $2, V18.B16, V18.B16 \
	VUSHR $2, V19.B16, V19.B16 \
	VAND  V29.B16, V18.B16, V18.B16 \
	VAND  V29.B16, V19.B16, V19.B16 \
	Q6LV(o0, o1)

#define Q6G2(R, n, o0, o1) \
	Q6LD(R, 64*n, 128+32*n) \
	VUSHR $4, V16.B16, o0.B16 \
	VUSHR $4, V17.B16, o1.B16 \
	VUSHR $4, V18.B16, V18.B16 \
	VUSHR $4, V19.B16, V19.B16 \
	VAND  V29.B16, V18.B16, V18.B16 \
	VAND  V29.B16, V19.B16, V19.B16 \
	Q6LV(o0, o1)

#define Q6G3(R, n, o0, o1) \
	Q6LD(R, 64*n+32, 128+32*n) \
	VUSHR $4, V16.B16, o0.B16 \
	VUSHR $4, V17.B16, o1.B16 \
	VUSHR $6, V18.B16, V18.B16 \
	VUSHR $6, V19.B16, V19.B16 \
	Q6LV(o0, o1)

// Q6GROUP is values 128n+32g…+31 of the 4 rows: 8 groups.
#define Q6GROUP(G, n) \
	G(R1, n, V0, V1) \
	G(R2, n, V2, V3) \
	G(R3, n, V4, V5) \
	G(R4, n, V6, V7) \
	TR4(V0, V2, V4, V6) \
	TR4(V1, V3, V5, V7)

#define Q6BODY \
	Q6GROUP(Q6G0, 0) \
	Q6GROUP(Q6G1, 0) \
	Q6GROUP(Q6G2, 0) \
	Q6GROUP(Q6G3, 0) \
	Q6GROUP(Q6G0, 1) \
	Q6GROUP(Q6G1, 1) \
	Q6GROUP(Q6G2, 1) \
	Q6GROUP(Q6G3, 1)

// func kqLevelsQ6NEON(dst, src *byte, rb int)
// The Q6_K levels minus 32 of the 16 blocks at src + k·rb into the 4096
// level bytes at dst.
TEXT ·kqLevelsQ6NEON(SB), NOSPLIT, $0-24
	VMOVI $15, V28.B16
	VMOVI $3, V29.B16
	VMOVI $32, V30.B16
	QUADS(Q6BODY)
