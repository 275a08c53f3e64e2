//go:build arm64 && !purego

#include "textflag.h"
#include "neon_arm64.h"

// K-quant panel tiles with SDOT: the 16 rows of each scratch panel
// (matqk_panel_arm64.go states the layout and the arithmetic) against 4
// Q8_K input rows, whose block b is at x + k·xs + 292b for input k. A
// panel is taken in two halves of 8 rows: a 64-byte level group is 16 rows
// × 4 values, and its half h (bytes 32h…32h+31) is two q-registers, rows
// 8h…8h+3 and 8h+4…8h+7, each int32 lane one row. One SDOT by element
// multiplies such a register by 4 activation bytes of one input (lane g of
// a register holding 16 of them), so the lanes stay rows to the end.
//
// Registers: R0 the outputs (input k's at R0 + k·R1), R2 the panel, R3
// panels left, R4 nb, R5 x, R6 xs, R7 the half's byte offset in a scale or
// level vector (0 or 32), R9 = 64, R10 the panel's super-block, R11–R14
// the inputs' blocks, R15 super-blocks left, R19–R21 the level, scale and
// pair pointers, R22–R25 the inputs' dx bits. V0–V1 levels, V2–V3 scales,
// V4–V7 activation bytes (then bsums pair sums, then dx), V8–V15 the
// sub-block sums S (then M) of input k, rows of quarter q in V(8+2k+q),
// V16–V23 I likewise, V24–V31 the float sums s likewise.

// SDOT Vd.4S, Vn.16B, Vm.4B[i]
#define SDOTE(d, n, m, i) WORD $(0x4f80e000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
// MLA Vd.4S, Vn.4S, Vm.4S
#define MLA4S(d, n, m) ENC3(0x4ea09400, d, n, m)
// FMUL Vd.4S, Vn.4S, Vm.S[i]
#define FMULE(d, n, m, i) WORD $(0x4f809000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
// SMLAL Vd.4S, Vn.4H, Vm.H[i] and SMLAL2 Vd.4S, Vn.8H, Vm.H[i] (Vm in V0–V15)
#define SMLALE(d, n, m, i) WORD $(0x0f402000 | ((((i)>>1)&1)<<21) | (((i)&1)<<20) | ((m)<<16) | (((i)>>2)<<11) | ((n)<<5) | (d))
#define SMLAL2E(d, n, m, i) WORD $(0x4f402000 | ((((i)>>1)&1)<<21) | (((i)&1)<<20) | ((m)<<16) | (((i)>>2)<<11) | ((n)<<5) | (d))

// ZS zeroes the sub-block sums V8–V15.
#define ZS \
	ZERO(8) \
	ZERO(9) \
	ZERO(10) \
	ZERO(11) \
	ZERO(12) \
	ZERO(13) \
	ZERO(14) \
	ZERO(15)

// ACTS loads the next 16 activation bytes of the 4 inputs into V4–V7.
#define ACTS \
	VLD1.P 16(R11), [V4.B16] \
	VLD1.P 16(R12), [V5.B16] \
	VLD1.P 16(R13), [V6.B16] \
	VLD1.P 16(R14), [V7.B16]

// GROUP is one level group (4 values of 8 rows, the next at R19 + 64)
// against lane g of V4–V7: S += levels · activations.
#define GROUP(g) \
	VLD1.P (R19)(R9), [V0.B16, V1.B16] \
	SDOTE(8, 0, 4, g) \
	SDOTE(9, 1, 4, g) \
	SDOTE(10, 0, 5, g) \
	SDOTE(11, 1, 5, g) \
	SDOTE(12, 0, 6, g) \
	SDOTE(13, 1, 6, g) \
	SDOTE(14, 0, 7, g) \
	SDOTE(15, 1, 7, g)

// GROUP4 is 16 activation bytes a input and the 4 groups they meet.
#define GROUP4 \
	ACTS \
	GROUP(0) \
	GROUP(1) \
	GROUP(2) \
	GROUP(3)

// SCALE adds S times the sub-block's 8 int32 scales (at R20, the next at
// R20 + 64) to I.
#define SCALE \
	VLD1.P (R20)(R9), [V2.S4, V3.S4] \
	MLA4S(16, 8, 2) \
	MLA4S(17, 9, 3) \
	MLA4S(18, 10, 2) \
	MLA4S(19, 11, 3) \
	MLA4S(20, 12, 2) \
	MLA4S(21, 13, 3) \
	MLA4S(22, 14, 2) \
	MLA4S(23, 15, 3)

