// NEON instructions the Go arm64 assembler has no mnemonic for, as WORD
// encodings. Arguments are register numbers (Vd, Vn, Vm: 0–31); each macro
// names the instruction in the comment above it, in the Arm syntax.

#define ENC3(op, d, n, m) WORD $((op) | ((m)<<16) | ((n)<<5) | (d))
#define ENC2(op, d, n) WORD $((op) | ((n)<<5) | (d))

// SDOT Vd.4S, Vn.16B, Vm.16B (ARMv8.2 dot product: lane k += Σ of bytes 4k..4k+3)
#define SDOT(d, n, m) ENC3(0x4e809400, d, n, m)
// SMULL Vd.8H, Vn.8B, Vm.8B (signed widening multiply, low halves)
#define SMULL(d, n, m) ENC3(0x0e20c000, d, n, m)
// SMULL2 Vd.8H, Vn.16B, Vm.16B (high halves)
#define SMULL2(d, n, m) ENC3(0x4e20c000, d, n, m)
// SMLAL Vd.8H, Vn.8B, Vm.8B and SMLAL2 Vd.8H, Vn.16B, Vm.16B (widening
// multiply-accumulate into int16 lanes)
#define SMLAL8B(d, n, m) ENC3(0x0e208000, d, n, m)
#define SMLAL2_16B(d, n, m) ENC3(0x4e208000, d, n, m)
// SADDLP Vd.4S, Vn.8H (signed add long pairwise)
#define SADDLP(d, n) ENC2(0x4e602800, d, n)
// SADALP Vd.4S, Vn.8H (signed add and accumulate long pairwise)
#define SADALP(d, n) ENC2(0x4e606800, d, n)
// FADD Vd.4S, Vn.4S, Vm.4S
#define FADD4S(d, n, m) ENC3(0x4e20d400, d, n, m)
// FADDP Vd.4S, Vn.4S, Vm.4S (pairwise: n0+n1, n2+n3, m0+m1, m2+m3)
#define FADDP4S(d, n, m) ENC3(0x6e20d400, d, n, m)
// FADDP Sd, Vn.2S (n0+n1)
#define FADDPS(d, n) ENC2(0x7e30d800, d, n)
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(d, n, m) ENC3(0x6e20dc00, d, n, m)
// FMUL Vd.4S, Vn.4S, Vm.S[0]
#define FMUL4SE0(d, n, m) ENC3(0x4f809000, d, n, m)
// FCVTL Vd.4S, Vn.4H (half to single, exact)
#define FCVTL(d, n) ENC2(0x0e217800, d, n)
// FCVTL2 Vd.4S, Vn.8H
#define FCVTL2(d, n) ENC2(0x4e217800, d, n)
// FCVTL Vd.2D, Vn.2S (single to double, exact)
#define FCVTLD(d, n) ENC2(0x0e617800, d, n)
// FCVTL2 Vd.2D, Vn.4S
#define FCVTL2D(d, n) ENC2(0x4e617800, d, n)
// FMUL Vd.2D, Vn.2D, Vm.2D
#define FMUL2D(d, n, m) ENC3(0x6e60dc00, d, n, m)
// FCVTNS Vd.2D, Vn.2D (to int64, round to nearest, ties to even)
#define FCVTNS2D(d, n) ENC2(0x4e61a800, d, n)
// XTN Vd.2S, Vn.2D and XTN2 Vd.4S, Vn.2D (narrow, keep the low half)
#define XTN2S(d, n) ENC2(0x0ea12800, d, n)
#define XTN2_4S(d, n) ENC2(0x4ea12800, d, n)
// XTN Vd.4H, Vn.4S and XTN2 Vd.8H, Vn.4S
#define XTN4H(d, n) ENC2(0x0e612800, d, n)
#define XTN2_8H(d, n) ENC2(0x4e612800, d, n)
// XTN Vd.8B, Vn.8H and XTN2 Vd.16B, Vn.8H
#define XTN8B(d, n) ENC2(0x0e212800, d, n)
#define XTN2_16B(d, n) ENC2(0x4e212800, d, n)
// FABS Vd.4S, Vn.4S
#define FABS4S(d, n) ENC2(0x4ea0f800, d, n)
// UMAXV Sd, Vn.4S
#define UMAXV4S(d, n) ENC2(0x6eb0a800, d, n)
// SCVTF Sd, Sn (int32 to float32, round to nearest)
#define SCVTFS(d, n) ENC2(0x5e21d800, d, n)
// MOVI Vd.2D, #0 (zero the whole register)
#define ZERO(d) WORD $(0x6f00e400 | (d))
// ADDV Sd, Vn.4S (sum of the four int32 lanes)
#define ADDV4S(d, n) ENC2(0x4eb1b800, d, n)
// SCVTF Vd.4S, Vn.4S (int32 lanes to float32, round to nearest)
#define SCVTF4S(d, n) ENC2(0x4e21d800, d, n)
// FSUB Vd.4S, Vn.4S, Vm.4S
#define FSUB4S(d, n, m) ENC3(0x4ea0d400, d, n, m)
// MLA Vd.4S, Vn.4S, Vm.S[i] (int32 lanes d += n · lane i of m)
#define MLAE(d, n, m, i) WORD $(0x6f800000 | (((i)&1)<<21) | ((m)<<16) | (((i)>>1)<<11) | ((n)<<5) | (d))
// SMULL Vd.4S, Vn.4H, Vm.4H and SMLAL Vd.4S, Vn.4H, Vm.4H (int16 to int32)
#define SMULL4H(d, n, m) ENC3(0x0e60c000, d, n, m)
#define SMLAL4H(d, n, m) ENC3(0x0e608000, d, n, m)
// SMLAL2 Vd.4S, Vn.8H, Vm.8H (high halves)
#define SMLAL2_8H(d, n, m) ENC3(0x4e608000, d, n, m)
// SXTL Vd.8H, Vn.8B and SXTL2 Vd.8H, Vn.16B (sign-extend bytes)
#define SXTL8H(d, n) ENC2(0x0f08a400, d, n)
#define SXTL2_8H(d, n) ENC2(0x4f08a400, d, n)
// SXTL Vd.4S, Vn.4H and SXTL2 Vd.4S, Vn.8H
#define SXTL4S(d, n) ENC2(0x0f10a400, d, n)
#define SXTL2_4S(d, n) ENC2(0x4f10a400, d, n)

