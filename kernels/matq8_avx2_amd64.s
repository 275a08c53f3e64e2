//go:build amd64 && !purego

#include "textflag.h"
#include "rowpf_amd64.h"

// Q8_0 weights against int8 activations with AVX2, FMA and F16C, in the
// order of matq8_avx2_amd64.go (per (row, block) the exact integer dot,
// then acc = fma(float32(dot), dW·dX, acc) in block order), for both
// weight layouts. No VNNI: the integer dot is llama.cpp's AVX2 one,
// VPMADDUBSW of |w| (unsigned) by x with w's sign (VPSIGNB), then VPMADDWD
// by ones; a pair sum is at most 2·128·127 < 2^15, so nothing saturates.
//
// Register use, all kernels: Y15 0x0001 in every int16 (VPMADDWD's ones).

// 0x7fff and 0x7c00 in every f16 lane: |h| == Inf finds ±Inf scales, and
// OR-ing the match (0xffff, an f16 NaN) into them makes them NaN.
DATA q8v2abs<>+0(SB)/8, $0x7fff7fff7fff7fff
DATA q8v2abs<>+8(SB)/8, $0x7fff7fff7fff7fff
DATA q8v2abs<>+16(SB)/8, $0x7fff7fff7fff7fff
DATA q8v2abs<>+24(SB)/8, $0x7fff7fff7fff7fff
GLOBL q8v2abs<>(SB), RODATA|NOPTR, $32
DATA q8v2inf<>+0(SB)/8, $0x7c007c007c007c00
DATA q8v2inf<>+8(SB)/8, $0x7c007c007c007c00
DATA q8v2inf<>+16(SB)/8, $0x7c007c007c007c00
DATA q8v2inf<>+24(SB)/8, $0x7c007c007c007c00
GLOBL q8v2inf<>(SB), RODATA|NOPTR, $32

// ONES sets Y15 to 0x0001 in every int16.
#define ONES \
	MOVL $0x00010001, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15

// M80 sets Y14 to 0x80 in every byte (panels hold w XOR 0x80).
#define M80 \
	MOVL $0x80808080, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14

// SCALES8 converts the 8 f16 scales at M into float32 lanes of Y(R), ±Inf
// made NaN. Clobbers X(T).
#define SCALES8(M, XR, R, XT) \
	VMOVDQU M, XR; \
	VPAND q8v2abs<>(SB), XR, XT; \
	VPCMPEQW q8v2inf<>(SB), XT, XT; \
	VPOR XT, XR, XR; \
	VCVTPH2PS XR, R

// ---- Panels (Layout PanelQ8_0, see panel.go) ----
//
// A block of a panel is 544 bytes: 16 f16 scales, then groups 0–7 of the 16
// rows (64 bytes each, w+128, row k at 4k). A 32-byte half of a group is 8
// rows' 4 values: XOR 0x80 gives w, VPABSB |w|, and for each input the 4
// values of that group, broadcast, take w's sign; VPMADDUBSW and VPMADDWD
// then leave row j's partial dot in int32 lane j.

// P4G is group g (weights at wo(BX), input values at xo+32k(R10)) for the
// tile's four inputs, into Y0–Y3 (FIRST: set them, else add).
#define P4IN(xo, I) \
	VPBROADCASTD xo(R10), Y11; \
	VPSIGNB Y13, Y11, Y11; \
	VPMADDUBSW Y11, Y12, Y11; \
	VPMADDWD Y15, Y11, Y11; \
	VPADDD Y11, I, I

#define P4IN0(xo, I) \
	VPBROADCASTD xo(R10), Y11; \
	VPSIGNB Y13, Y11, Y11; \
	VPMADDUBSW Y11, Y12, Y11; \
	VPMADDWD Y15, Y11, I

#define P4W(wo) \
	VPXOR wo(BX), Y14, Y13; \
	VPABSB Y13, Y12

