//go:build amd64 && !purego

#include "textflag.h"

// SwiGLU in AVX-512: the operations of swiGLU16/silu16/expF32x16 (the
// archsimd oracle), lane for lane, constants from exp_amd64.go. Registers:
//	Z16 expLog2e  Z17 expRound  Z18 −expLn2Hi  Z19 −expLn2Lo
//	Z20–Z25 expP0–expP5  Z26 1  Z27 bits(expRound)−127  Z28 expUnder
//	Z29 expOver  Z30 +Inf  Z31 −Inf  Z15 −0  Z14 0

#define BCAST(v, Z) MOVL v, AX; VPBROADCASTD AX, Z

// func swiGLU16Asm(dst, gate, up *float32, nv int)
TEXT ·swiGLU16Asm(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ nv+24(FP), CX
	BCAST($0x3fb8aa3b, Z16) // 1.44269504088896341
	BCAST($0x4b400000, Z17) // 12582912
	BCAST($0xbf318000, Z18) // -0.693359375
	BCAST($0x395e8083, Z19) // 2.12194440e-4
	BCAST($0x39506967, Z20) // 1.9875691500e-4
	BCAST($0x3ab743ce, Z21) // 1.3981999507e-3
	BCAST($0x3c088908, Z22) // 8.3334519073e-3
	BCAST($0x3d2aa9c1, Z23) // 4.1665795894e-2
	BCAST($0x3e2aaaaa, Z24) // 1.6666665459e-1
	BCAST($0x3f000000, Z25) // 5.0000001201e-1
	BCAST($0x3f800000, Z26) // 1
	BCAST($0x4b3fff81, Z27) // bits(expRound) - 127
	BCAST($0xc2aea8f6, Z28) // -87.33
	BCAST($0x42b0bd71, Z29) // 88.37
	BCAST($0x7f800000, Z30) // +Inf
	BCAST($0xff800000, Z31) // -Inf
	BCAST($0x80000000, Z15) // -0
	VPXORD Z14, Z14, Z14
	TESTQ CX, CX
	JZ done

loop:
	VMOVUPS (SI), Z0          // g
	VSUBPS Z0, Z14, Z1        // x = 0 - g
	VMOVAPS Z17, Z2
	VFMADD231PS Z16, Z1, Z2   // t = x·log2e + round
	VSUBPS Z17, Z2, Z3        // n = t - round
	VMOVAPS Z1, Z4
	VFMADD231PS Z18, Z3, Z4   // r = n·(−ln2hi) + x
	VFMADD231PS Z19, Z3, Z4   // r = n·(−ln2lo) + r
	VMOVAPS Z20, Z5           // p = P0
	VFMADD213PS Z21, Z4, Z5   // p = p·r + P1
	VFMADD213PS Z22, Z4, Z5
	VFMADD213PS Z23, Z4, Z5
	VFMADD213PS Z24, Z4, Z5
	VFMADD213PS Z25, Z4, Z5
	VMULPS Z4, Z4, Z6         // r·r
	VFMADD213PS Z4, Z6, Z5    // p·(r·r) + r
	VADDPS Z26, Z5, Z5        // y = … + 1
	VPSUBD Z27, Z2, Z7
	VPSLLD $23, Z7, Z7        // 2^n
	VMULPS Z7, Z5, Z5
	VCMPPS $1, Z28, Z1, K1    // x < expUnder: 0
	VMOVAPS Z14, K1, Z5
	VCMPPS $0x1e, Z29, Z1, K2 // x > expOver: +Inf
	VMOVAPS Z30, K2, Z5
	VADDPS Z26, Z5, Z5        // 1 + e
	VDIVPS Z5, Z26, Z5        // 1 / (1 + e)
	VMULPS Z5, Z0, Z5         // s = g · …
	VCMPPS $0, Z31, Z0, K3    // g = −Inf: −0
	VMOVAPS Z15, K3, Z5
	VMULPS (DX), Z5, Z5       // · up
	VMOVUPS Z5, (DI)
	ADDQ $64, SI
	ADDQ $64, DX
	ADDQ $64, DI
	DECQ CX
	JNZ loop

done:
	VZEROUPPER
	RET
