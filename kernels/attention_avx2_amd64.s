//go:build amd64 && !purego

#include "textflag.h"

// Attention's inner loops with AVX2 + FMA (+ F16C for binary16 pages), all
// the heads of one query row per call: see attention_avx2_amd64.go. One body
// per kernel serves both element types; KFMA(mem, acc) (scores, q in Y8) and
// VFMA(mem, w, acc) (values) are its loads, a plain FMA from float32 pages
// or VCVTPH2PS (exact) then the same FMA from binary16 ones, so the two give
// the same bits over a KV whose values are binary16. ES is the element size.

// AHSUM leaves in X's low lane the sum of Y's lanes in hsum8's order.
#define AHSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

// HSUM8X8 leaves in Y0 the lane sums of Y0…Y7 (slot m's in lane m), each
// with AHSUM's additions of the same lanes: per slot m, lane t + lane t+4,
// then t + t+2, then lane 0 + lane 1. Pair slot m with m+4 in one register
// (m in the low 128 bits, m+4 in the high), then shuffle lanes so that the
// same sums are vertical adds. Y8, Y9 are scratch.
#define HSUM8X8 \
	VPERM2F128 $0x20, Y4, Y0, Y8; \
	VPERM2F128 $0x31, Y4, Y0, Y9; \
	VADDPS     Y9, Y8, Y0; \
	VPERM2F128 $0x20, Y5, Y1, Y8; \
	VPERM2F128 $0x31, Y5, Y1, Y9; \
	VADDPS     Y9, Y8, Y1; \
	VPERM2F128 $0x20, Y6, Y2, Y8; \
	VPERM2F128 $0x31, Y6, Y2, Y9; \
	VADDPS     Y9, Y8, Y2; \
	VPERM2F128 $0x20, Y7, Y3, Y8; \
	VPERM2F128 $0x31, Y7, Y3, Y9; \
	VADDPS     Y9, Y8, Y3; \
	VSHUFPS    $0x44, Y1, Y0, Y8; \
	VSHUFPS    $0xEE, Y1, Y0, Y9; \
	VADDPS     Y9, Y8, Y0; \
	VSHUFPS    $0x44, Y3, Y2, Y8; \
	VSHUFPS    $0xEE, Y3, Y2, Y9; \
	VADDPS     Y9, Y8, Y2; \
	VSHUFPS    $0x88, Y2, Y0, Y8; \
	VSHUFPS    $0xDD, Y2, Y0, Y9; \
	VADDPS     Y9, Y8, Y0

// NEXTKV steps BX to the next KV head's columns (R10·ES bytes) when the
// group counter R13 reaches group, then counts the heads left (R12) down.
#define NEXTKV(ES, lbl) \
	INCQ R13; \
	CMPQ R13, group+64(FP); \
	JLT  lbl; \
	XORQ R13, R13; \
	LEAQ (BX)(R10*ES), BX; \
lbl: \
	DECQ R12

// PFNEXT hints into L1 the lines of this head's KV columns (BX, R10·ES
// bytes) in the ROWS rows from DIST rows on (rows R8 bytes apart), when
// pf is set and the run has them (R9 > DIST+ROWS-1 slots left): the next
// block of a run, so that its loads overlap this block's arithmetic. A
// hint only: the results do not depend on it. Uses AX, CX, DX.
#define PFNEXT(DIST, ROWS, MORE, SH, loop, lbl) \
	CMPQ pf+80(FP), $0; \
	JEQ  lbl; \
	CMPQ R9, $(DIST+ROWS); \
	JLT  lbl; \
	MOVQ $DIST, AX; \
	IMULQ R8, AX; \
	LEAQ (BX)(AX*1), DX; \
	MOVQ R10, CX; \
	SHLQ $SH, CX; \
loop: \
	PREFETCHT0 (DX); \
	PREFETCHT0 (DX)(R8*1); \
	PREFETCHT0 (DX)(R8*2); \
	PREFETCHT0 (DX)(R11*1); \
	MORE; \
	ADDQ $64, DX; \
	SUBQ $64, CX; \
	JG   loop; \
lbl:

#define PFMORE4 NOP
#define PFMORE8 \
	LEAQ (DX)(R8*4), AX; \
	PREFETCHT0 (AX); \
	PREFETCHT0 (AX)(R8*1); \
	PREFETCHT0 (AX)(R8*2); \
	PREFETCHT0 (AX)(R11*1)

