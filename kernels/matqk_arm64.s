//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// The Q4_K, Q5_K and Q6_K products over Q8_K activations in NEON
// (matqk_arm64.go states the arithmetic). Each super-block's integer sums
// are exact int32: the weight levels (0..15, 0..31, 0..63) are unsigned
// bytes below 2^7, so they are valid signed operands of SDOT or SMULL, and
// every product of a level and an activation fits int16 (63·128). Sub-block
// k's dot, in the int32 lanes of a fresh accumulator, is multiplied by its
// scale and added into the lanes of I (MLA by element); lanes are summed
// once per super-block. The float steps follow, each rounded on its own.
//
// Registers: R0 the weight row, R1 (and R5–R7 in a tile) the activation
// rows, R2 the super-block count, R3 quantScaleTable. V9/V10 d and dmin
// (float32), V11 dx (lane k: input k in a tile), V30 the running sum (lane
// k: input k), V24/V25 the Q4_K/Q5_K scales as int32 (sub-blocks 0–3, 4–7)
// and V27 its mins as int16, V24–V27 Q6_K's sixteen scales as int32.

// DOTK_SM and DOTK1_SM are DOT_SM and DOT1_SM (neon_arm64.h) for weights
// that are levels 0..63: each int16 lane of t takes the products of two
// (DOTK1) or four (DOTK) byte pairs, at most 4·63·128 = 32256 < 2^15, so
// the sums stay exact, and one pairwise widening add (SADDLP) makes the
// int32 lanes.
#define DOTK_SM(acc, a, b, x0, x1, t) \
	SMULL(t, a, x0) \
	SMLAL2_16B(t, a, x0) \
	SMLAL8B(t, b, x1) \
	SMLAL2_16B(t, b, x1) \
	SADDLP(acc, t)

#define DOTK1_SM(acc, a, x0, t) \
	SMULL(t, a, x0) \
	SMLAL2_16B(t, a, x0) \
	SADDLP(acc, t)

// KHDR: d and dmin of the Q4_K/Q5_K block at R0 into F9 and F10 (f16
// through the table: ±Inf made NaN).
#define KHDR \
	MOVHU (R0), R4 \
	MOVHU 2(R0), R5 \
	FMOVS (R3)(R4<<2), F9 \
	FMOVS (R3)(R5<<2), F10

// KHDRT is KHDR for a tile (R5 holds an input there).
#define KHDRT \
	MOVHU (R0), R4 \
	MOVHU 2(R0), R13 \
	FMOVS (R3)(R4<<2), F9 \
	FMOVS (R3)(R13<<2), F10

// KSCALES unpacks the twelve 6-bit scale/min bytes at 4(R0) (ggml's
// get_scale_min_k4, four at a time in 32-bit words): scales 0–7 widened to
// int32 into V24 and V25, mins 0–7 to int16 into V27. R10–R14, V26 and
// V28 are scratch.
#define KSCALES \
	MOVWU 4(R0), R10 \
	MOVWU 8(R0), R11 \
	MOVWU 12(R0), R12 \
	LSRW $4, R12, R13 \
	ANDW $0x0f0f0f0f, R13, R13 \
	LSRW $6, R11, R14 \
	ANDW $0x03030303, R14, R14 \
	ORRW R14<<4, R13, R13 \
	ANDW $0x0f0f0f0f, R12, R12 \
	LSRW $6, R10, R14 \
	ANDW $0x03030303, R14, R14 \
	ORRW R14<<4, R12, R12 \
	ANDW $0x3f3f3f3f, R11, R11 \
	ANDW $0x3f3f3f3f, R10, R10 \
	ORR  R12<<32, R10, R10 \
	ORR  R13<<32, R11, R11 \
	VMOV R10, V26.D[0] \
	VMOV R11, V26.D[1] \
	VUXTL V26.B8, V28.H8 \
	VUXTL2 V26.B16, V27.H8 \
	VUXTL V28.H4, V24.S4 \
	VUXTL2 V28.H8, V25.S4

// Q4_K: the block's header is 16 bytes, then 128 bytes of nibbles: byte l
// of each 32 holds level l of sub-block 2j (low) and of 2j+1 (high).
#define K4SET VMOVI $15, V31.B16
#define K4PRE ADD $16, R0

