//go:build amd64 && !purego

#include "textflag.h"

// Q8_0 and Q4_0 weights against int8 activations (actQ8) with AVX2, FMA and
// F16C. See matq_avx2_amd64.go for the arithmetic: per output the same
// operations, in the same order, as the archsimd kernels matQ8_0Fast and
// matQ4_0Fast, whatever kernel of this file computes it.
//
// Register use, all kernels: Y15 0x0001 in every int16 (VPMADDWD's ones).
// Q4_0 also: Y14 0x0f in every byte, Y13 the scale spread (q4spread).

// f16 NaN: a block scale whose f16 bits are ±Inf is replaced by it before
// VCVTPH2PS, as quantScaleTable maps ±Inf to NaN.
DATA q8h16nan<>+0(SB)/4, $0x7e00
GLOBL q8h16nan<>(SB), RODATA|NOPTR, $4

// q4spread spreads lane 0 over lanes 0–3 and lane 1 over lanes 4–7.
DATA q4spread<>+0(SB)/8, $0
DATA q4spread<>+8(SB)/8, $0
DATA q4spread<>+16(SB)/8, $0x0000000100000001
DATA q4spread<>+24(SB)/8, $0x0000000100000001
GLOBL q4spread<>(SB), RODATA|NOPTR, $32

// ONES sets Y15 to 0x0001 in every int16.
#define ONES \
	MOVL $0x00010001, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15

// H16 loads the f16 at off(B) into the low 16 bits of R, ±Inf made NaN.
// Clobbers T.
#define H16(off, B, R, T) \
	MOVWLZX off(B), R; \
	MOVL R, T; \
	ANDL $0x7fff, T; \
	CMPL T, $0x7c00; \
	CMOVLEQ q8h16nan<>(SB), R

// Q8DOT turns weight block W (32 int8, clobbered) against activation block
// X (32 int8) into float32(L) in W: L lane k = Σ_{4k..4k+3} w·x, exact
// (|w| · x with w's sign; a pair sum is at most 2·128·127 < 2^15). T is
// scratch.
#define Q8DOT(W, X, T) \
	VPSIGNB W, X, T; \
	VPABSB W, W; \
	VPMADDUBSW T, W, W; \
	VPMADDWD Y15, W, W; \
	VCVTDQ2PS W, W

// Q8SCALE sets Y(S) to the float32 product f16(weight scale at off(B)) ·
// (activation scale at DX) in every lane: one float32 multiply, then a
// broadcast. Clobbers AX, R11.
#define Q8SCALE(off, B, DXM, S, SX) \
	H16(off, B, AX, R11); \
	VMOVD AX, SX; \
	VCVTPH2PS SX, SX; \
	VMULSS DXM, SX, SX; \
	VBROADCASTSS SX, S

// Q8BLK adds weight block off(B) times activation block X (scale at DXM)
// into ACC.
#define Q8BLK(off, B, X, DXM, ACC) \
	VMOVDQU off+2(B), Y1; \
	Q8DOT(Y1, X, Y2); \
	Q8SCALE(off, B, DXM, Y3, X3); \
	VFMADD231PS Y3, Y1, ACC

// HSUM8 leaves in X's low lane the sum of Y's 8 lanes in hsum8's order:
// b = lo4+hi4, then (b0+b2)+(b1+b3). Clobbers X7.
#define HSUM8(Y, X) \
	VEXTRACTF128 $1, Y, X7; \
	VADDPS X7, X, X; \
	VMOVHLPS X, X, X7; \
	VADDPS X7, X, X; \
	VMOVSHDUP X, X7; \
	VADDSS X7, X, X

// Q4W loads the pair of Q4_0 blocks at off(B) (the second only when FULL):
// low nibbles into Y1, high nibbles into Y2, the two scales (f16 → float32,
// ±Inf → NaN) spread over lanes 0–3 and 4–7 of Y3. An odd last block has
// an empty second half: bytes and scale 0. Clobbers AX, R11, R15.
#define Q4WFULL(off, B) \
	VMOVDQU off+2(B), X1; \
	VINSERTI128 $1, off+20(B), Y1, Y1; \
	H16(off, B, AX, R11); \
	H16(off+18, B, R15, R11); \
	SHLL $16, R15; \
	ORL R15, AX; \
	Q4REST

#define Q4WHALF(off, B) \
	VMOVDQU off+2(B), X1; \
	H16(off, B, AX, R11); \
	Q4REST

#define Q4REST \
	VMOVD AX, X3; \
	VCVTPH2PS X3, X3; \
	VPERMPS Y3, Y13, Y3; \
	VPSRLW $4, Y1, Y2; \
	VPAND Y14, Y1, Y1; \
	VPAND Y14, Y2, Y2

// Q4IN adds the pair (nibbles Y1/Y2, scales Y3) times one input's pair
// data (64 bytes at PM, c at CM, d4 at DM) into ACC:
// fma(float32(Σlo·p0 + Σhi·p1 − c), dw·d4, ACC). Clobbers Y4, Y5.
#define Q4IN(PM, PM32, CM, DM, ACC) \
	VPMADDUBSW PM, Y1, Y4; \
	VPMADDUBSW PM32, Y2, Y5; \
	VPADDW Y5, Y4, Y4; \
	VPMADDWD Y15, Y4, Y4; \
	VPSUBD CM, Y4, Y4; \
	VCVTDQ2PS Y4, Y4; \
	VMULPS DM, Y3, Y5; \
	VFMADD231PS Y5, Y4, ACC

