//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 row-block kernels of attention_avx512_amd64.go.

// HSUM2X8 leaves in Z0 the lane sums of Z0…Z7, whose low 256 bits are row
// a's 8-lane chains for slots 0…7 (register m, slot m) and high 256 bits
// row b's: Z0's low 256 bits get row a's eight sums (slot m in lane m),
// its high 256 bits row b's. Each sum is AHSUM's (attention_avx2_amd64.s)
// for its own 8 lanes: s_t = l_t + l_{t+4}, u_t = s_t + s_{t+2}, u_0 + u_1.
// Z8, Z9 are scratch.
#define HSUM2X8 \
	VSHUFF32X4 $0x88, Z4, Z0, Z8; \
	VSHUFF32X4 $0xDD, Z4, Z0, Z9; \
	VADDPS     Z9, Z8, Z0; \
	VSHUFF32X4 $0x88, Z5, Z1, Z8; \
	VSHUFF32X4 $0xDD, Z5, Z1, Z9; \
	VADDPS     Z9, Z8, Z1; \
	VSHUFF32X4 $0x88, Z6, Z2, Z8; \
	VSHUFF32X4 $0xDD, Z6, Z2, Z9; \
	VADDPS     Z9, Z8, Z2; \
	VSHUFF32X4 $0x88, Z7, Z3, Z8; \
	VSHUFF32X4 $0xDD, Z7, Z3, Z9; \
	VADDPS     Z9, Z8, Z3; \
	VSHUFPS    $0x44, Z1, Z0, Z8; \
	VSHUFPS    $0xEE, Z1, Z0, Z9; \
	VADDPS     Z9, Z8, Z0; \
	VSHUFPS    $0x44, Z3, Z2, Z8; \
	VSHUFPS    $0xEE, Z3, Z2, Z9; \
	VADDPS     Z9, Z8, Z2; \
	VSHUFPS    $0x88, Z2, Z0, Z8; \
	VSHUFPS    $0xDD, Z2, Z0, Z9; \
	VADDPS     Z9, Z8, Z0; \
	VSHUFF32X4 $0xD8, Z0, Z0, Z0

// After step 1 register m (m < 4) holds [s(m,a), s(m,b), s(m+4,a),
// s(m+4,b)] as 128-bit chunks; after step 2 Z0's chunks are slots (0,1)
// of a, of b, slots (4,5) of a, of b (two u pairs each), Z2's the same for
// slots (2,3) and (6,7); step 3 gives chunks [a 0…3, b 0…3, a 4…7, b 4…7]
// and the last shuffle puts a's before b's.

// func attnDots2AVX512(sc *float32, scd, scstride uintptr, qa *float32, qd uintptr, k unsafe.Pointer, kstride uintptr, m, d, heads, group int, scale float32)
//
// Registers: R14 the block's first K row at head 0's columns, R15 row a's
// score of the block's first slot at head 0, BX this head's K columns in
// the block, SI row a's q for this head (row b's R10 bytes on), DI row a's
// scores for this head, R8 the K row stride, R11 three of it, R9 the slots
// left, R12 the heads left, R13 the head's place in its group.
TEXT ·attnDots2AVX512(SB), NOSPLIT, $0-92
	MOVQ         sc+0(FP), R15
	MOVQ         qd+32(FP), R10
	MOVQ         k+40(FP), R14
	MOVQ         kstride+48(FP), R8
	MOVQ         m+56(FP), R9
	VBROADCASTSS scale+88(FP), Z15
	LEAQ         (R8)(R8*2), R11
	CMPQ         R9, $8
	JLT          done

block:
	MOVQ qa+24(FP), SI
	MOVQ R15, DI
	MOVQ R14, BX
	MOVQ heads+72(FP), R12
	XORQ R13, R13

head:
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	XORQ   AX, AX

chunk:
	// Z8 = row a's q[t…t+8] | row b's.
	VMOVUPS         (SI)(AX*4), Y8
	LEAQ            (SI)(R10*1), DX
	VINSERTF32X8    $1, (DX)(AX*4), Z8, Z8
	LEAQ            (BX)(AX*4), DX
	LEAQ            (DX)(R8*4), CX
	VBROADCASTF32X8 (DX), Z16
	VBROADCASTF32X8 (DX)(R8*1), Z17
	VBROADCASTF32X8 (DX)(R8*2), Z18
	VBROADCASTF32X8 (DX)(R11*1), Z19
	VBROADCASTF32X8 (CX), Z20
	VBROADCASTF32X8 (CX)(R8*1), Z21
	VBROADCASTF32X8 (CX)(R8*2), Z22
	VBROADCASTF32X8 (CX)(R11*1), Z23
	VFMADD231PS     Z16, Z8, Z0
	VFMADD231PS     Z17, Z8, Z1
	VFMADD231PS     Z18, Z8, Z2
	VFMADD231PS     Z19, Z8, Z3
	VFMADD231PS     Z20, Z8, Z4
	VFMADD231PS     Z21, Z8, Z5
	VFMADD231PS     Z22, Z8, Z6
	VFMADD231PS     Z23, Z8, Z7
	ADDQ            $8, AX
	CMPQ            AX, d+64(FP)
	JLT             chunk

	HSUM2X8
	VMULPS        Z15, Z0, Z0
	VMOVUPS       Y0, (DI)
	MOVQ          scd+8(FP), AX
	VEXTRACTF32X8 $1, Z0, (DI)(AX*1)
	MOVQ          d+64(FP), AX
	LEAQ          (SI)(AX*4), SI
	ADDQ          scstride+16(FP), DI
	INCQ          R13
	CMPQ          R13, group+80(FP)
	JLT           samekv
	XORQ          R13, R13
	LEAQ          (BX)(AX*4), BX

