//go:build goexperiment.simd && amd64 && !purego

#include "textflag.h"

// The inner loops of the tiled attention for head dims that are a multiple
// of 16 on AVX-512 (attention_asm_amd64.go has the Go side and the
// contracts). They do, for one item and one block of 16 KV slots, exactly
// what score16 and axpyRows16 of attention_simd_amd64.go do:
//
//   - scores: per slot k the chain acc_k = fma(q[c:c+16], K_k[c:c+16], acc_k),
//     c = 0, 16, …, from acc_k = +0; the 16 chains summed lane-wise in
//     hsum16's tree (p_i = l_i + l_{i+8}; q_i = p_i + p_{i+4};
//     (q_0 + q_2) + (q_1 + q_3)) by a transpose, times Scale; the visible
//     slots' scores stored packed in ascending slot order;
//   - values: for each visible slot k, ascending, out += w_n · V_k (one FMA
//     per output element, w_n the slot's weight).
//
// Registers of attnScores16: Z0–Z3 the query chunks of the current group
// of four, Z8–Z23 the 16 chains, Z24–Z25 scratch, Z31 Scale. Chain slot k
// lives in Z(8 + T(k)), T(k) = 4·(k mod 4) + k/4: the transpose below leaves
// the sum of the chain in register position p in lane T(p), so this
// placement brings slot k's score to lane k with no final permute.
// GP: BX the row pointers, DX the byte offset into the rows, CX the end of
// the whole groups of 64 floats, R9 the end of the head, SI q, R8 a row.

// PREFETCH4 hints the four lines at DX of row slot of R10 into L2.
#define PREFETCH4(slot) \
	MOVQ (slot*8)(R10), R8; \
	PREFETCHT1 0(R8)(DX*1); \
	PREFETCHT1 64(R8)(DX*1); \
	PREFETCHT1 128(R8)(DX*1); \
	PREFETCHT1 192(R8)(DX*1)

// PREFETCH16 hints the next block's rows of this item (R10, nil for none)
// into L2 while this block computes: the first four lines at DX of each
// row, all of a head of 64.
#define PREFETCH16 \
	PREFETCH4(0); PREFETCH4(1); PREFETCH4(2); PREFETCH4(3); \
	PREFETCH4(4); PREFETCH4(5); PREFETCH4(6); PREFETCH4(7); \
	PREFETCH4(8); PREFETCH4(9); PREFETCH4(10); PREFETCH4(11); \
	PREFETCH4(12); PREFETCH4(13); PREFETCH4(14); PREFETCH4(15)

// HEADRANGE turns d (R9, floats) and off (DX, bytes) into the head's byte
// range [DX, R9) and CX, the end of its whole groups of 64 floats.
#define HEADRANGE \
	SHLQ $2, R9; \
	ADDQ DX, R9; \
	MOVQ R9, CX; \
	SUBQ DX, CX; \
	ANDQ $~255, CX; \
	ADDQ DX, CX

// ROW4 is one slot's four chunks of the group at DX.
#define ROW4(slot, acc) \
	MOVQ (slot*8)(BX), R8; \
	VFMADD231PS 0(R8)(DX*1), Z0, acc; \
	VFMADD231PS 64(R8)(DX*1), Z1, acc; \
	VFMADD231PS 128(R8)(DX*1), Z2, acc; \
	VFMADD231PS 192(R8)(DX*1), Z3, acc

// ROW1 is one slot's single chunk at DX.
#define ROW1(slot, acc) \
	MOVQ (slot*8)(BX), R8; \
	VFMADD231PS (R8)(DX*1), Z0, acc

// PAIR adds, of two vectors a and b of partial sums, each lane to its
// partner under the shuffle pair (lo, hi) given by sh and its immediates,
// into a: a = sh(lo; a, b) + sh(hi; a, b).
#define PAIR(sh, lo, hi, a, b) \
	sh lo, b, a, Z24; \
	sh hi, b, a, Z25; \
	VADDPS Z25, Z24, a

// func attnScores16(sc *float32, q *float32, rows *[16]unsafe.Pointer, off, d uintptr, vis uint32, scale float32, next *[16]unsafe.Pointer)
TEXT ·attnScores16(SB), NOSPLIT, $0-56
	MOVQ q+8(FP), SI
	MOVQ rows+16(FP), BX
	MOVQ off+24(FP), DX
	MOVQ d+32(FP), R9
	VBROADCASTSS scale+44(FP), Z31
	HEADRANGE
	MOVQ next+48(FP), R10
	TESTQ R10, R10
	JEQ   scpfdone
	PREFETCH16
scpfdone:
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	CMPQ DX, CX
	JEQ  single

group:
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS 128(SI), Z2
	VMOVUPS 192(SI), Z3
	ROW4(0, Z8)
	ROW4(4, Z9)
	ROW4(8, Z10)
	ROW4(12, Z11)
	ROW4(1, Z12)
	ROW4(5, Z13)
	ROW4(9, Z14)
	ROW4(13, Z15)
	ROW4(2, Z16)
	ROW4(6, Z17)
	ROW4(10, Z18)
	ROW4(14, Z19)
	ROW4(3, Z20)
	ROW4(7, Z21)
	ROW4(11, Z22)
	ROW4(15, Z23)
	ADDQ $256, SI
	ADDQ $256, DX
	CMPQ DX, CX
	JNE  group

