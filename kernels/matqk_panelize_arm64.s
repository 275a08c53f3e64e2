//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

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

// The scales of a panel super-block, 16 rows at once: each row's 16 head
// bytes loaded into V0–V15 (row k in Vk) and transposed as a 16×16 byte
// matrix (TRN1/TRN2 on bytes, halfwords, words, doublewords), so Vc holds
// byte c of the 16 rows; the f16 scales are zipped back to 16-bit values
// and the 6-bit scales unpacked and widened with the rows as lanes.

// TRB16 transposes V0–V15 (row k in Vk) into columns (byte c of every
// row in Vc), through V16–V31.
#define TRB16 \
	VTRN1 V1.B16, V0.B16, V16.B16 \
	VTRN2 V1.B16, V0.B16, V17.B16 \
	VTRN1 V3.B16, V2.B16, V18.B16 \
	VTRN2 V3.B16, V2.B16, V19.B16 \
	VTRN1 V5.B16, V4.B16, V20.B16 \
	VTRN2 V5.B16, V4.B16, V21.B16 \
	VTRN1 V7.B16, V6.B16, V22.B16 \
	VTRN2 V7.B16, V6.B16, V23.B16 \
	VTRN1 V9.B16, V8.B16, V24.B16 \
	VTRN2 V9.B16, V8.B16, V25.B16 \
	VTRN1 V11.B16, V10.B16, V26.B16 \
	VTRN2 V11.B16, V10.B16, V27.B16 \
	VTRN1 V13.B16, V12.B16, V28.B16 \
	VTRN2 V13.B16, V12.B16, V29.B16 \
	VTRN1 V15.B16, V14.B16, V30.B16 \
	VTRN2 V15.B16, V14.B16, V31.B16 \
	VTRN1 V18.H8, V16.H8, V0.H8 \
	VTRN2 V18.H8, V16.H8, V1.H8 \
	VTRN1 V19.H8, V17.H8, V2.H8 \
	VTRN2 V19.H8, V17.H8, V3.H8 \
	VTRN1 V22.H8, V20.H8, V4.H8 \
	VTRN2 V22.H8, V20.H8, V5.H8 \
	VTRN1 V23.H8, V21.H8, V6.H8 \
	VTRN2 V23.H8, V21.H8, V7.H8 \
	VTRN1 V26.H8, V24.H8, V8.H8 \
	VTRN2 V26.H8, V24.H8, V9.H8 \
	VTRN1 V27.H8, V25.H8, V10.H8 \
	VTRN2 V27.H8, V25.H8, V11.H8 \
	VTRN1 V30.H8, V28.H8, V12.H8 \
	VTRN2 V30.H8, V28.H8, V13.H8 \
	VTRN1 V31.H8, V29.H8, V14.H8 \
	VTRN2 V31.H8, V29.H8, V15.H8 \
	VTRN1 V4.S4, V0.S4, V16.S4 \
	VTRN2 V4.S4, V0.S4, V17.S4 \
	VTRN1 V5.S4, V1.S4, V18.S4 \
	VTRN2 V5.S4, V1.S4, V19.S4 \
	VTRN1 V6.S4, V2.S4, V20.S4 \
	VTRN2 V6.S4, V2.S4, V21.S4 \
	VTRN1 V7.S4, V3.S4, V22.S4 \
	VTRN2 V7.S4, V3.S4, V23.S4 \
	VTRN1 V12.S4, V8.S4, V24.S4 \
	VTRN2 V12.S4, V8.S4, V25.S4 \
	VTRN1 V13.S4, V9.S4, V26.S4 \
	VTRN2 V13.S4, V9.S4, V27.S4 \
	VTRN1 V14.S4, V10.S4, V28.S4 \
	VTRN2 V14.S4, V10.S4, V29.S4 \
	VTRN1 V15.S4, V11.S4, V30.S4 \
	VTRN2 V15.S4, V11.S4, V31.S4 \
	VTRN1 V24.D2, V16.D2, V0.D2 \
	VTRN2 V24.D2, V16.D2, V8.D2 \
	VTRN1 V25.D2, V17.D2, V4.D2 \
	VTRN2 V25.D2, V17.D2, V12.D2 \
	VTRN1 V26.D2, V18.D2, V2.D2 \
	VTRN2 V26.D2, V18.D2, V10.D2 \
	VTRN1 V27.D2, V19.D2, V6.D2 \
	VTRN2 V27.D2, V19.D2, V14.D2 \
	VTRN1 V28.D2, V20.D2, V1.D2 \
	VTRN2 V28.D2, V20.D2, V9.D2 \
	VTRN1 V29.D2, V21.D2, V5.D2 \
	VTRN2 V29.D2, V21.D2, V13.D2 \
	VTRN1 V30.D2, V22.D2, V3.D2 \
	VTRN2 V30.D2, V22.D2, V11.D2 \
	VTRN1 V31.D2, V23.D2, V7.D2 \
	VTRN2 V31.D2, V23.D2, V15.D2

