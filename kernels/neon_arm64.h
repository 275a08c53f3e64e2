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
