//go:build amd64 && !purego

#include "textflag.h"

// Q8_0 weights against int8 activations with AVX-512 VNNI. See
// matq8_vnni_amd64.go for the arithmetic and why it is bit-identical to
// matQ8_0Fast. Register use in both kernels:
//	Z31       0x80 in every byte (flips a signed weight byte to w+128)
//	Z30       q8perm (see SCALES)
// A pair of blocks (68 weight bytes) fills one Z register: block 2p in the low
// 256 bits, block 2p+1 in the high ones, so the low and high halves of an
// accumulator are matQ8_0Fast's even and odd chains.

// The block scales are f16, converted by VCVTPH2PS (exact), with ±Inf made
// NaN as quantScaleTable does (an Inf scale gives NaN, never ±Inf, in
// matQ8_0Fast). A 256 KiB table lookup per block cost half the decode speed
// with real (varied) scales: BenchmarkQ8Layers, 27 GB/s with one scale value
// everywhere, 14.7 GB/s with 4096 different ones.
DATA q8nan<>+0(SB)/4, $0x7fc00000
GLOBL q8nan<>(SB), RODATA|NOPTR, $4

// q8perm spreads lane 0 over lanes 0–7 and lane 1 over lanes 8–15.
DATA q8perm<>+0(SB)/8, $0
DATA q8perm<>+8(SB)/8, $0
DATA q8perm<>+16(SB)/8, $0
DATA q8perm<>+24(SB)/8, $0
DATA q8perm<>+32(SB)/8, $0x0000000100000001
DATA q8perm<>+40(SB)/8, $0x0000000100000001
DATA q8perm<>+48(SB)/8, $0x0000000100000001
DATA q8perm<>+56(SB)/8, $0x0000000100000001
GLOBL q8perm<>(SB), RODATA|NOPTR, $64

// SCALES turns the f16 pair in AX (low 16 bits block 2p, high 16 block
// 2p+1) into S: lanes 0–7 the first scale, 8–15 the second. Needs q8perm in
// Z30; clobbers K3.
#define SCALES(S, SX) \
	VMOVD AX, SX; \
	VCVTPH2PS SX, SX; \
	VFPCLASSPSX $0x18, SX, K3; \
	VBROADCASTSS q8nan<>(SB), K3, SX; \
	VPERMPS S, Z30, S

// PAIRW loads the pair of weight blocks at off(B) into Z as u8 (w+128) and
// their scales into S.
#define PAIRW(off, B, Z, Y, S, SX) \
	VMOVDQU off+2(B), Y; \
	VINSERTI32X8 $1, off+36(B), Z, Z; \
	VPXORD Z31, Z, Z; \
	MOVWLZX off(B), AX; \
	MOVWLZX off+34(B), R15; \
	SHLL $16, R15; \
	ORL R15, AX; \
	SCALES(S, SX)

// TAILW is PAIRW for a lone last block: the high half of Z is 0x80 bytes
// (multiplied by zeroed activations) and the high half of S is 0.
#define TAILW(off, B, Z, Y, S, SX) \
	VMOVDQU off+2(B), Y; \
	VPXORD Z31, Z, Z; \
	MOVWLZX off(B), AX; \
	SCALES(S, SX)

// STEP adds one pair's product of weight (W, scales SW) and input (X, NC,
// DX) to ACC: ACC = fma(float32(Σ(w+128)·x − 128·Σx), SW·DX, ACC).
#define STEP(W, SW, X, NC, DX, ACC, T, U) \
	VMOVDQA32 NC, T; \
	VPDPBUSD X, W, T; \
	VCVTDQ2PS T, T; \
	VMULPS DX, SW, U; \
	VFMADD231PS U, T, ACC

// HSUM leaves in X0-of-ACC the lane sum ((lo+hi) as hsum8 orders it):
// a = lo8+hi8; b = a.lo4+a.hi4; (b0+b2)+(b1+b3). Clobbers Y24/X24.
#define HSUM(Z, Y, X) \
	VEXTRACTF32X8 $1, Z, Y24; \
	VADDPS Y24, Y, Y; \
	VEXTRACTF32X4 $1, Y, X24; \
	VADDPS X24, X, X; \
	VMOVHLPS X, X, X24; \
	VADDPS X24, X, X; \
	VMOVSHDUP X, X24; \
	VADDSS X24, X, X

