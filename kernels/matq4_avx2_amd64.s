//go:build amd64 && !purego

#include "textflag.h"
#include "rowpf_amd64.h"

// Q4_0 weights against int8 activations with AVX2, FMA and F16C, in the
// order of matq4_avx2_amd64.go (per (row, block) the exact integer dot
// Σ(nibble−8)·x, then acc = fma(float32(dot), dW·dX, acc) in block order),
// for both weight layouts. The nibbles go unsigned (0…15) into VPMADDUBSW
// against the signed activations, and the block's −8·Σx (actQ8.sb / 16:
// sb is −128·Σx) is added once to its integer total. A VPMADDUBSW lane is
// at most 2·15·127 in magnitude, so the four groups' low and high halves
// (8 lanes, 30480) add in int16 before one VPMADDWD by ones.
//
// Register use, all kernels: Y15 0x0001 in every int16, Y14 0x0f in every
// byte.

DATA q4v2abs<>+0(SB)/8, $0x7fff7fff7fff7fff
DATA q4v2abs<>+8(SB)/8, $0x7fff7fff7fff7fff
DATA q4v2abs<>+16(SB)/8, $0x7fff7fff7fff7fff
DATA q4v2abs<>+24(SB)/8, $0x7fff7fff7fff7fff
GLOBL q4v2abs<>(SB), RODATA|NOPTR, $32
DATA q4v2inf<>+0(SB)/8, $0x7c007c007c007c00
DATA q4v2inf<>+8(SB)/8, $0x7c007c007c007c00
DATA q4v2inf<>+16(SB)/8, $0x7c007c007c007c00
DATA q4v2inf<>+24(SB)/8, $0x7c007c007c007c00
GLOBL q4v2inf<>(SB), RODATA|NOPTR, $32

// q4v2shift shifts the low 128-bit lane by 0 and the high one by 4 bits
// (VPSRLVD): the 16 bytes broadcast to both lanes then give, masked, the
// low nibbles (values 0–15) and the high ones (16–31) in value order.
DATA q4v2shift<>+0(SB)/8, $0
DATA q4v2shift<>+8(SB)/8, $0
DATA q4v2shift<>+16(SB)/8, $0x0000000400000004
DATA q4v2shift<>+24(SB)/8, $0x0000000400000004
GLOBL q4v2shift<>(SB), RODATA|NOPTR, $32

#define CONSTS \
	MOVL $0x00010001, AX; \
	VMOVD AX, X15; \
	VPBROADCASTD X15, Y15; \
	MOVL $0x0f0f0f0f, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14

// SCALES8 converts the 8 f16 scales at M into float32 lanes of R, ±Inf
// made NaN. Clobbers XT.
#define SCALES8(M, XR, R, XT) \
	VMOVDQU M, XR; \
	VPAND q4v2abs<>(SB), XR, XT; \
	VPCMPEQW q4v2inf<>(SB), XT, XT; \
	VPOR XT, XR, XR; \
	VCVTPH2PS XR, R

// ---- Panels (Layout PanelQ4_0, see panel.go) ----
//
// A block of a panel is 288 bytes: 16 f16 scales, then byte groups 0–3 of
// the 16 rows (64 bytes each, row k at 4k). A 32-byte half of a group is
// 8 rows' 4 bytes: its low nibbles are values 4g…4g+3, its high nibbles
// values 16+4g…16+4g+3, each multiplied by the input's 4 values there,
// broadcast; row j's partial dot lands in int16 lanes 2j, 2j+1.

// Q4NIB loads group bytes at wo(BX) into low (Y13) and high (Y12) nibbles.
#define Q4NIB(wo) \
	VMOVDQU wo(BX), Y13; \
	VPSRLW $4, Y13, Y12; \
	VPAND Y14, Y13, Y13; \
	VPAND Y14, Y12, Y12

// Q4IN0/Q4IN: one input's group (values at xo(R10) and xo+16(R10)) into
// the int16 sums I (set, or added to).
#define Q4IN0(xo, I) \
	VPBROADCASTD xo(R10), Y11; \
	VPMADDUBSW Y11, Y13, Y11; \
	VPBROADCASTD xo+16(R10), Y10; \
	VPMADDUBSW Y10, Y12, Y10; \
	VPADDW Y10, Y11, I