// DOT_* set the int32 lanes of acc to partial sums of a·x0 + b·x1 (16
// signed bytes each), t scratch: SDOT (4 bytes per lane per instruction),
// or SMULL/SMULL2 to int16 products (exact while |a·x| < 2^15) then
// pairwise widening adds (SADDLP/SADALP). DOT1_* is the same for a·x0
// alone. The lanes differ between the two forms; their sum does not.
#define DOT_DP(acc, a, b, x0, x1, t) \
	ZERO(acc) \
	SDOT(acc, a, x0) \
	SDOT(acc, b, x1)

#define DOT_SM(acc, a, b, x0, x1, t) \
	SMULL(t, a, x0) \
	SADDLP(acc, t) \
	SMULL2(t, a, x0) \
	SADALP(acc, t) \
	SMULL(t, b, x1) \
	SADALP(acc, t) \
	SMULL2(t, b, x1) \
	SADALP(acc, t)

#define DOT1_DP(acc, a, x0, t) \
	ZERO(acc) \
	SDOT(acc, a, x0)

#define DOT1_SM(acc, a, x0, t) \
	SMULL(t, a, x0) \
	SADDLP(acc, t) \
	SMULL2(t, a, x0) \
	SADALP(acc, t)

// SHL Vd.4S, Vn.4S, #s (0 ≤ s < 32) and NEG Vd.4S, Vn.4S
#define SHL4S(d, n, s) ENC2(0x4f005400 | ((32+(s))<<16), d, n)
#define NEG4S(d, n) ENC2(0x6ea0b800, d, n)
