//go:build amd64 && !purego

#include "textflag.h"
#include "rowpf_amd64.h"

// Q4_0 weights against int8 activations with AVX-512 VNNI (VPDPBUSD on
// 512-bit vectors), over PanelQ4_0 panels, in the canonical Q4_0 order of
// matq4_avx2_amd64.go (per (row, block) the exact Σ(nibble−8)·x, then acc
// = fma(float32(dot), dW·dX, acc) in block order). See
// matq4_vnni_amd64.go.
//
// A block of a panel is 288 bytes at BX: 16 f16 scales, then byte groups
// 0–3 of the 16 rows (64 bytes each, row k at 4k). Group g masked is
// values 4g…4g+3 of the 16 rows, shifted by 4 and masked values
// 16+4g…16+4g+3, unsigned 0…15; one VPDPBUSD multiplies each by the same
// 4 values of an input, broadcast. The block's −8·Σx (actQ8.s4, loaded
// broadcast: a shift of sb here would take a slot on the port VPDPBUSD
// needs) starts the integer sum, so it ends as Σ(nibble−8)·x, exact: no
// lane passes 32·15·127 + 8·32·127 in magnitude. Per block:
//	Z0–Z3   values 4g…4g+3 (g = 0…3) of the 16 rows
//	Z4–Z7   values 16+4g…16+4g+3
//	Z8      the 16 rows' scales as float32 (±Inf made NaN)
//	Z30     0x0F in every byte
//	Z31     NaN in every lane
// and per input k of the tile: T (int32, 16 rows) = s4, one VPDPBUSD
// per nibble vector, converted; A (the row sums) = fma(T, dW·dX, A).

// Q4PBLOCK loads block BX's nibbles and scales.
#define Q4PBLOCK \
	VCVTPH2PS (BX), Z8; \
	VFPCLASSPSZ $0x18, Z8, K1; \
	VMOVAPS Z31, K1, Z8; \
	VMOVDQU32 32(BX), Z4; \
	VMOVDQU32 96(BX), Z5; \
	VMOVDQU32 160(BX), Z6; \
	VMOVDQU32 224(BX), Z7; \
	VPANDD Z30, Z4, Z0; \
	VPANDD Z30, Z5, Z1; \
	VPANDD Z30, Z6, Z2; \
	VPANDD Z30, Z7, Z3; \
	VPSRLD $4, Z4, Z4; \
	VPSRLD $4, Z5, Z5; \
	VPSRLD $4, Z6, Z6; \
	VPSRLD $4, Z7, Z7; \
	VPANDD Z30, Z4, Z4; \
	VPANDD Z30, Z5, Z5; \
	VPANDD Z30, Z6, Z6; \
	VPANDD Z30, Z7, Z7

// Q4PIN is input k of a tile: its block at xo(R10), s4 and db at so(R11),
// so(R12); T the integer accumulator, U a temporary, A the row sums.
#define Q4PIN(xo, so, T, U, A) \
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

// Q4PIN1 is Q4PIN for a lone input, the nibble vectors split over two
// integer chains (T and U; integer sums are exact, so the split changes
// no bit).
#define Q4PIN1(T, U, A) \
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

// Q4PANEL defines name(dst *float32, rows int, w *byte, np, nb int, xb
// *int8, s4 *int32, db *float32, n int): np consecutive panels at w (nb
// blocks each) against a tile of inputs whose block b is at xb+b·32n (the
// tile's inputs side by side), s4 and db at +b·4n; output (input k, panel
// row j) at dst[k·rows + 16p + j]. ZERO zeroes the tile's sums, STEP runs
// its inputs over block BX, STORE writes its sums, PF prefetches ahead of
// block BX (Q4PF2, Q4PFFAR).
#define Q4PANEL(name, ZERO, STEP, STORE, PF) \
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
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z30; \
	TESTQ R9, R9; \
	JZ done; \
panel: \
	MOVQ xb+40(FP), R10; \
	MOVQ s4+48(FP), R11; \
	MOVQ db+56(FP), R12; \
	MOVQ nb+32(FP), DX; \
	ZERO; \
block: \
	PF; \
	Q4PBLOCK; \
	STEP; \
	ADDQ $288, BX; \
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

#define Q4ZERO8 \
	VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13; \
	VMOVAPS Z10, Z14; VMOVAPS Z10, Z15; VMOVAPS Z10, Z16; VMOVAPS Z10, Z17
