//go:build amd64 && !purego

#include "textflag.h"

// func addAVX2(dst, a *float32, n int)
// dst[i] = dst[i] + a[i] for i < n (a positive multiple of 8), 32 a pass
// while 32 remain, then 8.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

add32:
	LEAQ    32(AX), DX
	CMPQ    DX, CX
	JGT     add8
	VMOVUPS (DI)(AX*4), Y0
	VMOVUPS 32(DI)(AX*4), Y1
	VMOVUPS 64(DI)(AX*4), Y2
	VMOVUPS 96(DI)(AX*4), Y3
	VADDPS  (SI)(AX*4), Y0, Y0
	VADDPS  32(SI)(AX*4), Y1, Y1
	VADDPS  64(SI)(AX*4), Y2, Y2
	VADDPS  96(SI)(AX*4), Y3, Y3
	VMOVUPS Y0, (DI)(AX*4)
	VMOVUPS Y1, 32(DI)(AX*4)
	VMOVUPS Y2, 64(DI)(AX*4)
	VMOVUPS Y3, 96(DI)(AX*4)
	MOVQ    DX, AX
	JMP     add32

add8:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (DI)(AX*4), Y0
	VADDPS  (SI)(AX*4), Y0, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ    $8, AX
	JMP     add8

done:
	VZEROUPPER
	RET