// PROLOGUE loads the arguments; SETHALF starts half R7 of panel R2: the
// float sums zeroed, the inputs' pointers and the super-block count reset.
#define PROLOGUE \
	MOVD dst+0(FP), R0 \
	MOVD rows+8(FP), R1 \
	LSL  $2, R1 \
	MOVD w+16(FP), R2 \
	MOVD np+24(FP), R3 \
	MOVD nb+32(FP), R4 \
	MOVD x+40(FP), R5 \
	MOVD xs+48(FP), R6 \
	MOVD $64, R9

#define SETHALF \
	ZERO(24) \
	ZERO(25) \
	ZERO(26) \
	ZERO(27) \
	ZERO(28) \
	ZERO(29) \
	ZERO(30) \
	ZERO(31) \
	MOVD R2, R10 \
	MOVD R5, R11 \
	ADD  R6, R11, R12 \
	ADD  R6, R12, R13 \
	ADD  R6, R13, R14 \
	MOVD R4, R15

// BLOCKSTART reads the inputs' dx bits (advancing to their q), zeroes I
// and points R19–R21 at the half's levels (lv), scales and pairs.
#define BLOCKSTART(lv) \
	MOVWU.P 4(R11), R22 \
	MOVWU.P 4(R12), R23 \
	MOVWU.P 4(R13), R24 \
	MOVWU.P 4(R14), R25 \
	ZERO(16) \
	ZERO(17) \
	ZERO(18) \
	ZERO(19) \
	ZERO(20) \
	ZERO(21) \
	ZERO(22) \
	ZERO(23) \
	ADD  R7, R10, R8 \
	ADD  $lv, R8, R19 \
	ADD  $64, R8, R20 \
	ADD  $576, R8, R21

// DXS puts the 4 inputs' dx in the lanes of V4.
#define DXS \
	VMOV R22, V4.S[0] \
	VMOV R23, V4.S[1] \
	VMOV R24, V4.S[2] \
	VMOV R25, V4.S[3]

// DHALF loads the half's 8 f16 at off(R10) (plus R7/2) as float32 into
// Va (rows 0–3) and Vb (4–7); the panel holds no ±Inf (made NaN there).
#define DHALF(off, a, b) \
	ADD  R7>>1, R10, R8 \
	ADD  $off, R8 \
	VLD1 (R8), [V5.H8] \
	FCVTL(a, 5) \
	FCVTL2(b, 5)

// SMFLT is input k's float step for quarter q of the half (d in V0/V1,
// dmin in V2/V3, dx in V4's lanes; I, M and s in V(16+i), V(8+i) and
// V(24+i), i = 2k+q): the row kernel's operations and operand order,
// s = s + (float32(I)·(d·dx) − float32(M)·(dmin·dx)).
#define SMFLT(k, q) \
	FMULE(5, 0+q, 4, k) \
	FMULE(6, 2+q, 4, k) \
	SCVTF4S(16+2*k+q, 16+2*k+q) \
	SCVTF4S(8+2*k+q, 8+2*k+q) \
	FMUL4S(5, 5, 16+2*k+q) \
	FMUL4S(6, 6, 8+2*k+q) \
	FSUB4S(5, 5, 6) \
	FADD4S(24+2*k+q, 24+2*k+q, 5)

// Q6FLT is Q6_K's: s = s + float32(I)·(d·dx).
#define Q6FLT(k, q) \
	FMULE(5, 0+q, 4, k) \
	SCVTF4S(16+2*k+q, 16+2*k+q) \
	FMUL4S(5, 5, 16+2*k+q) \
	FADD4S(24+2*k+q, 24+2*k+q, 5)

// MPAIR is pair j of the mins: the (m_j, m_j) int16 pairs of the half's 8
// rows (at R21, the next at R21 + 64) made 8 int16 m_j (UZP1) in V0, times
// input k's bsums pair sum j (lane j of V(4+k)) into M.
#define MPAIR(j) \
	VLD1.P (R21)(R9), [V2.H8, V3.H8] \
	VUZP1 V3.H8, V2.H8, V0.H8 \
	SMLALE(8, 0, 4, j) \
	SMLAL2E(9, 0, 4, j) \
	SMLALE(10, 0, 5, j) \
	SMLAL2E(11, 0, 5, j) \
	SMLALE(12, 0, 6, j) \
	SMLAL2E(13, 0, 6, j) \
	SMLALE(14, 0, 7, j) \
	SMLAL2E(15, 0, 7, j)