// func q8VNNIRowsFar(dst *float32, w *byte, rb, nrows int, x *int8, nc *int32, dx *float32, nb, far, dfar int)
//
// Rows r and r+h of w (the second far bytes after the first) against one
// input for r in [0,nrows), stored at dst[r] and dfar bytes after it: two
// weight streams in different pages, which the prefetchers follow, and two
// FMA chains (decode's kernel; far = dfar = 0 computes a lone row twice).
TEXT ·q8VNNIRowsFar(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rb+16(FP), R8
	MOVQ nrows+24(FP), R9
	MOVQ nb+56(FP), R13
	MOVQ far+64(FP), R14
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU32 q8perm<>(SB), Z30
	TESTQ R9, R9
	JZ fdone

frow:
	MOVQ x+32(FP), R10
	MOVQ nc+40(FP), R11
	MOVQ dx+48(FP), R12
	MOVQ SI, BX
	VPXORD Z0, Z0, Z0
	VPXORD Z10, Z10, Z10
	MOVQ R13, DX
	SHRQ $1, DX
	JZ ftail

fpair:
	LEAQ (BX)(R14*1), CX
	PREFETCHT0 512(BX) // DRAM: 1.2–1.4× with it (256–2048 tried)
	PREFETCHT0 512(CX)
	PAIRW(0, BX, Z1, Y1, Z2, X2)
	PAIRW(0, CX, Z11, Y11, Z12, X12)
	VMOVDQU64 (R10), Z6
	VMOVDQU32 (R11), Z4
	VMOVUPS (R12), Z5
	STEP(Z1, Z2, Z6, Z4, Z5, Z0, Z7, Z8)
	STEP(Z11, Z12, Z6, Z4, Z5, Z10, Z17, Z18)
	ADDQ $68, BX
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R12
	DECQ DX
	JNZ fpair

ftail:
	TESTQ $1, R13
	JZ fsum
	LEAQ (BX)(R14*1), CX
	TAILW(0, BX, Z1, Y1, Z2, X2)
	TAILW(0, CX, Z11, Y11, Z12, X12)
	VMOVDQU (R10), Y6
	VMOVDQU (R11), Y4
	VMOVUPS (R12), Y5
	STEP(Z1, Z2, Z6, Z4, Z5, Z0, Z7, Z8)
	STEP(Z11, Z12, Z6, Z4, Z5, Z10, Z17, Z18)

fsum:
	HSUM(Z0, Y0, X0)
	VMOVSS X0, (DI)
	HSUM(Z10, Y10, X10)
	MOVQ dfar+72(FP), AX
	VMOVSS X10, (DI)(AX*1)
	ADDQ $4, DI
	ADDQ R8, SI
	DECQ R9
	JNZ frow

fdone:
	VZEROUPPER
	RET

// LOADX4 loads 64 bytes at (P) of four inputs cols (R13) bytes apart into
// Z0..Z3 of a group (given as four names). AX is scratch.
#define LOADX4(P, A, B, C, D) \
	VMOVDQU64 (P), A; \
	VMOVDQU64 (P)(R13*1), B; \
	VMOVDQU64 (P)(R13*2), C; \
	LEAQ (P)(R13*2), AX; \
	VMOVDQU64 (AX)(R13*1), D

// LOADY4 is LOADX4 for 32 bytes (the high halves zeroed).
#define LOADY4(P, A, B, C, D) \
	VMOVDQU32 (P), A; \
	VMOVDQU32 (P)(R13*1), B; \
	VMOVDQU32 (P)(R13*2), C; \
	LEAQ (P)(R13*2), AX; \
	VMOVDQU32 (AX)(R13*1), D

// STEP8 is STEP for two weight rows (Z8/Z10, Z9/Z11) against four inputs
// (x Z12–Z15, nc Z16–Z19, dx Z20–Z23) into Z0–Z3 (row 0) and Z4–Z7 (row 1).
#define STEP8 \
	STEP(Z8, Z10, Z12, Z16, Z20, Z0, Z24, Z25); \
	STEP(Z8, Z10, Z13, Z17, Z21, Z1, Z26, Z27); \
	STEP(Z8, Z10, Z14, Z18, Z22, Z2, Z28, Z29); \
	STEP(Z8, Z10, Z15, Z19, Z23, Z3, Z24, Z25); \
	STEP(Z9, Z11, Z12, Z16, Z20, Z4, Z26, Z27); \
	STEP(Z9, Z11, Z13, Z17, Z21, Z5, Z28, Z29); \
	STEP(Z9, Z11, Z14, Z18, Z22, Z6, Z24, Z25); \
	STEP(Z9, Z11, Z15, Z19, Z23, Z7, Z26, Z27)

// func q8VNNI2x4(dst *float32, rows int, w *byte, rb, nrows int, x *int8, nc *int32, dx *float32, cols, nb int)
//
// Rows [0,nrows) (nrows even) of w against inputs 0–3: input i's
// activations at x+i·cols, nc and dx at +i·cols bytes too; output (i, r) at
// dst[i·rows+r].
TEXT ·q8VNNI2x4(SB), NOSPLIT, $0-80
	MOVQ dst+0(FP), DI
	MOVQ w+16(FP), SI
	MOVQ rb+24(FP), R8
	MOVQ nrows+32(FP), R9
	MOVQ cols+64(FP), R13
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VMOVDQU32 q8perm<>(SB), Z30
	TESTQ R9, R9
	JZ tdone

trow:
	MOVQ x+40(FP), R10
	MOVQ nc+48(FP), R11
	MOVQ dx+56(FP), R12
	MOVQ SI, BX
	VPXORD Z0, Z0, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	VMOVAPS Z0, Z4
	VMOVAPS Z0, Z5
	VMOVAPS Z0, Z6
	VMOVAPS Z0, Z7
	MOVQ nb+72(FP), DX
	SHRQ $1, DX
	JZ ttail

tpair:
	LOADX4(R10, Z12, Z13, Z14, Z15)
	LOADX4(R11, Z16, Z17, Z18, Z19)
	LOADX4(R12, Z20, Z21, Z22, Z23)
	PAIRW(0, BX, Z8, Y8, Z10, X10)
	ADDQ R8, BX
	PAIRW(0, BX, Z9, Y9, Z11, X11)
	SUBQ R8, BX
	STEP8
	ADDQ $68, BX
	ADDQ $64, R10
	ADDQ $64, R11
	ADDQ $64, R12
	DECQ DX
	JNZ tpair

ttail:
	MOVQ nb+72(FP), DX
	TESTQ $1, DX
	JZ tsum
	LOADY4(R10, Y12, Y13, Y14, Y15)
	LOADY4(R11, Y16, Y17, Y18, Y19)
	LOADY4(R12, Y20, Y21, Y22, Y23)
	TAILW(0, BX, Z8, Y8, Z10, X10)
	ADDQ R8, BX
	TAILW(0, BX, Z9, Y9, Z11, X11)
	STEP8

tsum:
	HSUM(Z0, Y0, X0)
	HSUM(Z1, Y1, X1)
	HSUM(Z2, Y2, X2)
	HSUM(Z3, Y3, X3)
	HSUM(Z4, Y4, X4)
	HSUM(Z5, Y5, X5)
	HSUM(Z6, Y6, X6)
	HSUM(Z7, Y7, X7)
	MOVQ rows+8(FP), AX
	SHLQ $2, AX
	VMOVSS X0, (DI)
	VMOVSS X4, 4(DI)
	VMOVSS X1, (DI)(AX*1)
	VMOVSS X5, 4(DI)(AX*1)
	VMOVSS X2, (DI)(AX*2)
	VMOVSS X6, 4(DI)(AX*2)
	LEAQ (DI)(AX*2), R15
	VMOVSS X3, (R15)(AX*1)
	VMOVSS X7, 4(R15)(AX*1)
	ADDQ $8, DI
	LEAQ (SI)(R8*2), SI
	SUBQ $2, R9
	JNZ trow

tdone:
	VZEROUPPER
	RET