// K4UNPACK: the next 64 levels (sub-blocks 2j, 2j+1) into V0, V1 and V2,
// V3, advancing R0.
#define K4UNPACK \
	VLD1.P 32(R0), [V0.B16, V1.B16] \
	VUSHR $4, V0.B16, V2.B16 \
	VUSHR $4, V1.B16, V3.B16 \
	VAND V31.B16, V0.B16, V0.B16 \
	VAND V31.B16, V1.B16, V1.B16

// Q5_K: the header, 32 bytes of high bits qh (bit 2j of byte l for level l
// of sub-block 2j, bit 2j+1 for 2j+1), then Q4_K's nibbles. V12/V13 hold
// qh shifted right by 2j; V31 is the byte 1, V8 the byte 2.
#define K5SET \
	VMOVI $1, V31.B16 \
	VMOVI $2, V8.B16

#define K5PRE \
	ADD $16, R0 \
	VLD1.P 32(R0), [V12.B16, V13.B16]

// K5UNPACK: high level = (bit 1 of qh)<<4 with the high nibble inserted
// below it (SRI); low level = the raw byte with (bit 0 of qh) inserted at
// bit 4 above its low nibble (SLI). V14/V15 scratch.
#define K5UNPACK \
	VLD1.P 32(R0), [V0.B16, V1.B16] \
	VAND V8.B16, V12.B16, V2.B16 \
	VAND V8.B16, V13.B16, V3.B16 \
	VSHL $3, V2.B16, V2.B16 \
	VSHL $3, V3.B16, V3.B16 \
	VSRI $4, V0.B16, V2.B16 \
	VSRI $4, V1.B16, V3.B16 \
	VAND V31.B16, V12.B16, V14.B16 \
	VAND V31.B16, V13.B16, V15.B16 \
	VSLI $4, V14.B16, V0.B16 \
	VSLI $4, V15.B16, V1.B16 \
	VUSHR $2, V12.B16, V12.B16 \
	VUSHR $2, V13.B16, V13.B16

// KSTEP: one input's 64 values at RX (advancing) against the levels in
// V0–V3: acc += dot(sub-block 2j)·scale SL[il] + dot(2j+1)·SH[ih].
#define KSTEP(DOT, RX, acc, SL, il, SH, ih) \
	VLD1.P 64(RX), [V4.B16, V5.B16, V6.B16, V7.B16] \
	DOT(16, 0, 1, 4, 5, 20) \
	DOT(17, 2, 3, 6, 7, 21) \
	MLAE(acc, 16, SL, il) \
	MLAE(acc, 17, SH, ih)

// KMINS: the int32 lanes of acc to partial sums of Σ_j m_j·(bsums[2j] +
// bsums[2j+1]) of the input's bsums at RX (advancing past the block).
#define KMINS(RX, acc) \
	VLD1.P 32(RX), [V4.H8, V5.H8] \
	VADDP V5.H8, V4.H8, V4.H8 \
	SMULL4H(acc, 4, 27) \
	SMLAL2_8H(acc, 4, 27)

// func qNkDotXX(w, x *byte, nb int, tab *float32) float32 (Q4_K, Q5_K)
#define KDOT(name, SET, PRE, UNPACK, DOT) \
TEXT name(SB), NOSPLIT, $0-36 \
	MOVD w+0(FP), R0 \
	MOVD x+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD tab+24(FP), R3 \
	SET \
	ZERO(30) \
loop: \
	KHDR \
	KSCALES \
	PRE \
	FMOVS.P 4(R1), F11 \
	ZERO(18) \
	UNPACK \
	KSTEP(DOT, R1, 18, 24, 0, 24, 1) \
	UNPACK \
	KSTEP(DOT, R1, 18, 24, 2, 24, 3) \
	UNPACK \
	KSTEP(DOT, R1, 18, 25, 0, 25, 1) \
	UNPACK \
	KSTEP(DOT, R1, 18, 25, 2, 25, 3) \
	KMINS(R1, 26) \
	ADDV4S(26, 26) \
	ADDV4S(18, 18) \
	SCVTFS(18, 18) \
	SCVTFS(26, 26) \
	FMULS F11, F9, F12 \
	FMULS F11, F10, F13 \
	FMULS F18, F12, F12 \
	FMULS F26, F13, F13 \
	FSUBS F13, F12, F12 \
	FADDS F12, F30, F30 \
	SUBS $1, R2, R2 \
	BNE  loop \
	FMOVS F30, ret+32(FP) \
	RET