samekv:
	DECQ R12
	JNZ  head
	LEAQ (R14)(R8*8), R14
	ADDQ $32, R15
	SUBQ $8, R9
	CMPQ R9, $8
	JGE  block

done:
	VZEROUPPER
	RET

// LOADROW and STOREROW move a row's 64 columns (four addresses 64 bytes
// apart) to and from its four accumulators.
#define LOADROW(addr0, addr1, addr2, addr3, z0, z1, z2, z3) \
	VMOVUPS addr0, z0; \
	VMOVUPS addr1, z1; \
	VMOVUPS addr2, z2; \
	VMOVUPS addr3, z3

#define STOREROW(addr0, addr1, addr2, addr3, z0, z1, z2, z3) \
	VMOVUPS z0, addr0; \
	VMOVUPS z1, addr1; \
	VMOVUPS z2, addr2; \
	VMOVUPS z3, addr3

// ROWFMA adds the weight w times the V columns Z16…Z19 into a row's four
// accumulators.
#define ROWFMA(w, z0, z1, z2, z3) \
	VFMADD231PS Z16, w, z0; \
	VFMADD231PS Z17, w, z1; \
	VFMADD231PS Z18, w, z2; \
	VFMADD231PS Z19, w, z3

// func attnAxpy4AVX512(out *float32, ostride uintptr, a *float32, arstride, astride uintptr, v unsafe.Pointer, vstride uintptr, m, d, heads, group int)
//
// Registers: DI row 0's output for this head, R10 the output row stride,
// R11 three of it, SI row 0's weight of the run's first slot for this head,
// R14 the weights' row stride, R15 three of it, BX this head's V columns at
// the run's first slot, CX the byte offset of the 64 columns in work, DX
// the V row of the slot in work, AX its weight (row 0), R8 the V row
// stride, R9 the slots left, R12 the heads left, R13 the head's place in
// its group. Z0…Z15 are the four rows' sums of the 64 columns (row r in
// Z4r…Z4r+3), Z16…Z19 the V row's columns, Z20…Z23 the rows' weights.
TEXT ·attnAxpy4AVX512(SB), NOSPLIT, $0-88
	MOVQ out+0(FP), DI
	MOVQ ostride+8(FP), R10
	MOVQ a+16(FP), SI
	MOVQ arstride+24(FP), R14
	MOVQ v+40(FP), BX
	MOVQ vstride+48(FP), R8
	MOVQ heads+72(FP), R12
	XORQ R13, R13
	LEAQ (R10)(R10*2), R11
	LEAQ (R14)(R14*2), R15
	CMPQ m+56(FP), $0
	JLE  done

head:
	XORQ CX, CX

cols:
	LEAQ    (DI)(CX*1), AX
	LOADROW((AX), 64(AX), 128(AX), 192(AX), Z0, Z1, Z2, Z3)
	LOADROW((AX)(R10*1), 64(AX)(R10*1), 128(AX)(R10*1), 192(AX)(R10*1), Z4, Z5, Z6, Z7)
	LOADROW((AX)(R10*2), 64(AX)(R10*2), 128(AX)(R10*2), 192(AX)(R10*2), Z8, Z9, Z10, Z11)
	LOADROW((AX)(R11*1), 64(AX)(R11*1), 128(AX)(R11*1), 192(AX)(R11*1), Z12, Z13, Z14, Z15)
	LEAQ    (BX)(CX*1), DX
	MOVQ    SI, AX
	MOVQ    m+56(FP), R9

slot:
	VMOVUPS      (DX), Z16
	VMOVUPS      64(DX), Z17
	VMOVUPS      128(DX), Z18
	VMOVUPS      192(DX), Z19
	VBROADCASTSS (AX), Z20
	VBROADCASTSS (AX)(R14*1), Z21
	VBROADCASTSS (AX)(R14*2), Z22
	VBROADCASTSS (AX)(R15*1), Z23
	ROWFMA(Z20, Z0, Z1, Z2, Z3)
	ROWFMA(Z21, Z4, Z5, Z6, Z7)
	ROWFMA(Z22, Z8, Z9, Z10, Z11)
	ROWFMA(Z23, Z12, Z13, Z14, Z15)
	ADDQ         R8, DX
	ADDQ         $4, AX
	DECQ         R9
	JNZ          slot

	LEAQ     (DI)(CX*1), AX
	STOREROW((AX), 64(AX), 128(AX), 192(AX), Z0, Z1, Z2, Z3)
	STOREROW((AX)(R10*1), 64(AX)(R10*1), 128(AX)(R10*1), 192(AX)(R10*1), Z4, Z5, Z6, Z7)
	STOREROW((AX)(R10*2), 64(AX)(R10*2), 128(AX)(R10*2), 192(AX)(R10*2), Z8, Z9, Z10, Z11)
	STOREROW((AX)(R11*1), 64(AX)(R11*1), 128(AX)(R11*1), 192(AX)(R11*1), Z12, Z13, Z14, Z15)
	ADDQ     $256, CX
	MOVQ     d+64(FP), R9
	SHLQ     $2, R9
	CMPQ     CX, R9
	JLT      cols

	// Next head: its outputs (d floats on), weights, and V columns when
	// the group changes.
	ADDQ astride+32(FP), SI
	ADDQ R9, DI
	INCQ R13
	CMPQ R13, group+80(FP)
	JLT  samekv
	XORQ R13, R13
	ADDQ R9, BX

samekv:
	DECQ R12
	JNZ  head

done:
	VZEROUPPER
	RET
