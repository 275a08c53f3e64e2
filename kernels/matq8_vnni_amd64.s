//go:build amd64 && !purego

#include "textflag.h"
#include "rowpf_amd64.h"

// Q8_0 weights against int8 activations with AVX-512 VNNI (VPDPBUSD). See
// matq8_vnni_amd64.go for the arithmetic, the one order per output that
// both weight layouts give, and the register plans.
//
// VPDPBUSD multiplies unsigned bytes by signed ones: the weights are made
// unsigned (w+128, by XOR 0x80: Repack stores panels that way, the row-major
// kernel flips each block as it loads it) and the activations stay signed,
// so a lane sums Σ(w+128)·x = Σw·x + 128·Σx; the block's −128·Σx (actQ8.sb)
// is added once to its integer total.

// NaN, for block scales that are ±Inf (quantScaleTable's rule).
DATA q8nan<>+0(SB)/4, $0x7fc00000
GLOBL q8nan<>(SB), RODATA|NOPTR, $4

// ---- Panels (Layout PanelQ8_0) ----
//
// A block of a panel is 544 bytes at BX: 16 f16 scales, then groups 0–7 of
// the 16 rows (64 bytes each, w+128). Per block:
//	Z0–Z7   the 8 groups
//	Z8      the 16 rows' scales as float32 (±Inf made NaN)
//	Z31     NaN in every lane
// and per input k of the tile: T (int32, 16 rows) starts at sb, gains one
// VPDPBUSD per group with the input's 4 values of that group broadcast,
// is converted, and A (the row sums) = fma(T, dW·dX, A).

// PBLOCK loads block BX's groups and scales.
#define PBLOCK \
	VCVTPH2PS (BX), Z8; \
	VFPCLASSPSZ $0x18, Z8, K1; \
	VMOVAPS Z31, K1, Z8; \
	VMOVDQU32 32(BX), Z0; \
	VMOVDQU32 96(BX), Z1; \
	VMOVDQU32 160(BX), Z2; \
	VMOVDQU32 224(BX), Z3; \
	VMOVDQU32 288(BX), Z4; \
	VMOVDQU32 352(BX), Z5; \
	VMOVDQU32 416(BX), Z6; \
	VMOVDQU32 480(BX), Z7

// PIN is input k of a tile: its block at xo(R10), sb and db at so(R11),
// so(R12); T the integer accumulator, U a temporary, A the row sums.
#define PIN(xo, so, T, U, A) \
	VPBROADCASTD so(R11), T; \
	VPDPBUSD.BCST xo+0(R10), Z0, T; \
	VPDPBUSD.BCST xo+4(R10), Z1, T; \
	VPDPBUSD.BCST xo+8(R10), Z2, T; \
	VPDPBUSD.BCST xo+12(R10), Z3, T; \
	VPDPBUSD.BCST xo+16(R10), Z4, T; \
	VPDPBUSD.BCST xo+20(R10), Z5, T; \
	VPDPBUSD.BCST xo+24(R10), Z6, T; \
	VPDPBUSD.BCST xo+28(R10), Z7, T; \
	VCVTDQ2PS T, T; \
	VMULPS.BCST so(R12), Z8, U; \
	VFMADD231PS U, T, A

// PIN1 is PIN for a lone input, the groups split over two integer chains
// (T and U; integer sums are exact, so the split changes no bit).
#define PIN1(T, U, A) \
	VPBROADCASTD (R11), T; \
	VPXORD U, U, U; \
	VPDPBUSD.BCST 0(R10), Z0, T; \
	VPDPBUSD.BCST 4(R10), Z1, U; \
	VPDPBUSD.BCST 8(R10), Z2, T; \
	VPDPBUSD.BCST 12(R10), Z3, U; \
	VPDPBUSD.BCST 16(R10), Z4, T; \
	VPDPBUSD.BCST 20(R10), Z5, U; \
	VPDPBUSD.BCST 24(R10), Z6, T; \
	VPDPBUSD.BCST 28(R10), Z7, U; \
	VPADDD U, T, T; \
	VCVTDQ2PS T, T; \
	VMULPS.BCST (R12), Z8, U; \
	VFMADD231PS U, T, A

