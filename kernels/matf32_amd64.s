//go:build goexperiment.simd && amd64 && !purego

#include "textflag.h"

// func f32Rows(dst *float32, w *float32, cols, nrows int, x *float32)
//
// dst[r] = dotF32x16(w[r·cols:(r+1)·cols], x) for r in [0,nrows): one
// 16-lane FMA chain per row, a short last chunk loaded zero-padded (masked),
// then hsum16's lane order. One row at a time with a software prefetch: a
// single sequential stream is what DRAM serves fastest here.
TEXT ·f32Rows(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ cols+16(FP), R8
	MOVQ nrows+24(FP), R9
	MOVQ x+32(FP), R10
	// K1 masks the cols%16 tail.
	MOVQ R8, CX
	ANDQ $15, CX
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	MOVQ R8, R11
	SHRQ $4, R11 // full chunks per row
	TESTQ R9, R9
	JZ done

row:
	VPXORD Z0, Z0, Z0
	XORQ BX, BX // byte offset in the row
	MOVQ R11, DX
	TESTQ DX, DX
	JZ tail

chunk:
	PREFETCHT0 1024(SI)(BX*1)
	VMOVUPS (R10)(BX*1), Z1
	VFMADD231PS (SI)(BX*1), Z1, Z0
	ADDQ $64, BX
	DECQ DX
	JNZ chunk

tail:
	TESTQ CX, CX
	JZ sum
	VMOVUPS.Z (R10)(BX*1), K1, Z1
	VMOVUPS.Z (SI)(BX*1), K1, Z2
	VFMADD231PS Z2, Z1, Z0

sum:
	VEXTRACTF32X8 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VMOVSS X0, (DI)
	ADDQ $4, DI
	LEAQ (SI)(R8*4), SI
	DECQ R9
	JNZ row

done:
	VZEROUPPER
	RET
