//go:build amd64 && !purego

#include "textflag.h"

// Attention's inner loops over binary16 K and V pages with AVX2 + FMA +
// F16C: attnDotsAVX2 and attnAxpyAVX2 (attention_avx2_amd64.s) with each
// group of 8 halves widened by VCVTPH2PS (exact) before the same FMA, so
// their results are those of the float32 kernels on the widened values.

// F16HSUM leaves in X's low lane the sum of Y's lanes in hsum8's order.
#define F16HSUM(Y, X, T) \
	VEXTRACTF128 $1, Y, T; \
	VADDPS T, X, X; \
	VMOVHLPS X, X, T; \
	VADDPS T, X, X; \
	VMOVSHDUP X, T; \
	VADDSS T, X, X

// func attnDotsF16AVX2(sc *float32, q *float32, k *uint16, kstride uintptr, n, d int, scale float32)
//
// sc[m] = (q · widen(k_m[0:d])) · scale for m < n, k_m = k + m·kstride
// bytes, d a positive multiple of 8: attnDotsAVX2's chains and order.
TEXT ·attnDotsF16AVX2(SB), NOSPLIT, $0-52
	MOVQ   sc+0(FP), DI
	MOVQ   q+8(FP), SI
	MOVQ   k+16(FP), BX
	MOVQ   kstride+24(FP), R8
	MOVQ   n+32(FP), R9
	MOVQ   d+40(FP), R10
	VMOVSS scale+48(FP), X15
	LEAQ   (R8)(R8*2), R11 // 3·kstride
	CMPQ   R9, $4
	JLT    one

four:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	LEAQ   (BX)(R11*1), CX
	XORQ   AX, AX

fchunk:
	VMOVUPS     (SI)(AX*4), Y4
	LEAQ        (BX)(AX*2), DX
	VCVTPH2PS   (DX), Y5
	VCVTPH2PS   (DX)(R8*1), Y6
	VCVTPH2PS   (DX)(R8*2), Y7
	VCVTPH2PS   (CX)(AX*2), Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $8, AX
	CMPQ        AX, R10
	JLT         fchunk
	F16HSUM(Y0, X0, X5)
	F16HSUM(Y1, X1, X5)
	F16HSUM(Y2, X2, X5)
	F16HSUM(Y3, X3, X5)
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
	VCVTPH2PS   (BX)(AX*2), Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $8, AX
	CMPQ        AX, R10
	JLT         ochunk
	F16HSUM(Y0, X0, X5)
	VMULSS      X15, X0, X0
	VMOVSS      X0, (DI)
	ADDQ        $4, DI
	ADDQ        R8, BX
	DECQ        R9
	JNZ         oslot

done:
	VZEROUPPER
	RET

// func attnAxpyF16AVX2(out *float32, a *float32, v *uint16, vstride uintptr, n, d int)
//
// out[t] = fma(a[m], widen(v_m[t]), out[t]) for m = 0 … n−1 in order, t < d
// (d a positive multiple of 8), v_m = v + m·vstride bytes: attnAxpyAVX2's
// column blocks and order.
TEXT ·attnAxpyF16AVX2(SB), NOSPLIT, $0-48
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
	LEAQ    (BX)(R12*2), CX
	MOVQ    n+32(FP), R9

m32:
	VBROADCASTSS (SI), Y4
	VCVTPH2PS    (CX), Y5
	VCVTPH2PS    16(CX), Y6
	VCVTPH2PS    32(CX), Y7
	VCVTPH2PS    48(CX), Y8
	VFMADD231PS  Y5, Y4, Y0
	VFMADD231PS  Y6, Y4, Y1
	VFMADD231PS  Y7, Y4, Y2
	VFMADD231PS  Y8, Y4, Y3
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
	LEAQ    (BX)(R12*2), CX
	MOVQ    n+32(FP), R9

m8:
	VBROADCASTSS (SI), Y4
	VCVTPH2PS    (CX), Y5
	VFMADD231PS  Y5, Y4, Y0
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

// func cvtPS2PHF16C(dst *uint16, src *float32, n int)
//
// dst[i] = VCVTPS2PH(src[i]) rounding to nearest even, n a multiple of 8:
// the hardware rounding, for tests that hold tensor.F32ToF16 to it.
TEXT ·cvtPS2PHF16C(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

cvt:
	CMPQ      AX, CX
	JGE       cdone
	VMOVUPS   (SI)(AX*4), Y0
	VCVTPS2PH $0, Y0, (DI)(AX*2)
	ADDQ      $8, AX
	JMP       cvt

cdone:
	VZEROUPPER
	RET