// BSUMS: input k's bsums pairs summed, bsums[2j] + bsums[2j+1] in lane j
// of V(4+k) (int16, |sum| ≤ 2·16·128), advancing past the block.
#define BSUMS \
	VLD1.P 32(R11), [V0.H8, V1.H8] \
	VADDP V1.H8, V0.H8, V4.H8 \
	VLD1.P 32(R12), [V0.H8, V1.H8] \
	VADDP V1.H8, V0.H8, V5.H8 \
	VLD1.P 32(R13), [V0.H8, V1.H8] \
	VADDP V1.H8, V0.H8, V6.H8 \
	VLD1.P 32(R14), [V0.H8, V1.H8] \
	VADDP V1.H8, V0.H8, V7.H8

// STOREHALF writes the half's float sums: input k's 8 rows at R0 + R7 +
// k·R1.
#define STOREHALF \
	ADD  R7, R0, R8 \
	VST1 [V24.S4, V25.S4], (R8) \
	ADD  R1, R8 \
	VST1 [V26.S4, V27.S4], (R8) \
	ADD  R1, R8 \
	VST1 [V28.S4, V29.S4], (R8) \
	ADD  R1, R8 \
	VST1 [V30.S4, V31.S4], (R8)

// NEXTHALF goes on to half 1 of the panel (label h), then to the next
// panel (label p, pb bytes a super-block) until R3 reaches 0.
#define NEXTHALF(h, p, pb) \
	STOREHALF \
	CBNZ R7, 3(PC) \
	MOVD $32, R7 \
	B    h \
	MOVD $pb, R8 \
	MUL  R4, R8 \
	ADD  R8, R2 \
	ADD  $64, R0 \
	SUBS $1, R3 \
	BNE  p

// func kqSMPanel4DP(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)
// Q4_K and Q5_K panels (kqpSM bytes a super-block): per super-block the 8
// sub-blocks' sums times their scales into I, then M from the mins and the
// bsums, then the float step.
TEXT ·kqSMPanel4DP(SB), NOSPLIT, $0-56
	PROLOGUE
	CBZ R3, done
panel:
	MOVD $0, R7
half:
	SETHALF
block:
	BLOCKSTART(1088)
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	ZS
	GROUP4
	GROUP4
	SCALE
	BSUMS
	ZS
	MPAIR(0)
	MPAIR(1)
	MPAIR(2)
	MPAIR(3)
	MPAIR(4)
	MPAIR(5)
	MPAIR(6)
	MPAIR(7)
	DHALF(0, 0, 1)
	DHALF(32, 2, 3)
	DXS
	SMFLT(0, 0)
	SMFLT(0, 1)
	SMFLT(1, 0)
	SMFLT(1, 1)
	SMFLT(2, 0)
	SMFLT(2, 1)
	SMFLT(3, 0)
	SMFLT(3, 1)
	ADD  $5184, R10
	SUBS $1, R15
	BNE  block
	NEXTHALF(half, panel, 5184)
done:
	RET

// Q6SUB is Q6_K sub-block s: 16 values, 4 level groups, then the scale.
#define Q6SUB \
	ZS \
	GROUP4 \
	SCALE

// func kq6Panel4DP(dst *float32, rows int, w *byte, np, nb int, x *byte, xs int)
// Q6_K panels (kqp6 bytes a super-block): the levels are stored minus 32
// (signed), so I is Σ_s sc_s·S_s with no bsums term (matqk_panel_arm64.go).
TEXT ·kq6Panel4DP(SB), NOSPLIT, $0-56
	PROLOGUE
	CBZ R3, done
panel:
	MOVD $0, R7
half:
	SETHALF
block:
	BLOCKSTART(1600)
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	Q6SUB
	ADD  $32, R11
	ADD  $32, R12
	ADD  $32, R13
	ADD  $32, R14
	DHALF(0, 0, 1)
	DXS
	Q6FLT(0, 0)
	Q6FLT(0, 1)
	Q6FLT(1, 0)
	Q6FLT(1, 1)
	Q6FLT(2, 0)
	Q6FLT(2, 1)
	Q6FLT(3, 0)
	Q6FLT(3, 1)
	ADD  $5696, R10
	SUBS $1, R15
	BNE  block
	NEXTHALF(half, panel, 5696)
done:
	RET