#define P4G0 \
	P4W(32); \
	P4IN0(0, Y0); \
	P4IN0(32, Y1); \
	P4IN0(64, Y2); \
	P4IN0(96, Y3)

#define P4G(wo, xo) \
	P4W(wo); \
	P4IN(xo, Y0); \
	P4IN(xo+32, Y1); \
	P4IN(xo+64, Y2); \
	P4IN(xo+96, Y3)

// P4FMA is input k's block end: A = fma(float32(I), dW·dX, A), dX at do(R12).
#define P4FMA(do, I, A) \
	VCVTDQ2PS I, I; \
	VBROADCASTSS do(R12), Y8; \
	VMULPS Y8, Y10, Y8; \
	VFMADD231PS Y8, I, A

// func q8AVX2Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, n int)
//
// np consecutive panels at w (nb blocks each) against four inputs whose
// block b is at xb+b·32n+32k (k = 0…3; n the inputs of the actQ8 group), db
// at +b·4n+4k: output (input k, panel row j) at dst[k·rows + 16p + j]. Each
// panel goes by halves of 8 rows; each half's groups are made signed and
// absolute once for the four inputs.
//
// Registers: Y0–Y3 the inputs' int32 dots, Y4–Y7 their sums, Y10 the half's
// scales, Y12/Y13 |w|/w, Y11 and Y8/Y9 temporaries.
TEXT ·q8AVX2Panel4(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	SHLQ $2, R8
	MOVQ w+16(FP), SI
	MOVQ np+24(FP), R9
	MOVQ nb+32(FP), R15
	IMULQ $544, R15
	MOVQ n+56(FP), R14
	SHLQ $2, R14
	MOVQ R14, R13
	SHLQ $3, R13
	ONES
	M80
	TESTQ R9, R9
	JZ    p4done

p4panel:
	XORQ CX, CX

p4half:
	LEAQ   (SI)(CX*1), R11
	LEAQ   (SI)(CX*2), BX
	MOVQ   xb+40(FP), R10
	MOVQ   db+48(FP), R12
	MOVQ   nb+32(FP), DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

p4block:
	PREFETCHT0 1088(BX)
	PREFETCHT0 1216(BX)
	PREFETCHT0 1344(BX)
	P4G0
	P4G(96, 4)
	P4G(160, 8)
	P4G(224, 12)
	P4G(288, 16)
	P4G(352, 20)
	P4G(416, 24)
	P4G(480, 28)
	SCALES8((R11), X10, Y10, X9)
	P4FMA(0, Y0, Y4)
	P4FMA(4, Y1, Y5)
	P4FMA(8, Y2, Y6)
	P4FMA(12, Y3, Y7)
	ADDQ $544, BX
	ADDQ $544, R11
	ADDQ R13, R10
	ADDQ R14, R12
	DECQ DX
	JNZ  p4block

	LEAQ    (DI)(CX*2), AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, (AX)(R8*1)
	VMOVUPS Y6, (AX)(R8*2)
	LEAQ    (AX)(R8*2), AX
	VMOVUPS Y7, (AX)(R8*1)
	ADDQ    $16, CX
	CMPQ    CX, $32
	JLT     p4half

	ADDQ $64, DI
	ADDQ R15, SI
	DECQ R9
	JNZ  p4panel

p4done:
	VZEROUPPER
	RET

// P1G is group g of both halves (weights at wo(BX), wo+32(BX)) against the
// lone input's 4 values at xo(R10), into Y0 (rows 0–7) and Y1 (rows 8–15).
#define P1G0 \
	VPXOR 32(BX), Y14, Y13; \
	VPXOR 64(BX), Y14, Y12; \
	VPABSB Y13, Y11; \
	VPABSB Y12, Y10; \
	VPBROADCASTD (R10), Y9; \
	VPSIGNB Y13, Y9, Y8; \
	VPSIGNB Y12, Y9, Y7; \
	VPMADDUBSW Y8, Y11, Y8; \
	VPMADDUBSW Y7, Y10, Y7; \
	VPMADDWD Y15, Y8, Y0; \
	VPMADDWD Y15, Y7, Y1

#define P1G(wo, xo) \
	VPXOR wo(BX), Y14, Y13; \
	VPXOR wo+32(BX), Y14, Y12; \
	VPABSB Y13, Y11; \
	VPABSB Y12, Y10; \
	VPBROADCASTD xo(R10), Y9; \
	VPSIGNB Y13, Y9, Y8; \
	VPSIGNB Y12, Y9, Y7; \
	VPMADDUBSW Y8, Y11, Y8; \
	VPMADDUBSW Y7, Y10, Y7; \
	VPMADDWD Y15, Y8, Y8; \
	VPMADDWD Y15, Y7, Y7; \
	VPADDD Y8, Y0, Y0; \
	VPADDD Y7, Y1, Y1

// func q8AVX2Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, n int)
//
// q8AVX2Panel4 for one input (decode, and a tile's leftover inputs): both
// halves of a panel in one pass, front to back, one sequential stream.
// Registers: Y0/Y1 the halves' int32 dots, Y4/Y5 their sums, Y2/Y3 the
// scales.
TEXT ·q8AVX2Panel1(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ w+16(FP), BX
	MOVQ np+24(FP), R9
	MOVQ n+56(FP), R14
	SHLQ $2, R14
	MOVQ R14, R13
	SHLQ $3, R13
	ONES
	M80
	TESTQ R9, R9
	JZ    p1done

p1panel:
	MOVQ   xb+40(FP), R10
	MOVQ   db+48(FP), R12
	MOVQ   nb+32(FP), DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5

p1block:
	// Four blocks (2176 bytes, 34 lines) ahead into L1: BenchmarkDecodeStream's
	// Q8_0 stream ran 1.17x faster from L3 (64 MiB) and 1.12x from DRAM
	// (1 GiB) than at two blocks (1088), best of 1088, 2176, 3264 and
	// 4352 over 5 alternating rounds. And eight blocks ahead into L2: from
	// DRAM 11.1–11.4 → 13.2–13.4 GB per CPU-second (a plain read
	// 13.7–14.0; twelve blocks 11.8–12.5), SLUICE_ISA=avx2 on an
	// AVX-512/AMX Xeon, 3 alternating rounds, load 5–7.
	PREFETCHT0 2176(BX)
	PREFETCHT0 2240(BX)
	PREFETCHT0 2304(BX)
	PREFETCHT0 2368(BX)
	PREFETCHT0 2432(BX)
	PREFETCHT0 2496(BX)
	PREFETCHT0 2560(BX)
	PREFETCHT0 2624(BX)
	PREFETCHT0 2688(BX)
	PREFETCHT1 4352(BX)
	PREFETCHT1 4416(BX)
	PREFETCHT1 4480(BX)
	PREFETCHT1 4544(BX)
	PREFETCHT1 4608(BX)
	PREFETCHT1 4672(BX)
	PREFETCHT1 4736(BX)
	PREFETCHT1 4800(BX)
	PREFETCHT1 4864(BX)
	P1G0
	P1G(96, 4)
	P1G(160, 8)
	P1G(224, 12)
	P1G(288, 16)
	P1G(352, 20)
	P1G(416, 24)
	P1G(480, 28)
	SCALES8((BX), X2, Y2, X9)
	SCALES8(16(BX), X3, Y3, X9)
	VBROADCASTSS (R12), Y9
	VMULPS       Y9, Y2, Y2
	VMULPS       Y9, Y3, Y3
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VFMADD231PS  Y2, Y0, Y4
	VFMADD231PS  Y3, Y1, Y5
	ADDQ         $544, BX
	ADDQ         R13, R10
	ADDQ         R14, R12
	DECQ         DX
	JNZ          p1block

	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ    $64, DI
	DECQ    R9
	JNZ     p1panel

p1done:
	VZEROUPPER
	RET

// ---- Row-major weights ----

// func q8AVX2Rows(dst *float32, w *byte, rb, nrows int, x *int8, db *float32, xs, ss, nb, far, dfar int, sc *float32)
//
// Rows r and r+h of w (the second far bytes after the first) against one
// input for r in [0,nrows), stored at dst[r] and dfar bytes after it (two
// weight streams in different pages, which the prefetchers follow; far =
// dfar = 0 computes a lone row twice). The input's block b is at x+b·xs,
// its scale at db+b·ss. Per block, both rows:
//	Y1/Y11   the rows' 32 weights; Y6 the input's 32 values
//	Y2/Y12   the lane dots, summed into lane 0 (row r) and lane 4 (row
//	         r+h) of Y3, converted
//	Y5       the rows' scales (lanes 0, 4; looked up in sc, quantScaleTable:
//	         f16 → float32, ±Inf → NaN) times dX
//	Y0       the two sums: fma(Y3, Y5, Y0)
TEXT ·q8AVX2Rows(SB), NOSPLIT, $0-96
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nrows+24(FP), R9
	MOVQ far+72(FP), R14
	MOVQ sc+88(FP), R15
	ONES
	TESTQ R9, R9
	JZ    rdone

rrow:
	MOVQ   x+32(FP), R10
	MOVQ   db+40(FP), R12
	MOVQ   xs+48(FP), R13
	MOVQ   ss+56(FP), R8
	MOVQ   SI, BX
	LEAQ   (SI)(R14*1), CX
	VXORPS Y0, Y0, Y0
	MOVQ   nb+64(FP), DX

rblock:
	PREFETCHT0 512(BX)
	PREFETCHT0 512(CX)
	PREFETCHT1 RFAR(BX)
	PREFETCHT1 RFAR(CX)
	VMOVDQU    2(BX), Y1
	VMOVDQU    2(CX), Y11
	VMOVDQU    (R10), Y6
	VPSIGNB    Y1, Y6, Y2
	VPSIGNB    Y11, Y6, Y12
	VPABSB     Y1, Y1
	VPABSB     Y11, Y11
	VPMADDUBSW Y2, Y1, Y2
	VPMADDUBSW Y12, Y11, Y12
	VPMADDWD   Y15, Y2, Y2
	VPMADDWD   Y15, Y12, Y12
	VPERM2I128 $0x20, Y12, Y2, Y3
	VPERM2I128 $0x31, Y12, Y2, Y4
	VPADDD     Y4, Y3, Y3
	VPSHUFD    $0x4E, Y3, Y4
	VPADDD     Y4, Y3, Y3
	VPSHUFD    $0xB1, Y3, Y4
	VPADDD     Y4, Y3, Y3
	VCVTDQ2PS  Y3, Y3
	MOVWLZX      (BX), AX
	MOVWLZX      (CX), R11
	VMOVSS       (R15)(AX*4), X5
	VMOVSS       (R15)(R11*4), X8
	VINSERTI128  $1, X8, Y5, Y5
	VBROADCASTSS (R12), Y7
	VMULPS       Y7, Y5, Y5
	VFMADD231PS  Y5, Y3, Y0
	ADDQ         $34, BX
	ADDQ         $34, CX
	ADDQ         R13, R10
	ADDQ         R8, R12
	DECQ         DX
	JNZ          rblock

	VMOVSS       X0, (DI)
	VEXTRACTF128 $1, Y0, X1
	MOVQ         dfar+80(FP), AX
	VMOVSS       X1, (DI)(AX*1)
	ADDQ         $4, DI
	ADDQ         rb+16(FP), SI
	DECQ         R9
	JNZ          rrow

rdone:
	VZEROUPPER
	RET