#define Q4STEP8 \
	Q4PIN(0, 0, Z18, Z26, Z10); \
	Q4PIN(32, 4, Z19, Z27, Z11); \
	Q4PIN(64, 8, Z20, Z28, Z12); \
	Q4PIN(96, 12, Z21, Z29, Z13); \
	Q4PIN(128, 16, Z22, Z26, Z14); \
	Q4PIN(160, 20, Z23, Z27, Z15); \
	Q4PIN(192, 24, Z24, Z28, Z16); \
	Q4PIN(224, 28, Z25, Z29, Z17)
#define Q4STORE8 \
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

#define Q4ZERO4 VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13
#define Q4STEP4 \
	Q4PIN(0, 0, Z18, Z26, Z10); \
	Q4PIN(32, 4, Z19, Z27, Z11); \
	Q4PIN(64, 8, Z20, Z28, Z12); \
	Q4PIN(96, 12, Z21, Z29, Z13)
#define Q4STORE4 \
	VMOVUPS Z10, (DI); \
	VMOVUPS Z11, (DI)(R8*1); \
	VMOVUPS Z12, (DI)(R8*2); \
	LEAQ (DI)(R8*2), AX; \
	VMOVUPS Z13, (AX)(R8*1)

#define Q4ZERO1 VPXORD Z10, Z10, Z10
#define Q4STEP1 Q4PIN1(Z18, Z19, Z10)
#define Q4STORE1 VMOVUPS Z10, (DI)

// Q4PF2 prefetches two blocks ahead (five lines cover a 288-byte block,
// the next one's overlapping).
#define Q4PF2 \
	PREFETCHT0 576(BX); \
	PREFETCHT0 640(BX); \
	PREFETCHT0 704(BX); \
	PREFETCHT0 768(BX); \
	PREFETCHT0 832(BX)

// Q4PFFAR is the one-input tile's (decode's) prefetch: four blocks ahead
// into L1 and twelve into L2. Decode streams the weights from DRAM once
// per token, and the two blocks of Q4PF2 left the stream short of lines in
// flight: BenchmarkDecodeStream/1024MiB/q4_0, one thread, per CPU-second,
// alternating runs on an AVX-512/AMX Xeon under load 7–9: 11.8–12.3 GB/s
// with Q4PF2, 13.4–13.6 with this (a plain 8-accumulator read: 13.4–14.1),
// 9.4–9.7 with no prefetch; a single distance of 16 blocks was slower
// (8.8–9.0), and 4 to 6 blocks into L1 with 8 to 12 into L2 all within
// 13.2–13.8.
#define Q4PFFAR \
	PREFETCHT0 1152(BX); \
	PREFETCHT0 1216(BX); \
	PREFETCHT0 1280(BX); \
	PREFETCHT0 1344(BX); \
	PREFETCHT0 1408(BX); \
	PREFETCHT1 3456(BX); \
	PREFETCHT1 3520(BX); \
	PREFETCHT1 3584(BX); \
	PREFETCHT1 3648(BX); \
	PREFETCHT1 3712(BX)

Q4PANEL(·q4Panel8, Q4ZERO8, Q4STEP8, Q4STORE8, Q4PF2)
Q4PANEL(·q4Panel4, Q4ZERO4, Q4STEP4, Q4STORE4, Q4PF2)
Q4PANEL(·q4Panel1, Q4ZERO1, Q4STEP1, Q4STORE1, Q4PFFAR)

// ---- Row-major weights ----

// q4v4idx gathers dwords 0, 4, 8, 12 (each 128-bit lane's sum) into the
// low four (VPERMD).
DATA q4v4idx<>+0(SB)/4, $0
DATA q4v4idx<>+4(SB)/4, $4
DATA q4v4idx<>+8(SB)/4, $8
DATA q4v4idx<>+12(SB)/4, $12
DATA q4v4idx<>+16(SB)/8, $0
DATA q4v4idx<>+24(SB)/8, $0
DATA q4v4idx<>+32(SB)/8, $0
DATA q4v4idx<>+40(SB)/8, $0
DATA q4v4idx<>+48(SB)/8, $0
DATA q4v4idx<>+56(SB)/8, $0
GLOBL q4v4idx<>(SB), RODATA|NOPTR, $64