// PANEL defines name(dst *float32, rows int, w *byte, np, nb int, xb *int8,
// sb *int32, db *float32, n int): np consecutive panels at w (nb blocks
// each) against a tile of inputs whose block b is at xb+b·32n (the tile's
// inputs side by side), sb and db at +b·4n; output (input k, panel row j)
// at dst[k·rows + 16p + j]. ZERO zeroes the tile's sums, STEP runs its
// inputs over block BX, STORE writes its sums, PF prefetches further ahead
// than the two blocks every tile prefetches (P8NOPF, P8PFL2).
#define PANEL(name, ZERO, STEP, STORE, PF) \
TEXT name(SB), NOSPLIT, $0-72; \
	MOVQ dst+0(FP), DI; \
	MOVQ rows+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ w+16(FP), BX; \
	MOVQ np+24(FP), R9; \
	MOVQ n+64(FP), R14; \
	SHLQ $2, R14; \
	MOVQ R14, R13; \
	SHLQ $3, R13; \
	MOVL $0x7fc00000, AX; \
	VPBROADCASTD AX, Z31; \
	TESTQ R9, R9; \
	JZ done; \
panel: \
	MOVQ xb+40(FP), R10; \
	MOVQ sb+48(FP), R11; \
	MOVQ db+56(FP), R12; \
	MOVQ nb+32(FP), DX; \
	ZERO; \
block: \
	PREFETCHT0 1088(BX); \
	PREFETCHT0 1152(BX); \
	PREFETCHT0 1216(BX); \
	PREFETCHT0 1280(BX); \
	PREFETCHT0 1344(BX); \
	PREFETCHT0 1408(BX); \
	PREFETCHT0 1472(BX); \
	PREFETCHT0 1536(BX); \
	PREFETCHT0 1600(BX); \
	PF; \
	PBLOCK; \
	STEP; \
	ADDQ $544, BX; \
	ADDQ R13, R10; \
	ADDQ R14, R11; \
	ADDQ R14, R12; \
	DECQ DX; \
	JNZ block; \
	STORE; \
	ADDQ $64, DI; \
	DECQ R9; \
	JNZ panel; \
done: \
	VZEROUPPER; \
	RET

// Sums: Z10–Z17; integer accumulators Z18–Z25; temporaries Z26–Z29.

#define ZERO8 \
	VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13; \
	VMOVAPS Z10, Z14; VMOVAPS Z10, Z15; VMOVAPS Z10, Z16; VMOVAPS Z10, Z17
#define STEP8 \
	PIN(0, 0, Z18, Z26, Z10); \
	PIN(32, 4, Z19, Z27, Z11); \
	PIN(64, 8, Z20, Z28, Z12); \
	PIN(96, 12, Z21, Z29, Z13); \
	PIN(128, 16, Z22, Z26, Z14); \
	PIN(160, 20, Z23, Z27, Z15); \
	PIN(192, 24, Z24, Z28, Z16); \
	PIN(224, 28, Z25, Z29, Z17)
#define STORE8 \
	VMOVUPS Z10, (DI); \
	VMOVUPS Z11, (DI)(R8*1); \
	VMOVUPS Z12, (DI)(R8*2); \
	LEAQ (DI)(R8*2), AX; \
	VMOVUPS Z13, (AX)(R8*1); \
	VMOVUPS Z14, (DI)(R8*4); \
	LEAQ (DI)(R8*4), CX; \
	VMOVUPS Z15, (CX)(R8*1); \
	VMOVUPS Z16, (CX)(R8*2); \
	LEAQ (CX)(R8*2), AX; \
	VMOVUPS Z17, (AX)(R8*1)

#define ZERO4 VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13
#define STEP4 \
	PIN(0, 0, Z18, Z26, Z10); \
	PIN(32, 4, Z19, Z27, Z11); \
	PIN(64, 8, Z20, Z28, Z12); \
	PIN(96, 12, Z21, Z29, Z13)
#define STORE4 \
	VMOVUPS Z10, (DI); \
	VMOVUPS Z11, (DI)(R8*1); \
	VMOVUPS Z12, (DI)(R8*2); \
	LEAQ (DI)(R8*2), AX; \
	VMOVUPS Z13, (AX)(R8*1)

#define ZERO1 VPXORD Z10, Z10, Z10
#define STEP1 PIN1(Z18, Z19, Z10)
#define STORE1 VMOVUPS Z10, (DI)

