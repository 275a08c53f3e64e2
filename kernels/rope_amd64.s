//go:build amd64 && !purego

#include "textflag.h"

// func ropeAdjacentAVX2(x, cs *float32, heads, headDim, ropeDim int)
//
// Per head, per 8 values v = (v0, v1, v2, v3, …) and their 4 (cos, sin)
// pairs c: Y2 = v·(c0, c0, c1, c1, …) (VMOVSLDUP), Y3 = (v1, v0, v3, v2,
// …)·(s0, s0, s1, s1, …) (VMOVSHDUP), then VADDSUBPS: even lanes Y2 − Y3 =
// v0·cos − v1·sin, odd lanes Y2 + Y3 = v1·cos + v0·sin. Each product is
// rounded before the add, as in ropeGeneric.
TEXT ·ropeAdjacentAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), DI
	MOVQ heads+16(FP), R9
	MOVQ headDim+24(FP), R8
	SHLQ $2, R8
	MOVQ ropeDim+32(FP), R10

rhead:
	MOVQ cs+8(FP), SI
	XORQ AX, AX

r8:
	VMOVUPS   (DI)(AX*4), Y0
	VMOVUPS   (SI)(AX*4), Y1
	VMOVSLDUP Y1, Y4
	VMOVSHDUP Y1, Y5
	VPERMILPS $0xB1, Y0, Y6
	VMULPS    Y4, Y0, Y2
	VMULPS    Y5, Y6, Y3
	VADDSUBPS Y3, Y2, Y2
	VMOVUPS   Y2, (DI)(AX*4)
	ADDQ      $8, AX
	CMPQ      AX, R10
	JLT       r8

	ADDQ R8, DI
	DECQ R9
	JNZ  rhead
	VZEROUPPER
	RET