// DOTSROW is attnDotsRowAVX2's body. Registers: R14 the block's first K row
// at head 0's KV columns, R15 head 0's score for the block's first slot,
// BX this head's K columns in the block, SI its q, DI its scores, R8 the
// K row stride, R11 three of it, R9 the slots left, R10 d, R12 the heads
// left, R13 the head's place in its group. Blocks of eight slots (eight
// chains, HSUM8X8), then single slots (one chain, AHSUM): the same sums.
#define DOTSROW(ES, SH) \
	MOVQ         sc+0(FP), R15; \
	MOVQ         k+24(FP), R14; \
	MOVQ         kstride+32(FP), R8; \
	MOVQ         m+40(FP), R9; \
	MOVQ         d+48(FP), R10; \
	VBROADCASTSS scale+88(FP), Y15; \
	LEAQ         (R8)(R8*2), R11; \
	CMPQ         R9, $8; \
	JLT          one; \
eight: \
	MOVQ   q+16(FP), SI; \
	MOVQ   R15, DI; \
	MOVQ   R14, BX; \
	MOVQ   heads+56(FP), R12; \
	MOVQ   phase+72(FP), R13; \
ehead: \
	PFNEXT(8, 8, PFMORE8, SH, epfl, epf); \
	VXORPS Y0, Y0, Y0; \
	VXORPS Y1, Y1, Y1; \
	VXORPS Y2, Y2, Y2; \
	VXORPS Y3, Y3, Y3; \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	XORQ   AX, AX; \
echunk: \
	VMOVUPS (SI)(AX*4), Y8; \
	LEAQ    (BX)(AX*ES), DX; \
	LEAQ    (DX)(R11*1), CX; \
	KFMA((DX), Y0); \
	KFMA((DX)(R8*1), Y1); \
	KFMA((DX)(R8*2), Y2); \
	KFMA((CX), Y3); \
	KFMA((DX)(R8*4), Y4); \
	KFMA((CX)(R8*2), Y5); \
	KFMA((CX)(R11*1), Y6); \
	KFMA((CX)(R8*4), Y7); \
	ADDQ    $8, AX; \
	CMPQ    AX, R10; \
	JLT     echunk; \
	HSUM8X8; \
	VMULPS  Y15, Y0, Y0; \
	VMOVUPS Y0, (DI); \
	LEAQ    (SI)(R10*4), SI; \
	ADDQ    scstride+8(FP), DI; \
	NEXTKV(ES, enext); \
	JNZ     ehead; \
	LEAQ    (R14)(R8*8), R14; \
	ADDQ    $32, R15; \
	SUBQ    $8, R9; \
	CMPQ    R9, $8; \
	JGE     eight; \
one: \
	TESTQ R9, R9; \
	JZ    done; \
oslot: \
	MOVQ   q+16(FP), SI; \
	MOVQ   R15, DI; \
	MOVQ   R14, BX; \
	MOVQ   heads+56(FP), R12; \
	MOVQ   phase+72(FP), R13; \
ohead: \
	VXORPS Y0, Y0, Y0; \
	XORQ   AX, AX; \
ochunk: \
	VMOVUPS (SI)(AX*4), Y8; \
	KFMA((BX)(AX*ES), Y0); \
	ADDQ    $8, AX; \
	CMPQ    AX, R10; \
	JLT     ochunk; \
	AHSUM(Y0, X0, X5); \
	VMULSS  X15, X0, X0; \
	VMOVSS  X0, (DI); \
	LEAQ    (SI)(R10*4), SI; \
	ADDQ    scstride+8(FP), DI; \
	NEXTKV(ES, onext); \
	JNZ     ohead; \
	ADDQ    R8, R14; \
	ADDQ    $4, R15; \
	DECQ    R9; \
	JNZ     oslot; \
done: \
	VZEROUPPER; \
	RET