#define Q4IN(xo, I) \
	VPBROADCASTD xo(R10), Y11; \
	VPMADDUBSW Y11, Y13, Y11; \
	VPBROADCASTD xo+16(R10), Y10; \
	VPMADDUBSW Y10, Y12, Y10; \
	VPADDW Y10, Y11, Y11; \
	VPADDW Y11, I, I

#define Q4G0 \
	Q4NIB(32); \
	Q4IN0(0, Y0); \
	Q4IN0(32, Y1); \
	Q4IN0(64, Y2); \
	Q4IN0(96, Y3)

#define Q4G(wo, xo) \
	Q4NIB(wo); \
	Q4IN(xo, Y0); \
	Q4IN(xo+32, Y1); \
	Q4IN(xo+64, Y2); \
	Q4IN(xo+96, Y3)

// Q4FMA is input k's block end: the int16 sums I to int32 rows, plus
// sb/16 (at so(R11)), converted; A = fma(I, dW·dX, A), dX at so(R12).
#define Q4FMA(so, I, A) \
	VPMADDWD Y15, I, I; \
	VPBROADCASTD so(R11), Y9; \
	VPSRAD $4, Y9, Y9; \
	VPADDD Y9, I, I; \
	VCVTDQ2PS I, I; \
	VBROADCASTSS so(R12), Y9; \
	VMULPS Y9, Y8, Y9; \
	VFMADD231PS Y9, I, A