// LOAD16 loads 16 bytes at off of each of the 16 rows at R1 + k·rb (R2)
// into Vk.
#define LOAD16(off) \
	ADD $off, R1, R5 \
	VLD1.P (R5)(R2), [V0.B16] \
	VLD1.P (R5)(R2), [V1.B16] \
	VLD1.P (R5)(R2), [V2.B16] \
	VLD1.P (R5)(R2), [V3.B16] \
	VLD1.P (R5)(R2), [V4.B16] \
	VLD1.P (R5)(R2), [V5.B16] \
	VLD1.P (R5)(R2), [V6.B16] \
	VLD1.P (R5)(R2), [V7.B16] \
	VLD1.P (R5)(R2), [V8.B16] \
	VLD1.P (R5)(R2), [V9.B16] \
	VLD1.P (R5)(R2), [V10.B16] \
	VLD1.P (R5)(R2), [V11.B16] \
	VLD1.P (R5)(R2), [V12.B16] \
	VLD1.P (R5)(R2), [V13.B16] \
	VLD1.P (R5)(R2), [V14.B16] \
	VLD1.P (R5)(R2), [V15.B16]

// NOINF makes each ±Inf f16 lane of v the NaN 0x7e00 (V29 = 0x7fff, V30
// = 0x7c00, V31 = 0x7e00 in every halfword lane; t scratch).
#define NOINF(v, t) \
	VAND  V29.B16, v.B16, t.B16 \
	VCMEQ V30.H8, t.H8, t.H8 \
	VBIT  t.B16, V31.B16, v.B16

#define NOINFSET \
	MOVW  $0x7fff, R6 \
	VDUP  R6, V29.H8 \
	MOVW  $0x7c00, R6 \
	VDUP  R6, V30.H8 \
	MOVW  $0x7e00, R6 \
	VDUP  R6, V31.H8

// WIDEN8 stores the 16 bytes of v (a row each) as 16 uint32 at R3,
// advancing 64 (UXTL, unsigned) or as 16 int32 (SXTL, signed).
#define WIDEN8(v, XTL, XTL2) \
	XTL  v.B8, V2.H8 \
	XTL2 v.B16, V3.H8 \
	XTL  V2.H4, V4.S4 \
	XTL2 V2.H8, V5.S4 \
	XTL  V3.H4, V6.S4 \
	XTL2 V3.H8, V7.S4 \
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R3)

// PAIRS8 stores the 16 bytes of v as 16 (m, m) uint16 pairs at R4,
// advancing 64.
#define PAIRS8(v) \
	VUXTL  v.B8, V2.H8 \
	VUXTL2 v.B16, V3.H8 \
	VZIP1  V2.H8, V2.H8, V4.H8 \
	VZIP2  V2.H8, V2.H8, V5.H8 \
	VZIP1  V3.H8, V3.H8, V6.H8 \
	VZIP2  V3.H8, V3.H8, V7.H8 \
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R4)