// AXPYROW is attnAxpyRowAVX2's body. Registers: R14 the block's first V row
// at head 0's KV columns, R15 head 0's weight for the block's first slot,
// BX this head's V columns in the block, SI its weights, DI its output,
// R8 the V row stride, R11 three of it, R9 the slots left, R10 d, R12 the
// heads left, R13 the head's place in its group. Blocks of four slots,
// then single slots; per output element the FMAs go slot by slot in order
// whatever the block, through memory (out[t] is loaded, updated and stored
// back), so a value does not depend on how the slots were blocked.
#define AXPYROW(ES, SH) \
	MOVQ out+0(FP), DI; \
	MOVQ a+8(FP), R15; \
	MOVQ v+24(FP), R14; \
	MOVQ vstride+32(FP), R8; \
	MOVQ m+40(FP), R9; \
	MOVQ d+48(FP), R10; \
	LEAQ (R8)(R8*2), R11; \
	CMPQ R9, $4; \
	JLT  one; \
four: \
	MOVQ out+0(FP), DI; \
	MOVQ R15, SI; \
	MOVQ R14, BX; \
	MOVQ heads+56(FP), R12; \
	MOVQ phase+72(FP), R13; \
fhead: \
	PFNEXT(4, 4, PFMORE4, SH, fpfl, fpf); \
	VBROADCASTSS (SI), Y12; \
	VBROADCASTSS 4(SI), Y13; \
	VBROADCASTSS 8(SI), Y14; \
	VBROADCASTSS 12(SI), Y15; \
	XORQ AX, AX; \
fchunk: \
	VMOVUPS (DI)(AX*4), Y0; \
	LEAQ    (BX)(AX*ES), DX; \
	VFMA((DX), Y12, Y0); \
	VFMA((DX)(R8*1), Y13, Y0); \
	VFMA((DX)(R8*2), Y14, Y0); \
	VFMA((DX)(R11*1), Y15, Y0); \
	VMOVUPS Y0, (DI)(AX*4); \
	ADDQ    $8, AX; \
	CMPQ    AX, R10; \
	JLT     fchunk; \
	LEAQ    (DI)(R10*4), DI; \
	ADDQ    astride+16(FP), SI; \
	NEXTKV(ES, fnext); \
	JNZ     fhead; \
	LEAQ    (R14)(R8*4), R14; \
	ADDQ    $16, R15; \
	SUBQ    $4, R9; \
	CMPQ    R9, $4; \
	JGE     four; \
one: \
	TESTQ R9, R9; \
	JZ    done; \
oslot: \
	MOVQ out+0(FP), DI; \
	MOVQ R15, SI; \
	MOVQ R14, BX; \
	MOVQ heads+56(FP), R12; \
	MOVQ phase+72(FP), R13; \
ohead: \
	VBROADCASTSS (SI), Y12; \
	XORQ AX, AX; \
ochunk: \
	VMOVUPS (DI)(AX*4), Y0; \
	VFMA((BX)(AX*ES), Y12, Y0); \
	VMOVUPS Y0, (DI)(AX*4); \
	ADDQ    $8, AX; \
	CMPQ    AX, R10; \
	JLT     ochunk; \
	LEAQ    (DI)(R10*4), DI; \
	ADDQ    astride+16(FP), SI; \
	NEXTKV(ES, onext); \
	JNZ     ohead; \
	ADDQ    R8, R14; \
	ADDQ    $4, R15; \
	DECQ    R9; \
	JNZ     oslot; \
done: \
	VZEROUPPER; \
	RET

#define KFMA(mem, acc) VFMADD231PS mem, Y8, acc
#define VFMA(mem, w, acc) VFMADD231PS mem, w, acc

// func attnDotsRowAVX2(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32)
TEXT ·attnDotsRowAVX2(SB), NOSPLIT, $0-92
	DOTSROW(4, 2)

// func attnAxpyRowAVX2(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)
TEXT ·attnAxpyRowAVX2(SB), NOSPLIT, $0-88
	AXPYROW(4, 2)

#undef KFMA
#undef VFMA
#define KFMA(mem, acc) VCVTPH2PS mem, Y9; VFMADD231PS Y9, Y8, acc
#define VFMA(mem, w, acc) VCVTPH2PS mem, Y9; VFMADD231PS Y9, w, acc

// func attnDotsRowF16AVX2(sc *float32, scstride uintptr, q *float32, k unsafe.Pointer, kstride uintptr, m, d, heads, group, phase, pf int, scale float32)
TEXT ·attnDotsRowF16AVX2(SB), NOSPLIT, $0-92
	DOTSROW(2, 1)

// func attnAxpyRowF16AVX2(out *float32, a *float32, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group, phase, pf int)
TEXT ·attnAxpyRowF16AVX2(SB), NOSPLIT, $0-88
	AXPYROW(2, 1)