// func q4AVX2Panel4(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)
//
// np consecutive panels at w (nb blocks each) against four inputs whose
// block b is at xb+b·32n+32k (k = 0…3; n the inputs of the actQ8 group),
// sb and db at +b·4n+4k: output (input k, panel row j) at dst[k·rows + 16p
// + j]. Each panel goes by halves of 8 rows; each half's nibbles are
// unpacked once for the four inputs.
//
// Registers: Y0–Y3 the inputs' dots, Y4–Y7 their sums, Y8 the half's
// scales (from AX), Y12/Y13 the nibbles, Y9–Y11 temporaries.
TEXT ·q4AVX2Panel4(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ rows+8(FP), R8
	SHLQ $2, R8
	MOVQ w+16(FP), SI
	MOVQ np+24(FP), R9
	MOVQ nb+32(FP), R15
	IMULQ $288, R15
	MOVQ n+64(FP), R14
	SHLQ $2, R14
	MOVQ R14, R13
	SHLQ $3, R13
	CONSTS
	TESTQ R9, R9
	JZ    q4p4done

q4p4panel:
	XORQ CX, CX

q4p4half:
	LEAQ   (SI)(CX*1), AX
	LEAQ   (SI)(CX*2), BX
	MOVQ   xb+40(FP), R10
	MOVQ   sb+48(FP), R11
	MOVQ   db+56(FP), R12
	MOVQ   nb+32(FP), DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q4p4block:
	PREFETCHT0 576(BX)
	PREFETCHT0 640(BX)
	Q4G0
	Q4G(96, 4)
	Q4G(160, 8)
	Q4G(224, 12)
	SCALES8((AX), X8, Y8, X9)
	Q4FMA(0, Y0, Y4)
	Q4FMA(4, Y1, Y5)
	Q4FMA(8, Y2, Y6)
	Q4FMA(12, Y3, Y7)
	ADDQ $288, BX
	ADDQ $288, AX
	ADDQ R13, R10
	ADDQ R14, R11
	ADDQ R14, R12
	DECQ DX
	JNZ  q4p4block

	LEAQ    (DI)(CX*2), AX
	VMOVUPS Y4, (AX)
	VMOVUPS Y5, (AX)(R8*1)
	VMOVUPS Y6, (AX)(R8*2)
	LEAQ    (AX)(R8*2), AX
	VMOVUPS Y7, (AX)(R8*1)
	ADDQ    $16, CX
	CMPQ    CX, $32
	JLT     q4p4half

	ADDQ $64, DI
	ADDQ R15, SI
	DECQ R9
	JNZ  q4p4panel

q4p4done:
	VZEROUPPER
	RET

// Q41G is group g of both halves (bytes at wo(BX), wo+32(BX)) against the
// lone input's values at xo(R10), xo+16(R10): int16 sums in Y13 (rows
// 0–7) and Y11 (rows 8–15) for the caller to add up.
#define Q41G(wo, xo) \
	VMOVDQU wo(BX), Y13; \
	VMOVDQU wo+32(BX), Y11; \
	VPSRLW $4, Y13, Y12; \
	VPSRLW $4, Y11, Y10; \
	VPAND Y14, Y13, Y13; \
	VPAND Y14, Y12, Y12; \
	VPAND Y14, Y11, Y11; \
	VPAND Y14, Y10, Y10; \
	VPBROADCASTD xo(R10), Y9; \
	VPBROADCASTD xo+16(R10), Y8; \
	VPMADDUBSW Y9, Y13, Y13; \
	VPMADDUBSW Y8, Y12, Y12; \
	VPMADDUBSW Y9, Y11, Y11; \
	VPMADDUBSW Y8, Y10, Y10; \
	VPADDW Y12, Y13, Y13; \
	VPADDW Y10, Y11, Y11

// func q4AVX2Panel1(dst *float32, rows int, w *byte, np, nb int, xb *int8, sb *int32, db *float32, n int)
//
// q4AVX2Panel4 for one input (decode, and a tile's leftover inputs): both
// halves of a panel in one pass, front to back, one sequential stream.
TEXT ·q4AVX2Panel1(SB), NOSPLIT, $0-72
	MOVQ dst+0(FP), DI
	MOVQ w+16(FP), BX
	MOVQ np+24(FP), R9
	MOVQ n+64(FP), R14
	SHLQ $2, R14
	MOVQ R14, R13
	SHLQ $3, R13
	CONSTS
	TESTQ R9, R9
	JZ    q4p1done

q4p1panel:
	MOVQ   xb+40(FP), R10
	MOVQ   sb+48(FP), R11
	MOVQ   db+56(FP), R12
	MOVQ   nb+32(FP), DX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5

q4p1block:
	// Six blocks (1728 bytes, 27 lines) ahead into L1: BenchmarkDecodeStream's
	// Q4_0 stream ran 1.4x faster from L3 (64 MiB) and 1.08x from DRAM
	// (1 GiB) than at two blocks (576), best of 576, 1152, 1728, 2304,
	// 3456 and 4608 over 5 alternating rounds; five lines per 288-byte
	// block. And twelve blocks ahead into L2: from DRAM 10.9–11.1 →
	// 13.3–13.8 GB per CPU-second (a plain read 13.7–14.1), from 64 MiB
	// 14.7 → 16.5–17.9 (SLUICE_ISA=avx2 on an AVX-512/AMX Xeon, 3 and 2
	// alternating rounds, load 7.5; 4 + 12 and 6 + 16 blocks no better).
	PREFETCHT0 1728(BX)
	PREFETCHT0 1792(BX)
	PREFETCHT0 1856(BX)
	PREFETCHT0 1920(BX)
	PREFETCHT0 1984(BX)
	PREFETCHT1 3456(BX)
	PREFETCHT1 3520(BX)
	PREFETCHT1 3584(BX)
	PREFETCHT1 3648(BX)
	PREFETCHT1 3712(BX)
	Q41G(32, 0)
	VMOVDQA      Y13, Y0
	VMOVDQA      Y11, Y1
	Q41G(96, 4)
	VPADDW       Y13, Y0, Y0
	VPADDW       Y11, Y1, Y1
	Q41G(160, 8)
	VPADDW       Y13, Y0, Y0
	VPADDW       Y11, Y1, Y1
	Q41G(224, 12)
	VPADDW       Y13, Y0, Y0
	VPADDW       Y11, Y1, Y1
	VPMADDWD     Y15, Y0, Y0
	VPMADDWD     Y15, Y1, Y1
	VPBROADCASTD (R11), Y9
	VPSRAD       $4, Y9, Y9
	VPADDD       Y9, Y0, Y0
	VPADDD       Y9, Y1, Y1
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	SCALES8((BX), X2, Y2, X9)
	SCALES8(16(BX), X3, Y3, X9)
	VBROADCASTSS (R12), Y9
	VMULPS       Y9, Y2, Y2
	VMULPS       Y9, Y3, Y3
	VFMADD231PS  Y2, Y0, Y4
	VFMADD231PS  Y3, Y1, Y5
	ADDQ         $288, BX
	ADDQ         R13, R10
	ADDQ         R14, R11
	ADDQ         R14, R12
	DECQ         DX
	JNZ          q4p1block

	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ    $64, DI
	DECQ    R9
	JNZ     q4p1panel

q4p1done:
	VZEROUPPER
	RET

// ---- Row-major weights ----

// func q4AVX2Rows(dst *float32, w *byte, rb, nrows int, x *int8, sb *int32, db *float32, xs, ss, nb, far, dfar int, sc *float32)
//
// Rows r and r+h of w (the second far bytes after the first) against one
// input for r in [0,nrows), stored at dst[r] and dfar bytes after it (far
// = dfar = 0 computes a lone row twice). The input's block b is at
// x+b·xs, its sb and db at +b·ss bytes. Per block, both rows: the 16
// bytes broadcast to both lanes and widened to 32 nibbles in value order
// (the high lane shifted by 4: low nibbles, then high), one
// VPMADDUBSW and VPMADDWD against the input's 32 values, the lanes summed
// into lane 0 (row r) and lane 4 (row r+h), sb/16 added, converted, one
// FMA by the rows' scales (looked up in sc, quantScaleTable: f16 → float32,
// ±Inf → NaN) times dX.
TEXT ·q4AVX2Rows(SB), NOSPLIT, $0-104
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ nrows+24(FP), R9
	CONSTS
	VMOVDQU q4v2shift<>(SB), Y13
	MOVQ    sc+96(FP), R15
	TESTQ R9, R9
	JZ    q4rdone

q4rrow:
	MOVQ   x+32(FP), R10
	MOVQ   sb+40(FP), R11
	MOVQ   db+48(FP), R12
	MOVQ   xs+56(FP), R13
	MOVQ   ss+64(FP), R8
	MOVQ   SI, BX
	MOVQ   far+80(FP), CX
	ADDQ   SI, CX
	VXORPS Y0, Y0, Y0
	MOVQ   nb+72(FP), DX

q4rblock:
	PREFETCHT0   512(BX)
	PREFETCHT0   512(CX)
	PREFETCHT1   RFAR(BX)
	PREFETCHT1   RFAR(CX)
	VBROADCASTI128 2(BX), Y1
	VBROADCASTI128 2(CX), Y11
	VPSRLVD      Y13, Y1, Y1
	VPSRLVD      Y13, Y11, Y11
	VPAND        Y14, Y1, Y1
	VPAND        Y14, Y11, Y11
	VMOVDQU      (R10), Y6
	VPMADDUBSW   Y6, Y1, Y2
	VPMADDUBSW   Y6, Y11, Y12
	VPMADDWD     Y15, Y2, Y2
	VPMADDWD     Y15, Y12, Y12
	VPERM2I128   $0x20, Y12, Y2, Y3
	VPERM2I128   $0x31, Y12, Y2, Y4
	VPADDD       Y4, Y3, Y3
	VPSHUFD      $0x4E, Y3, Y4
	VPADDD       Y4, Y3, Y3
	VPSHUFD      $0xB1, Y3, Y4
	VPADDD       Y4, Y3, Y3
	VPBROADCASTD (R11), Y4
	VPSRAD       $4, Y4, Y4
	VPADDD       Y4, Y3, Y3
	VCVTDQ2PS    Y3, Y3
	MOVWLZX      (BX), AX
	MOVWLZX      (CX), R14
	VMOVSS       (R15)(AX*4), X5
	VMOVSS       (R15)(R14*4), X8
	VINSERTI128  $1, X8, Y5, Y5
	VBROADCASTSS (R12), Y7
	VMULPS       Y7, Y5, Y5
	VFMADD231PS  Y5, Y3, Y0
	ADDQ         $18, BX
	ADDQ         $18, CX
	ADDQ         R13, R10
	ADDQ         R8, R11
	ADDQ         R8, R12
	DECQ         DX
	JNZ          q4rblock

	VMOVSS       X0, (DI)
	VEXTRACTF128 $1, Y0, X1
	MOVQ         dfar+88(FP), AX
	VMOVSS       X1, (DI)(AX*1)
	ADDQ         $4, DI
	ADDQ         rb+16(FP), SI
	DECQ         R9
	JNZ          q4rrow

q4rdone:
	VZEROUPPER
	RET