// The tiles: one weight row against four inputs at x + k·xs (R1, R5, R6,
// R7), each block's levels unpacked once; input k's sums are lane k of V30
// and its float steps the dot kernel's, lane by lane.

// KTDX: the four inputs' dx into the lanes of V11.
#define KTDX \
	VLD1.P 4(R1), V11.S[0] \
	VLD1.P 4(R5), V11.S[1] \
	VLD1.P 4(R6), V11.S[2] \
	VLD1.P 4(R7), V11.S[3]

#define KTSTEP4(DOT, SL, il, SH, ih) \
	KSTEP(DOT, R1, 18, SL, il, SH, ih) \
	KSTEP(DOT, R5, 19, SL, il, SH, ih) \
	KSTEP(DOT, R6, 22, SL, il, SH, ih) \
	KSTEP(DOT, R7, 23, SL, il, SH, ih)

// KTSTORE: lane k of V30 to out + k·os.
#define KTSTORE \
	MOVD  out+32(FP), R9 \
	MOVD  os+40(FP), R10 \
	FMOVS F30, (R9) \
	ADD   R10, R9 \
	VMOV  V30.S[1], R11 \
	MOVW  R11, (R9) \
	ADD   R10, R9 \
	VMOV  V30.S[2], R11 \
	MOVW  R11, (R9) \
	ADD   R10, R9 \
	VMOV  V30.S[3], R11 \
	MOVW  R11, (R9)

#define TPROLOGUE \
	MOVD w+0(FP), R0 \
	MOVD x+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD xs+24(FP), R12 \
	MOVD tab+48(FP), R3 \
	ADD  R12, R1, R5 \
	ADD  R12, R5, R6 \
	ADD  R12, R6, R7 \
	ZERO(30)

// func qNkTileXX(w, x *byte, nb, xs int, out *float32, os int, tab *float32) (Q4_K, Q5_K)
#define KTILE(name, SET, PRE, UNPACK, DOT) \
TEXT name(SB), NOSPLIT, $0-56 \
	TPROLOGUE \
	SET \
loop: \
	KHDRT \
	KSCALES \
	PRE \
	KTDX \
	ZERO(18) \
	ZERO(19) \
	ZERO(22) \
	ZERO(23) \
	UNPACK \
	KTSTEP4(DOT, 24, 0, 24, 1) \
	UNPACK \
	KTSTEP4(DOT, 24, 2, 24, 3) \
	UNPACK \
	KTSTEP4(DOT, 25, 0, 25, 1) \
	UNPACK \
	KTSTEP4(DOT, 25, 2, 25, 3) \
	KMINS(R1, 0) \
	KMINS(R5, 1) \
	KMINS(R6, 2) \
	KMINS(R7, 3) \
	VADDP V19.S4, V18.S4, V18.S4 \
	VADDP V23.S4, V22.S4, V22.S4 \
	VADDP V22.S4, V18.S4, V18.S4 \
	VADDP V1.S4, V0.S4, V0.S4 \
	VADDP V3.S4, V2.S4, V2.S4 \
	VADDP V2.S4, V0.S4, V0.S4 \
	SCVTF4S(18, 18) \
	SCVTF4S(0, 0) \
	FMUL4SE0(12, 11, 9) \
	FMUL4SE0(13, 11, 10) \
	FMUL4S(12, 12, 18) \
	FMUL4S(13, 13, 0) \
	FSUB4S(12, 12, 13) \
	FADD4S(30, 30, 12) \
	SUBS $1, R2, R2 \
	BNE  loop \
	KTSTORE \
	RET

