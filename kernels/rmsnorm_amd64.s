//go:build amd64 && !purego

#include "textflag.h"

// rmsnormIdx: lane r's row offset, r·d floats, is made from these r.
DATA rmsnormLanes<>+0(SB)/8, $0x0000000100000000
DATA rmsnormLanes<>+8(SB)/8, $0x0000000300000002
DATA rmsnormLanes<>+16(SB)/8, $0x0000000500000004
DATA rmsnormLanes<>+24(SB)/8, $0x0000000700000006
DATA rmsnormLanes<>+32(SB)/8, $0x0000000900000008
DATA rmsnormLanes<>+40(SB)/8, $0x0000000b0000000a
DATA rmsnormLanes<>+48(SB)/8, $0x0000000d0000000c
DATA rmsnormLanes<>+56(SB)/8, $0x0000000f0000000e
GLOBL rmsnormLanes<>(SB), RODATA|NOPTR, $64

// func rmsNormSS16(ss *[16]float32, x *float32, d int)
//
// Z1 the lanes' element offsets r·d, Z0 the 16 chains; per column one
// gather (x + 4j bytes, SI), VMULPS, VADDPS: ss_r = ss_r + float32(v·v).
// The gather's mask (K1) is consumed, so it is set again each column.
TEXT ·rmsNormSS16(SB), NOSPLIT, $0-24
	MOVQ         ss+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         d+16(FP), CX
	VPBROADCASTD CX, Z2
	VMOVDQU32    rmsnormLanes<>(SB), Z1
	VPMULLD      Z2, Z1, Z1
	VPXORD       Z0, Z0, Z0

col:
	KXNORW     K0, K0, K1
	VGATHERDPS (SI)(Z1*4), K1, Z3
	VMULPS     Z3, Z3, Z3
	VADDPS     Z3, Z0, Z0
	ADDQ       $4, SI
	DECQ       CX
	JNZ        col
	VMOVUPS    Z0, (DI)
	VZEROUPPER
	RET

// func rmsNormScale(dst, x, w *float32, n int, s float32)
//
// dst[j] = w[j]·(s·x[j]): 16 lanes at a time, the last n mod 16 under a
// mask.
TEXT ·rmsNormScale(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Z0
	CMPQ         CX, $16
	JLT          tail

loop:
	VMULPS (SI), Z0, Z1
	VMULPS (DX), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ   $64, SI
	ADDQ   $64, DX
	ADDQ   $64, DI
	SUBQ   $16, CX
	CMPQ   CX, $16
	JGE    loop

tail:
	TESTQ   CX, CX
	JZ      done
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VMOVUPS (SI), K1, Z2
	VMOVUPS (DX), K1, Z3
	VMULPS  Z2, Z0, Z1
	VMULPS  Z3, Z1, Z1
	VMOVUPS Z1, K1, (DI)

done:
	VZEROUPPER
	RET