// func kqScalesSMNEON(dst, src *byte, rb int)
// The d, dmin (±Inf made NaN), int32 scales and (m, m) min pairs of a
// Q4_K/Q5_K panel super-block at dst, from the 16 blocks' heads at src +
// k·rb: panelizeSMScales's bytes (words false) for all 16 rows.
TEXT ·kqScalesSMNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD rb+16(FP), R2
	LOAD16(0)
	TRB16
	// d: columns 0, 1 zipped into f16 rows 0–7, 8–15; dmin: columns 2, 3.
	VZIP1 V1.B16, V0.B16, V16.B16
	VZIP2 V1.B16, V0.B16, V17.B16
	VZIP1 V3.B16, V2.B16, V18.B16
	VZIP2 V3.B16, V2.B16, V19.B16
	NOINFSET
	NOINF(V16, V0)
	NOINF(V17, V0)
	NOINF(V18, V0)
	NOINF(V19, V0)
	VST1 [V16.B16, V17.B16, V18.B16, V19.B16], (R0)
	// The packed scales q[i] are columns 4+i (ggml's get_scale_min_k4):
	// sc_j, j < 4: q[j]&63, m_j: q[j+4]&63; j ≥ 4: sc_j = q[j+4]&15 |
	// (q[j−4]>>6)<<4, m_j = q[j+4]>>4 | (q[j]>>6)<<4. sc_j into V(16+j),
	// m_j into V(24+j); V0 = 63, V1 = 15, V2 scratch.
	VMOVI $63, V0.B16
	VMOVI $15, V1.B16
	VAND  V0.B16, V4.B16, V16.B16
	VAND  V0.B16, V5.B16, V17.B16
	VAND  V0.B16, V6.B16, V18.B16
	VAND  V0.B16, V7.B16, V19.B16
	VAND  V0.B16, V8.B16, V24.B16
	VAND  V0.B16, V9.B16, V25.B16
	VAND  V0.B16, V10.B16, V26.B16
	VAND  V0.B16, V11.B16, V27.B16
	VAND  V1.B16, V12.B16, V20.B16
	VUSHR $6, V4.B16, V2.B16
	VSLI  $4, V2.B16, V20.B16
	VAND  V1.B16, V13.B16, V21.B16
	VUSHR $6, V5.B16, V2.B16
	VSLI  $4, V2.B16, V21.B16
	VAND  V1.B16, V14.B16, V22.B16
	VUSHR $6, V6.B16, V2.B16
	VSLI  $4, V2.B16, V22.B16
	VAND  V1.B16, V15.B16, V23.B16
	VUSHR $6, V7.B16, V2.B16
	VSLI  $4, V2.B16, V23.B16
	VUSHR $4, V12.B16, V28.B16
	VUSHR $6, V8.B16, V2.B16
	VSLI  $4, V2.B16, V28.B16
	VUSHR $4, V13.B16, V29.B16
	VUSHR $6, V9.B16, V2.B16
	VSLI  $4, V2.B16, V29.B16
	VUSHR $4, V14.B16, V30.B16
	VUSHR $6, V10.B16, V2.B16
	VSLI  $4, V2.B16, V30.B16
	VUSHR $4, V15.B16, V31.B16
	VUSHR $6, V11.B16, V2.B16
	VSLI  $4, V2.B16, V31.B16
	ADD   $64, R0, R3
	ADD   $576, R0, R4
	WIDEN8(V16, VUXTL, VUXTL2)
	WIDEN8(V17, VUXTL, VUXTL2)
	WIDEN8(V18, VUXTL, VUXTL2)
	WIDEN8(V19, VUXTL, VUXTL2)
	WIDEN8(V20, VUXTL, VUXTL2)
	WIDEN8(V21, VUXTL, VUXTL2)
	WIDEN8(V22, VUXTL, VUXTL2)
	WIDEN8(V23, VUXTL, VUXTL2)
	PAIRS8(V24)
	PAIRS8(V25)
	PAIRS8(V26)
	PAIRS8(V27)
	PAIRS8(V28)
	PAIRS8(V29)
	PAIRS8(V30)
	PAIRS8(V31)
	RET

// SWIDEN stores column s (16 int8 scales) as 16 int32 at R3, advancing
// 64; V16–V21 scratch.
#define SWIDEN(s) \
	SXTL8H(16, s) \
	SXTL2_8H(17, s) \
	SXTL4S(18, 16) \
	SXTL2_4S(19, 16) \
	SXTL4S(20, 17) \
	SXTL2_4S(21, 17) \
	VST1.P [V18.S4, V19.S4, V20.S4, V21.S4], 64(R3)

// func kqScales6NEON(dst, src *byte, rb int)
// The d (±Inf made NaN) and sign-extended int32 scales of a Q6_K panel
// super-block at dst, from the 16 blocks at src + k·rb: panelizeQ6K's
// bytes (words false) but for the (sc, sc) pairs at 1088, which the arm64
// tiles do not read and this leaves unwritten.
TEXT ·kqScales6NEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD rb+16(FP), R2
	ADD  $208, R1, R5
	VLD1.P (R5)(R2), V22.H[0]
	VLD1.P (R5)(R2), V22.H[1]
	VLD1.P (R5)(R2), V22.H[2]
	VLD1.P (R5)(R2), V22.H[3]
	VLD1.P (R5)(R2), V22.H[4]
	VLD1.P (R5)(R2), V22.H[5]
	VLD1.P (R5)(R2), V22.H[6]
	VLD1.P (R5)(R2), V22.H[7]
	VLD1.P (R5)(R2), V23.H[0]
	VLD1.P (R5)(R2), V23.H[1]
	VLD1.P (R5)(R2), V23.H[2]
	VLD1.P (R5)(R2), V23.H[3]
	VLD1.P (R5)(R2), V23.H[4]
	VLD1.P (R5)(R2), V23.H[5]
	VLD1.P (R5)(R2), V23.H[6]
	VLD1.P (R5)(R2), V23.H[7]
	NOINFSET
	NOINF(V22, V24)
	NOINF(V23, V24)
	VST1 [V22.B16, V23.B16], (R0)
	LOAD16(192)
	TRB16
	ADD $64, R0, R3
	SWIDEN(0)
	SWIDEN(1)
	SWIDEN(2)
	SWIDEN(3)
	SWIDEN(4)
	SWIDEN(5)
	SWIDEN(6)
	SWIDEN(7)
	SWIDEN(8)
	SWIDEN(9)
	SWIDEN(10)
	SWIDEN(11)
	SWIDEN(12)
	SWIDEN(13)
	SWIDEN(14)
	SWIDEN(15)
	RET