// Q6_K: 128 bytes ql (low nibbles), 64 bytes qh (2-bit highs), 16 int8
// scales, f16 d (210 bytes). Per half h (128 levels), with Q the 64 ql
// bytes and H the 32 qh bytes of the half, level 32g+l (l < 32) is
//
//	g=0: Q[l]&15 | (H[l]&3)<<4        g=2: Q[l]>>4 | (H[l]>>4&3)<<4
//	g=1: Q[l+32]&15 | (H[l]>>2&3)<<4  g=3: Q[l+32]>>4 | (H[l]>>6)<<4
//
// (before ggml's −32, taken in the integers as −32·bsums). V31 is the byte
// 3, V8 the byte 0x30; R8 walks qh.

// Q6UNPACK: the next half's 128 levels into V0, V1 (sub-blocks 0, 1), V2,
// V3 (2, 3), V12, V13 (4, 5), V14, V15 (6, 7), advancing R0 and R8; V20–V23
// scratch. g=2 and g=3 take the high nibble under H's bits by SRI (after
// g=3's H>>2 the bits above 5 are zero); g=0 and g=1 insert their two bits
// above the raw byte's low nibble by SLI.
#define Q6UNPACK \
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16] \
	VLD1.P 32(R8), [V22.B16, V23.B16] \
	VAND V8.B16, V22.B16, V12.B16 \
	VAND V8.B16, V23.B16, V13.B16 \
	VSRI $4, V0.B16, V12.B16 \
	VSRI $4, V1.B16, V13.B16 \
	VAND V31.B16, V22.B16, V20.B16 \
	VAND V31.B16, V23.B16, V21.B16 \
	VSLI $4, V20.B16, V0.B16 \
	VSLI $4, V21.B16, V1.B16 \
	VUSHR $2, V22.B16, V14.B16 \
	VUSHR $2, V23.B16, V15.B16 \
	VAND V31.B16, V14.B16, V20.B16 \
	VAND V31.B16, V15.B16, V21.B16 \
	VSRI $4, V2.B16, V14.B16 \
	VSRI $4, V3.B16, V15.B16 \
	VSLI $4, V20.B16, V2.B16 \
	VSLI $4, V21.B16, V3.B16

// Q6STEP: one input's 128 values at RX (advancing) against the half's
// levels: acc += Σ_s dot(s)·sc_s, sub-blocks 0–3 scaled by SA's lanes,
// 4–7 by SB's.
#define Q6STEP(DOT1, RX, acc, SA, SB) \
	VLD1.P 64(RX), [V4.B16, V5.B16, V6.B16, V7.B16] \
	DOT1(16, 0, 4, 20) \
	DOT1(17, 1, 5, 21) \
	MLAE(acc, 16, SA, 0) \
	MLAE(acc, 17, SA, 1) \
	DOT1(16, 2, 6, 20) \
	DOT1(17, 3, 7, 21) \
	MLAE(acc, 16, SA, 2) \
	MLAE(acc, 17, SA, 3) \
	VLD1.P 64(RX), [V4.B16, V5.B16, V6.B16, V7.B16] \
	DOT1(16, 12, 4, 20) \
	DOT1(17, 13, 5, 21) \
	MLAE(acc, 16, SB, 0) \
	MLAE(acc, 17, SB, 1) \
	DOT1(16, 14, 6, 20) \
	DOT1(17, 15, 7, 21) \
	MLAE(acc, 16, SB, 2) \
	MLAE(acc, 17, SB, 3)

// Q6HDR: d into F9, the scales at 192(R0) as int32 into V24–V27 and as
// int16 into V0 (0–7) and V1 (8–15).
#define Q6HDR \
	MOVHU 208(R0), R4 \
	FMOVS (R3)(R4<<2), F9 \
	ADD   $192, R0, R9 \
	VLD1  (R9), [V1.B16] \
	SXTL8H(0, 1) \
	SXTL2_8H(1, 1) \
	SXTL4S(24, 0) \
	SXTL2_4S(25, 0) \
	SXTL4S(26, 1) \
	SXTL2_4S(27, 1)

// Q6BIAS: the lanes of acc to −32·Σ_s sc_s·bsums[s] of the activation
// block at RX (not advanced).
#define Q6BIAS(RX, acc) \
	ADD  $260, RX, R9 \
	VLD1 (R9), [V4.H8, V5.H8] \
	SMULL4H(acc, 0, 4) \
	SMLAL2_8H(acc, 0, 4) \
	SMLAL4H(acc, 1, 5) \
	SMLAL2_8H(acc, 1, 5) \
	SHL4S(acc, acc, 5) \
	NEG4S(acc, acc)

