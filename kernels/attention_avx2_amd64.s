//go:build amd64 && !purego

#include "textflag.h"

// Attention's inner loops with AVX2 + FMA: see attention_avx2_amd64.go.

// AHSUM leaves in X's low lane the sum of Y's lanes in hsum8's order.
#define AHSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

// func attnDotsAVX2(sc *float32, q *float32, k *float32, kstride uintptr, n, d int, scale float32)
//
// sc[m] = (q · k_m[0:d]) · scale for m < n, k_m = k + m·kstride bytes, d a
// positive multiple of 8: one 8-lane FMA chain per slot, hsum8, then one
// float32 multiply. Eight slots go at once (eight independent chains, their
// horizontal sums done together by transposing: the same additions of the
// same lanes as AHSUM, four adds for eight slots instead of three per slot),
// then four (four chains, AHSUM each), then one, so a slot's score does not
// depend on how many slots share its call.
TEXT ·attnDotsAVX2(SB), NOSPLIT, $0-52
	MOVQ         sc+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         k+16(FP), BX
	MOVQ         kstride+24(FP), R8
	MOVQ         n+32(FP), R9
	MOVQ         d+40(FP), R10
	VMOVSS       scale+48(FP), X15
	VBROADCASTSS X15, Y15          // scale in every lane (X15's low lane unchanged)
	LEAQ         (R8)(R8*2), R11   // 3·kstride
	CMPQ         R9, $8
	JLT          four_check

eight:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ   AX, AX

echunk:
	VMOVUPS     (SI)(AX*4), Y8
	LEAQ        (BX)(AX*4), DX // slot 0's chunk
	LEAQ        (DX)(R11*1), CX // slot 3's chunk
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS (DX)(R8*1), Y8, Y1
	VFMADD231PS (DX)(R8*2), Y8, Y2
	VFMADD231PS (CX), Y8, Y3
	VFMADD231PS (DX)(R8*4), Y8, Y4
	VFMADD231PS (CX)(R8*2), Y8, Y5
	VFMADD231PS (CX)(R11*1), Y8, Y6
	VFMADD231PS (CX)(R8*4), Y8, Y7
	ADDQ        $8, AX
	CMPQ        AX, R10
	JLT         echunk

	// Per slot m, AHSUM adds lane t to lane t+4 (h_m = lo + hi), then lane
	// t to t+2, then lane 0 to lane 1. Pair slot m with m+4 in one register
	// (m in the low 128 bits, m+4 in the high), then shuffle lanes so that
	// the same sums are vertical adds.
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x31, Y4, Y0, Y9
	VADDPS     Y9, Y8, Y0        // [h0 | h4]
	VPERM2F128 $0x20, Y5, Y1, Y8
	VPERM2F128 $0x31, Y5, Y1, Y9
	VADDPS     Y9, Y8, Y1        // [h1 | h5]
	VPERM2F128 $0x20, Y6, Y2, Y8
	VPERM2F128 $0x31, Y6, Y2, Y9
	VADDPS     Y9, Y8, Y2        // [h2 | h6]
	VPERM2F128 $0x20, Y7, Y3, Y8
	VPERM2F128 $0x31, Y7, Y3, Y9
	VADDPS     Y9, Y8, Y3        // [h3 | h7]
	VSHUFPS    $0x44, Y1, Y0, Y8 // per 128 bits: h0[0] h0[1] h1[0] h1[1]
	VSHUFPS    $0xEE, Y1, Y0, Y9 //                h0[2] h0[3] h1[2] h1[3]
	VADDPS     Y9, Y8, Y0        // h0[0]+h0[2], h0[1]+h0[3], h1[0]+h1[2], h1[1]+h1[3]
	VSHUFPS    $0x44, Y3, Y2, Y8
	VSHUFPS    $0xEE, Y3, Y2, Y9
	VADDPS     Y9, Y8, Y2        // the same for h2, h3
	VSHUFPS    $0x88, Y2, Y0, Y8 // first pair sums of h0 h1 h2 h3
	VSHUFPS    $0xDD, Y2, Y0, Y9 // second pair sums
	VADDPS     Y9, Y8, Y0        // slots 0 1 2 3 | 4 5 6 7
	VMULPS     Y15, Y0, Y0
	VMOVUPS    Y0, (DI)
	ADDQ       $32, DI
	LEAQ       (BX)(R8*8), BX
	SUBQ       $8, R9
	CMPQ       R9, $8
	JGE        eight

four_check:
	CMPQ R9, $4
	JLT  one

four:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	LEAQ   (BX)(R11*1), CX
	XORQ   AX, AX

fchunk:
	VMOVUPS     (SI)(AX*4), Y4
	LEAQ        (BX)(AX*4), DX
	VFMADD231PS (DX), Y4, Y0
	VFMADD231PS (DX)(R8*1), Y4, Y1
	VFMADD231PS (DX)(R8*2), Y4, Y2
	VFMADD231PS (CX)(AX*4), Y4, Y3
	ADDQ        $8, AX
	CMPQ        AX, R10
	JLT         fchunk
	AHSUM(Y0, X0, X5)
	AHSUM(Y1, X1, X5)
	AHSUM(Y2, X2, X5)
	AHSUM(Y3, X3, X5)
	VMULSS      X15, X0, X0
	VMULSS      X15, X1, X1
	VMULSS      X15, X2, X2
	VMULSS      X15, X3, X3
	VMOVSS      X0, (DI)
	VMOVSS      X1, 4(DI)
	VMOVSS      X2, 8(DI)
	VMOVSS      X3, 12(DI)
	ADDQ        $16, DI
	LEAQ        (BX)(R8*4), BX
	SUBQ        $4, R9
	CMPQ        R9, $4
	JGE         four