single:
	CMPQ DX, R9
	JEQ  reduce
	VMOVUPS (SI), Z0
	ROW1(0, Z8)
	ROW1(4, Z9)
	ROW1(8, Z10)
	ROW1(12, Z11)
	ROW1(1, Z12)
	ROW1(5, Z13)
	ROW1(9, Z14)
	ROW1(13, Z15)
	ROW1(2, Z16)
	ROW1(6, Z17)
	ROW1(10, Z18)
	ROW1(14, Z19)
	ROW1(3, Z20)
	ROW1(7, Z21)
	ROW1(11, Z22)
	ROW1(15, Z23)
	ADDQ $64, SI
	ADDQ $64, DX
	JMP  single

reduce:
	// Level 1, p_i = l_i + l_{i+8}: [a.lo256, b.lo256] + [a.hi256, b.hi256].
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z8, Z9)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z10, Z11)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z12, Z13)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z14, Z15)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z16, Z17)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z18, Z19)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z20, Z21)
	PAIR(VSHUFF32X4, $0x44, $0xEE, Z22, Z23)
	// Level 2, q_i = p_i + p_{i+4}: 128-bit chunks (0, 2) + (1, 3) of each.
	PAIR(VSHUFF32X4, $0x88, $0xDD, Z8, Z10)
	PAIR(VSHUFF32X4, $0x88, $0xDD, Z12, Z14)
	PAIR(VSHUFF32X4, $0x88, $0xDD, Z16, Z18)
	PAIR(VSHUFF32X4, $0x88, $0xDD, Z20, Z22)
	// Level 3, q_0 + q_2 and q_1 + q_3 within each 128-bit lane.
	PAIR(VSHUFPS, $0x44, $0xEE, Z8, Z12)
	PAIR(VSHUFPS, $0x44, $0xEE, Z16, Z20)
	// Level 4, (q_0 + q_2) + (q_1 + q_3): lane k now holds slot k's sum.
	PAIR(VSHUFPS, $0x88, $0xDD, Z8, Z16)
	VMULPS Z31, Z8, Z8

	// Store the visible slots' scores packed: compress, then a masked
	// store of popcount(vis) lanes.
	MOVQ    sc+0(FP), DI
	MOVL    vis+40(FP), AX
	KMOVW   AX, K1
	VCOMPRESSPS Z8, K1, Z9
	POPCNTL AX, CX
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K2
	VMOVUPS Z9, K2, (DI)
	VZEROUPPER
	RET

// AXPY4 adds w (Z4) times the group of four chunks at DX of row R8.
#define AXPY4 \
	VFMADD231PS 0(R8)(DX*1), Z4, Z0; \
	VFMADD231PS 64(R8)(DX*1), Z4, Z1; \
	VFMADD231PS 128(R8)(DX*1), Z4, Z2; \
	VFMADD231PS 192(R8)(DX*1), Z4, Z3

// func attnAxpy16(out *float32, w *float32, rows *[16]unsafe.Pointer, off, d uintptr, vis uint32, next *[16]unsafe.Pointer)
//
// Registers: Z0–Z3 the output group, Z4 the weight; GP: DI out, SI w, BX the
// row pointers, DX the byte offset into the rows, R9 its end, CX the end of
// the whole groups, AX the slots left, R10 a slot, R11 the weight index,
// R8 a row.
TEXT ·attnAxpy16(SB), NOSPLIT, $0-56
	MOVQ out+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ rows+16(FP), BX
	MOVQ off+24(FP), DX
	MOVQ d+32(FP), R9
	MOVL vis+40(FP), AX
	TESTL AX, AX
	JEQ  axdone
	HEADRANGE
	MOVQ next+48(FP), R10
	TESTQ R10, R10
	JEQ   axpfdone
	PREFETCH16
axpfdone:
	CMPQ DX, CX
	JEQ  axsingle

axgroup:
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVL vis+40(FP), AX
	XORQ R11, R11

axrow4:
	TZCNTL AX, R10
	MOVQ   (BX)(R10*8), R8
	VBROADCASTSS (SI)(R11*4), Z4
	INCQ   R11
	AXPY4
	BLSRL  AX, AX
	JNZ    axrow4
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, DI
	ADDQ $256, DX
	CMPQ DX, CX
	JNE  axgroup

axsingle:
	CMPQ DX, R9
	JEQ  axdone
	VMOVUPS (DI), Z0
	MOVL vis+40(FP), AX
	XORQ R11, R11

axrow1:
	TZCNTL AX, R10
	MOVQ   (BX)(R10*8), R8
	VBROADCASTSS (SI)(R11*4), Z4
	INCQ   R11
	VFMADD231PS (R8)(DX*1), Z4, Z0
	BLSRL  AX, AX
	JNZ    axrow1
	VMOVUPS Z0, (DI)
	ADDQ $64, DI
	ADDQ $64, DX
	JMP  axsingle

axdone:
	VZEROUPPER
	RET