#define Q6SET \
	VMOVI $3, V31.B16 \
	VMOVI $48, V8.B16

// func q6kDotXX(w, x *byte, nb int, tab *float32) float32
#define Q6DOT(name, DOT1) \
TEXT name(SB), NOSPLIT, $0-36 \
	MOVD w+0(FP), R0 \
	MOVD x+8(FP), R1 \
	MOVD nb+16(FP), R2 \
	MOVD tab+24(FP), R3 \
	Q6SET \
	ZERO(30) \
loop: \
	Q6HDR \
	Q6BIAS(R1, 18) \
	FMOVS.P 4(R1), F11 \
	ADD $128, R0, R8 \
	Q6UNPACK \
	Q6STEP(DOT1, R1, 18, 24, 25) \
	Q6UNPACK \
	Q6STEP(DOT1, R1, 18, 26, 27) \
	ADD $82, R0 \
	ADD $32, R1 \
	ADDV4S(18, 18) \
	SCVTFS(18, 18) \
	FMULS F11, F9, F12 \
	FMULS F18, F12, F12 \
	FADDS F12, F30, F30 \
	SUBS $1, R2, R2 \
	BNE  loop \
	FMOVS F30, ret+32(FP) \
	RET

// func q6kTileXX(w, x *byte, nb, xs int, out *float32, os int, tab *float32)
#define Q6TILE(name, DOT1) \
TEXT name(SB), NOSPLIT, $0-56 \
	TPROLOGUE \
	Q6SET \
loop: \
	Q6HDR \
	Q6BIAS(R1, 18) \
	Q6BIAS(R5, 19) \
	Q6BIAS(R6, 28) \
	Q6BIAS(R7, 29) \
	KTDX \
	ADD $128, R0, R8 \
	Q6UNPACK \
	Q6STEP(DOT1, R1, 18, 24, 25) \
	Q6STEP(DOT1, R5, 19, 24, 25) \
	Q6STEP(DOT1, R6, 28, 24, 25) \
	Q6STEP(DOT1, R7, 29, 24, 25) \
	Q6UNPACK \
	Q6STEP(DOT1, R1, 18, 26, 27) \
	Q6STEP(DOT1, R5, 19, 26, 27) \
	Q6STEP(DOT1, R6, 28, 26, 27) \
	Q6STEP(DOT1, R7, 29, 26, 27) \
	ADD $82, R0 \
	ADD $32, R1 \
	ADD $32, R5 \
	ADD $32, R6 \
	ADD $32, R7 \
	VADDP V19.S4, V18.S4, V18.S4 \
	VADDP V29.S4, V28.S4, V28.S4 \
	VADDP V28.S4, V18.S4, V18.S4 \
	SCVTF4S(18, 18) \
	FMUL4SE0(12, 11, 9) \
	FMUL4S(12, 12, 18) \
	FADD4S(30, 30, 12) \
	SUBS $1, R2, R2 \
	BNE  loop \
	KTSTORE \
	RET

KDOT(·q4kDotDP, K4SET, K4PRE, K4UNPACK, DOT_DP)
KDOT(·q4kDotSM, K4SET, K4PRE, K4UNPACK, DOTK_SM)
KDOT(·q5kDotDP, K5SET, K5PRE, K5UNPACK, DOT_DP)
KDOT(·q5kDotSM, K5SET, K5PRE, K5UNPACK, DOTK_SM)
Q6DOT(·q6kDotDP, DOT1_DP)
Q6DOT(·q6kDotSM, DOTK1_SM)
KTILE(·q4kTileDP, K4SET, K4PRE, K4UNPACK, DOT_DP)
KTILE(·q4kTileSM, K4SET, K4PRE, K4UNPACK, DOTK_SM)
KTILE(·q5kTileDP, K5SET, K5PRE, K5UNPACK, DOT_DP)
KTILE(·q5kTileSM, K5SET, K5PRE, K5UNPACK, DOTK_SM)
Q6TILE(·q6kTileDP, DOT1_DP)
Q6TILE(·q6kTileSM, DOTK1_SM)