one:
	TESTQ R9, R9
	JZ    done

oslot:
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX

ochunk:
	VMOVUPS     (SI)(AX*4), Y4
	VFMADD231PS (BX)(AX*4), Y4, Y0
	ADDQ        $8, AX
	CMPQ        AX, R10
	JLT         ochunk
	AHSUM(Y0, X0, X5)
	VMULSS      X15, X0, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	ADDQ        R8, BX
	DECQ        R9
	JNZ         oslot

done:
	VZEROUPPER
	RET

// func attnAxpyAVX2(out *float32, a *float32, v *float32, vstride uintptr, n, d int)
//
// out[t] = fma(a[m], v_m[t], out[t]) for m = 0 … n−1 in order, t < d (d a
// positive multiple of 8), v_m = v + m·vstride bytes. Columns go 32 at a
// time (four chains in registers over all n slots), then 8 at a time.
TEXT ·attnAxpyAVX2(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ v+16(FP), BX
	MOVQ vstride+24(FP), R8
	MOVQ d+40(FP), R10
	XORQ R12, R12 // column

cols32:
	LEAQ    32(R12), AX
	CMPQ    AX, R10
	JGT     cols8
	VMOVUPS (DI)(R12*4), Y0
	VMOVUPS 32(DI)(R12*4), Y1
	VMOVUPS 64(DI)(R12*4), Y2
	VMOVUPS 96(DI)(R12*4), Y3
	MOVQ    a+8(FP), SI
	LEAQ    (BX)(R12*4), CX
	MOVQ    n+32(FP), R9

m32:
	VBROADCASTSS (SI), Y4
	VFMADD231PS  (CX), Y4, Y0
	VFMADD231PS  32(CX), Y4, Y1
	VFMADD231PS  64(CX), Y4, Y2
	VFMADD231PS  96(CX), Y4, Y3
	ADDQ         $4, SI
	ADDQ         R8, CX
	DECQ         R9
	JNZ          m32
	VMOVUPS      Y0, (DI)(R12*4)
	VMOVUPS      Y1, 32(DI)(R12*4)
	VMOVUPS      Y2, 64(DI)(R12*4)
	VMOVUPS      Y3, 96(DI)(R12*4)
	ADDQ         $32, R12
	JMP          cols32

cols8:
	CMPQ    R12, R10
	JGE     adone
	VMOVUPS (DI)(R12*4), Y0
	MOVQ    a+8(FP), SI
	LEAQ    (BX)(R12*4), CX
	MOVQ    n+32(FP), R9

m8:
	VBROADCASTSS (SI), Y4
	VFMADD231PS  (CX), Y4, Y0
	ADDQ         $4, SI
	ADDQ         R8, CX
	DECQ         R9
	JNZ          m8
	VMOVUPS      Y0, (DI)(R12*4)
	ADDQ         $8, R12
	JMP          cols8

adone:
	VZEROUPPER
	RET

// func attnAxpy4AVX2(out *float32, ostride uintptr, a *float32, astride uintptr, v0, v1, v2, v3 *float32, vstride uintptr, n int)
//
// attnAxpyAVX2 for eight columns of four items at once: for k < 4, out_k =
// out + k·ostride bytes, a_k = a + k·astride bytes, v_k the given row
// pointers, and out_k[t] = fma(a_k[m], v_k,m[t], out_k[t]) for m = 0 … n−1
// in order, t < 8, v_k,m = v_k + m·vstride bytes; n ≥ 1. Each item's
// arithmetic is attnAxpyAVX2's; the four items' chains run side by side.
TEXT ·attnAxpy4AVX2(SB), NOSPLIT, $0-80
	MOVQ    out+0(FP), DI
	MOVQ    ostride+8(FP), AX
	MOVQ    a+16(FP), SI
	MOVQ    astride+24(FP), R11
	MOVQ    v0+32(FP), BX
	MOVQ    v1+40(FP), CX
	MOVQ    v2+48(FP), DX
	MOVQ    v3+56(FP), R8
	MOVQ    vstride+64(FP), R10
	LEAQ    (SI)(R11*1), R12  // a_1
	LEAQ    (R12)(R11*1), R13 // a_2
	ADDQ    R13, R11          // a_3
	LEAQ    (AX)(AX*2), R9    // 3·ostride
	VMOVUPS (DI), Y0
	VMOVUPS (DI)(AX*1), Y1
	VMOVUPS (DI)(AX*2), Y2
	VMOVUPS (DI)(R9*1), Y3
	XORQ    AX, AX            // slot
	XORQ    R9, R9            // slot offset in V: m·vstride

m4:
	VBROADCASTSS (SI)(AX*4), Y4
	VBROADCASTSS (R12)(AX*4), Y5
	VBROADCASTSS (R13)(AX*4), Y6
	VBROADCASTSS (R11)(AX*4), Y7
	VFMADD231PS  (BX)(R9*1), Y4, Y0
	VFMADD231PS  (CX)(R9*1), Y5, Y1
	VFMADD231PS  (DX)(R9*1), Y6, Y2
	VFMADD231PS  (R8)(R9*1), Y7, Y3
	ADDQ         R10, R9
	INCQ         AX
	CMPQ         AX, n+72(FP)
	JLT          m4

	MOVQ    ostride+8(FP), AX
	LEAQ    (AX)(AX*2), R9
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, (DI)(AX*1)
	VMOVUPS Y2, (DI)(AX*2)
	VMOVUPS Y3, (DI)(R9*1)
	VZEROUPPER
	RET