// func q4VNNIRows4(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int, sc *float32)
//
// Rows r, r+h, r+2h and r+3h of w (each far bytes after the one before)
// against one input for r in [0,nrows), stored at dst[r] and 1, 2 and 3
// times dfar bytes after it: four weight streams in different pages. The
// input's block b is at x+b·xs, its sb and db at +b·ss bytes. Per block,
// the four rows' 16 bytes are the four 128-bit lanes of Z1 (row k in lane
// k), masked into the low nibbles (values 0–15, Z1) and shifted and
// masked into the high ones (16–31, Z2); two VPDPBUSD against the input's
// values 0–15 (Z3) and 16–31 (Z4), broadcast to every lane, leave each
// row's dot in its lane's four dwords, summed within the lane (two
// shuffles), gathered into X6 (rows 0–3), plus sb/16, converted; one FMA
// by the rows' scales (looked up in sc, quantScaleTable: f16 → float32,
// ±Inf → NaN) times dX into X0.
TEXT ·q4VNNIRows4(SB), NOSPLIT, $0-104
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nrows+24(FP), R9
	MOVQ far+80(FP), R14
	MOVQ sc+96(FP), R15
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	VMOVDQU32 q4v4idx<>(SB), Z29
	TESTQ R9, R9
	JZ q4v4done

q4v4row:
	MOVQ x+32(FP), R10
	MOVQ sb+40(FP), R11
	MOVQ db+48(FP), R12
	MOVQ xs+56(FP), R13
	MOVQ ss+64(FP), R8
	MOVQ SI, BX
	LEAQ (SI)(R14*1), CX
	VPXORD X0, X0, X0
	MOVQ nb+72(FP), DX

q4v4block:
	PREFETCHT0 512(BX)
	PREFETCHT0 512(CX)
	PREFETCHT0 512(BX)(R14*2)
	PREFETCHT0 512(CX)(R14*2)
	PREFETCHT1 RFAR(BX)
	PREFETCHT1 RFAR(CX)
	PREFETCHT1 RFAR(BX)(R14*2)
	PREFETCHT1 RFAR(CX)(R14*2)
	VMOVDQU 2(BX), X1
	VINSERTI32X4 $1, 2(CX), Z1, Z1
	VINSERTI32X4 $2, 2(BX)(R14*2), Z1, Z1
	VINSERTI32X4 $3, 2(CX)(R14*2), Z1, Z1
	VBROADCASTI32X4 (R10), Z3
	VBROADCASTI32X4 16(R10), Z4
	VPSRLW $4, Z1, Z2
	VPANDD Z30, Z1, Z1
	VPANDD Z30, Z2, Z2
	VPXORD Z6, Z6, Z6
	VPDPBUSD Z3, Z1, Z6
	VPDPBUSD Z4, Z2, Z6
	VPSHUFD $0x4E, Z6, Z7
	VPADDD Z7, Z6, Z6
	VPSHUFD $0xB1, Z6, Z7
	VPADDD Z7, Z6, Z6
	VPERMD Z6, Z29, Z6
	VPSRAD.BCST $4, (R11), X7
	VPADDD X7, X6, X6
	VCVTDQ2PS X6, X6
	MOVWLZX (BX), AX
	VMOVSS (R15)(AX*4), X5
	MOVWLZX (CX), AX
	VINSERTPS $0x10, (R15)(AX*4), X5, X5
	MOVWLZX (BX)(R14*2), AX
	VINSERTPS $0x20, (R15)(AX*4), X5, X5
	MOVWLZX (CX)(R14*2), AX
	VINSERTPS $0x30, (R15)(AX*4), X5, X5
	VMULPS.BCST (R12), X5, X5
	VFMADD231PS X5, X6, X0
	ADDQ $18, BX
	ADDQ $18, CX
	ADDQ R13, R10
	ADDQ R8, R11
	ADDQ R8, R12
	DECQ DX
	JNZ q4v4block

	MOVQ dfar+88(FP), AX
	VMOVSS X0, (DI)
	VEXTRACTPS $1, X0, (DI)(AX*1)
	VEXTRACTPS $2, X0, (DI)(AX*2)
	LEAQ (DI)(AX*2), BX
	VEXTRACTPS $3, X0, (BX)(AX*1)
	ADDQ $4, DI
	ADDQ rb+16(FP), SI
	DECQ R9
	JNZ q4v4row

q4v4done:
	VZEROUPPER
	RET