// Q4CONST sets Y15 (ones), Y14 (0x0f bytes) and Y13 (q4spread).
#define Q4CONST \
	ONES; \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VMOVDQU q4spread<>(SB), Y13

// func q4AVX2RowsFar(dst *float32, w *byte, rb, nrows int, p *int8, c *int32, d4 *float32, nb, far, dfar int)
//
// Rows r and the row far bytes after it against one input (actQ8 pair data
// p, c, d4), for r in [0,nrows), stored at dst[r] and dfar bytes after it:
// two far-apart weight streams, two chains. far = dfar = 0 computes a lone
// row twice.
TEXT ·q4AVX2RowsFar(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nrows+24(FP), R9
	MOVQ nb+56(FP), R13
	MOVQ far+64(FP), R14
	Q4CONST
	TESTQ R9, R9
	JZ    q4fdone

q4frow:
	MOVQ  p+32(FP), R10
	MOVQ  c+40(FP), R12
	MOVQ  d4+48(FP), DX
	MOVQ  SI, BX
	LEAQ  (SI)(R14*1), CX
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	MOVQ  R13, R8
	SHRQ  $1, R8
	JZ    q4ftail

q4fpair:
	PREFETCHT0 512(BX)
	PREFETCHT0 512(CX)
	Q4WFULL(0, BX)
	Q4IN((R10), 32(R10), (R12), (DX), Y8)
	Q4WFULL(0, CX)
	Q4IN((R10), 32(R10), (R12), (DX), Y9)
	ADDQ       $36, BX
	ADDQ       $36, CX
	ADDQ       $64, R10
	ADDQ       $32, R12
	ADDQ       $32, DX
	DECQ       R8
	JNZ        q4fpair

q4ftail:
	TESTQ $1, R13
	JZ    q4fsum
	Q4WHALF(0, BX)
	Q4IN((R10), 32(R10), (R12), (DX), Y8)
	Q4WHALF(0, CX)
	Q4IN((R10), 32(R10), (R12), (DX), Y9)

q4fsum:
	HSUM8(Y8, X8)
	VMOVSS X8, (DI)
	HSUM8(Y9, X9)
	MOVQ   dfar+72(FP), AX
	VMOVSS X9, (DI)(AX*1)
	ADDQ   $4, DI
	ADDQ   rb+16(FP), SI
	DECQ   R9
	JNZ    q4frow

q4fdone:
	VZEROUPPER
	RET

// Q4B4 is one pair (already in Y1–Y3) against the four inputs into
// Y8–Y11, the inputs' data found from R10 (p), R12 (c), R11 (d4), strides
// R13 (p) and CX (c, d4).
#define Q4B4 \
	LEAQ (R10)(R13*2), AX; \
	ADDQ R13, AX; \
	LEAQ (R12)(CX*2), R15; \
	ADDQ CX, R15; \
	LEAQ (R12)(R8*1), R11; \
	LEAQ (R15)(R8*1), DX; \
	Q4IN((R10), 32(R10), (R12), (R11), Y8); \
	Q4IN((R10)(R13*1), 32(R10)(R13*1), (R12)(CX*1), (R11)(CX*1), Y9); \
	Q4IN((R10)(R13*2), 32(R10)(R13*2), (R12)(CX*2), (R11)(CX*2), Y10); \
	Q4IN((AX), 32(AX), (R15), (DX), Y11)

// func q4AVX2Tile4(dst *float32, rows int, w *byte, rb, nrows int, p *int8, c *int32, d4 *float32, np, nb int)
//
// Rows [0,nrows) of w (rb bytes apart) against inputs 0–3, input k's pair
// data at p + k·64·np bytes, c and d4 + k·32·np bytes: output (k, r) at
// dst[k·rows + r]. Each pair of weight blocks is unpacked once for four
// inputs, one chain per output.
TEXT ·q4AVX2Tile4(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ w+16(FP), SI
	MOVQ nrows+32(FP), R9
	MOVQ np+64(FP), R13
	MOVQ R13, CX
	SHLQ $6, R13
	SHLQ $5, CX
	MOVQ d4+56(FP), R8
	SUBQ c+48(FP), R8
	Q4CONST
	TESTQ R9, R9
	JZ    q4tdone

q4trow:
	MOVQ  p+40(FP), R10
	MOVQ  c+48(FP), R12
	MOVQ  SI, BX
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	MOVQ  nb+72(FP), R14
	SHRQ  $1, R14
	JZ    q4ttail

q4tpair:
	Q4WFULL(0, BX)
	Q4B4
	ADDQ $36, BX
	ADDQ $64, R10
	ADDQ $32, R12
	DECQ R14
	JNZ  q4tpair

q4ttail:
	MOVQ  nb+72(FP), R14
	TESTQ $1, R14
	JZ    q4tsum
	Q4WHALF(0, BX)
	Q4B4

q4tsum:
	MOVQ   rows+8(FP), AX
	SHLQ   $2, AX
	HSUM8(Y8, X8)
	VMOVSS X8, (DI)
	HSUM8(Y9, X9)
	VMOVSS X9, (DI)(AX*1)
	HSUM8(Y10, X10)
	VMOVSS X10, (DI)(AX*2)
	HSUM8(Y11, X11)
	LEAQ   (DI)(AX*2), R15
	VMOVSS X11, (R15)(AX*1)
	ADDQ   $4, DI
	ADDQ   rb+24(FP), SI
	DECQ   R9
	JNZ    q4trow

q4tdone:
	VZEROUPPER
	RET
