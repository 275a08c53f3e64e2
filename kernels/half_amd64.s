//go:build amd64 && !purego

#include "textflag.h"

DATA f16qnan<>+0(SB)/4, $0x7fc00000
GLOBL f16qnan<>(SB), RODATA|NOPTR, $4
DATA f16sign<>+0(SB)/4, $0x80000000
GLOBL f16sign<>(SB), RODATA|NOPTR, $4
DATA f16max<>+0(SB)/4, $0x477fe000 // 65504, binary16's largest finite value
GLOBL f16max<>(SB), RODATA|NOPTR, $4

// func f32ToF16F16C(dst *uint16, src *float32, n int)
TEXT ·f32ToF16F16C(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS f16qnan<>(SB), Y4
	VBROADCASTSS f16sign<>(SB), Y5
	XORQ         AX, AX

cvt:
	CMPQ      AX, CX
	JGE       done
	VMOVUPS   (SI)(AX*4), Y0
	VCMPPS    $3, Y0, Y0, Y1   // unordered: NaN lanes
	VANDPS    Y5, Y0, Y2       // the sign
	VORPS     Y4, Y2, Y2       // the quiet NaN of that sign
	VBLENDVPS Y1, Y2, Y0, Y0
	VCVTPS2PH $0, Y0, (DI)(AX*2)
	ADDQ      $8, AX
	JMP       cvt

done:
	VZEROUPPER
	RET

// func roundScalesF16C(d *float32, n int)
TEXT ·roundScalesF16C(SB), NOSPLIT, $0-16
	MOVQ         d+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS f16max<>(SB), Y3
	XORQ         AX, AX

round:
	CMPQ      AX, CX
	JGE       rdone
	VMOVUPS   (SI)(AX*4), Y0
	VCMPPS    $0x12, Y3, Y0, Y1 // d <= 65504, ordered (false for NaN)
	VCVTPS2PH $0, Y0, X2
	VCVTPH2PS X2, Y2
	VBLENDVPS Y1, Y2, Y0, Y0
	VMOVUPS   Y0, (SI)(AX*4)
	ADDQ      $8, AX
	JMP       round

rdone:
	VZEROUPPER
	RET