// P8NOPF is no further prefetch (the batch tiles, compute-bound). P8PFL2
// is the one-input tile's (decode's): four blocks ahead into L2 as well,
// BenchmarkDecodeStream/1024MiB/q8_0 13.1–13.6 → 13.9–14.1 GB per
// CPU-second (a plain read 13.9–14.3; eight blocks 13.2–13.7), AVX-512/AMX
// Xeon, 3 alternating rounds, load 5–6.
#define P8NOPF

#define P8PFL2 \
	PREFETCHT1 2176(BX); \
	PREFETCHT1 2240(BX); \
	PREFETCHT1 2304(BX); \
	PREFETCHT1 2368(BX); \
	PREFETCHT1 2432(BX); \
	PREFETCHT1 2496(BX); \
	PREFETCHT1 2560(BX); \
	PREFETCHT1 2624(BX); \
	PREFETCHT1 2688(BX)

PANEL(·q8Panel8, ZERO8, STEP8, STORE8, P8NOPF)
PANEL(·q8Panel4, ZERO4, STEP4, STORE4, P8NOPF)
PANEL(·q8Panel1, ZERO1, STEP1, STORE1, P8PFL2)

// ---- Row-major weights ----

// func q8RowsFar(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int)
//
// Rows r and r+h of w (the second far bytes after the first) against one
// input for r in [0,nrows), stored at dst[r] and dfar bytes after it (two
// weight streams in different pages, which the prefetchers follow; far =
// dfar = 0 computes a lone row twice). The input's block b is at x+b·xs,
// its sb and db at +b·ss. Per block, both rows:
//	Y1/Y11   the rows' 32 weights as w+128
//	Y6       the input's 32 values
//	Y2/Y12   VPDPBUSD lanes, summed into lane 0 (row r) and lane 4 (row
//	         r+h) of Y3, plus sb, converted
//	Y5       the rows' scales (lanes 0, 4) times dX
//	Y0       the two sums: fma(Y3, Y5, Y0)
TEXT ·q8RowsFar(SB), NOSPLIT, $0-96
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nrows+24(FP), R9
	MOVQ far+80(FP), R14
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y30
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Y29
	TESTQ R9, R9
	JZ rdone

rrow:
	MOVQ x+32(FP), R10
	MOVQ sb+40(FP), R11
	MOVQ db+48(FP), R12
	MOVQ xs+56(FP), R13
	MOVQ ss+64(FP), R8
	MOVQ SI, BX
	LEAQ (SI)(R14*1), CX
	VPXORD Y0, Y0, Y0
	MOVQ nb+72(FP), DX

rblock:
	PREFETCHT0 512(BX)
	PREFETCHT0 512(CX)
	PREFETCHT1 RFAR(BX)
	PREFETCHT1 RFAR(CX)
	VPXORD 2(BX), Y30, Y1
	VPXORD 2(CX), Y30, Y11
	VMOVDQU (R10), Y6
	VPXORD Y2, Y2, Y2
	VPXORD Y12, Y12, Y12
	VPDPBUSD Y6, Y1, Y2
	VPDPBUSD Y6, Y11, Y12
	VPERM2I128 $0x20, Y12, Y2, Y3
	VPERM2I128 $0x31, Y12, Y2, Y4
	VPADDD Y4, Y3, Y3
	VPSHUFD $0x4E, Y3, Y4
	VPADDD Y4, Y3, Y3
	VPSHUFD $0xB1, Y3, Y4
	VPADDD Y4, Y3, Y3
	VPADDD.BCST (R11), Y3, Y3
	VCVTDQ2PS Y3, Y3
	MOVWLZX (BX), AX
	MOVWLZX (CX), R15
	VMOVQ AX, X5
	VPINSRW $4, R15, X5, X5
	VCVTPH2PS X5, Y5
	VFPCLASSPSY $0x18, Y5, K1
	VMOVAPS Y29, K1, Y5
	VMULPS.BCST (R12), Y5, Y5
	VFMADD231PS Y5, Y3, Y0
	ADDQ $34, BX
	ADDQ $34, CX
	ADDQ R13, R10
	ADDQ R8, R11
	ADDQ R8, R12
	DECQ DX
	JNZ rblock

	VMOVSS X0, (DI)
	VEXTRACTF128 $1, Y0, X1
	MOVQ dfar+88(FP), AX
	VMOVSS X1, (DI)(AX*1)
	ADDQ $4, DI
	ADDQ rb+16(FP), SI
	DECQ R9
	JNZ rrow

rdone:
	VZEROUPPER
	RET
