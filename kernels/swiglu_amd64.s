//go:build amd64 && !purego

#include "textflag.h"

// SwiGLU with AVX2 + FMA: see swiglu_amd64.go. The exp is softmax_amd64.s's
// (exp.go's constants), on e^-g.

DATA siluc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA siluc<>+4(SB)/4, $0xbf318000  // -ln2 high part
DATA siluc<>+8(SB)/4, $0x395e8083  // -ln2 low part
DATA siluc<>+12(SB)/4, $0x4b400000 // 1.5·2^23
DATA siluc<>+16(SB)/4, $0x39506967 // P0
DATA siluc<>+20(SB)/4, $0x3ab743ce // P1
DATA siluc<>+24(SB)/4, $0x3c088908 // P2
DATA siluc<>+28(SB)/4, $0x3d2aa9c1 // P3
DATA siluc<>+32(SB)/4, $0x3e2aaaaa // P4
DATA siluc<>+36(SB)/4, $0x3f000000 // P5
DATA siluc<>+40(SB)/4, $0x3f800000 // 1
DATA siluc<>+44(SB)/4, $0xc2aea8f6 // expUnder
DATA siluc<>+48(SB)/4, $0x42b0bd71 // expOver
DATA siluc<>+52(SB)/4, $0x7f800000 // +Inf
DATA siluc<>+56(SB)/4, $0x4b3fff81 // 1.5·2^23 − 127 (as integer bits)
DATA siluc<>+60(SB)/4, $0xff800000 // −Inf
DATA siluc<>+64(SB)/4, $0x80000000 // −0
GLOBL siluc<>(SB), RODATA|NOPTR, $68

// func swiGLUAVX2(dst, gate, up *float32, n int)
// dst[i] = silu(gate[i])·up[i] for i < n (a positive multiple of 8):
// e = exp(0 − g), s = g·(1/(1+e)), −0 where g = −Inf, then s·up.
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         up+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS siluc<>+0(SB), Y1
	VBROADCASTSS siluc<>+12(SB), Y2
	VBROADCASTSS siluc<>+4(SB), Y3
	VBROADCASTSS siluc<>+8(SB), Y4
	VBROADCASTSS siluc<>+20(SB), Y13
	VBROADCASTSS siluc<>+24(SB), Y14
	VBROADCASTSS siluc<>+28(SB), Y15
	VBROADCASTSS siluc<>+40(SB), Y5 // 1
	VXORPS       Y0, Y0, Y0         // 0
	XORQ         AX, AX

silu8:
	VMOVUPS      (SI)(AX*4), Y12     // g
	VSUBPS       Y12, Y0, Y6         // x = 0 − g
	VMOVAPS      Y2, Y7
	VFMADD231PS  Y1, Y6, Y7          // t = x·log2e + 1.5·2^23
	VSUBPS       Y2, Y7, Y8          // n
	VMOVAPS      Y6, Y9
	VFMADD231PS  Y3, Y8, Y9
	VFMADD231PS  Y4, Y8, Y9          // r
	VBROADCASTSS siluc<>+16(SB), Y10
	VFMADD213PS  Y13, Y9, Y10
	VFMADD213PS  Y14, Y9, Y10
	VFMADD213PS  Y15, Y9, Y10
	VBROADCASTSS siluc<>+32(SB), Y11
	VFMADD213PS  Y11, Y9, Y10
	VBROADCASTSS siluc<>+36(SB), Y11
	VFMADD213PS  Y11, Y9, Y10
	VMULPS       Y9, Y9, Y11         // r²
	VFMADD213PS  Y9, Y11, Y10        // y = p·r² + r
	VADDPS       Y5, Y10, Y10        // y + 1
	VPBROADCASTD siluc<>+56(SB), Y11
	VPSUBD       Y11, Y7, Y11
	VPSLLD       $23, Y11, Y11       // 2^n
	VMULPS       Y11, Y10, Y10       // e^x
	VBROADCASTSS siluc<>+44(SB), Y11
	VCMPPS       $1, Y11, Y6, Y11    // x < under: 0
	VANDNPS      Y10, Y11, Y10
	VBROADCASTSS siluc<>+48(SB), Y11
	VCMPPS       $0x1e, Y11, Y6, Y11 // x > over: +Inf
	VBROADCASTSS siluc<>+52(SB), Y9
	VBLENDVPS    Y11, Y9, Y10, Y10
	VADDPS       Y5, Y10, Y10        // 1 + e
	VDIVPS       Y10, Y5, Y10        // 1 / (1 + e)
	VMULPS       Y10, Y12, Y10       // s = g · that
	VBROADCASTSS siluc<>+60(SB), Y11
	VCMPPS       $0, Y11, Y12, Y11   // g == −Inf
	VBROADCASTSS siluc<>+64(SB), Y9
	VBLENDVPS    Y11, Y9, Y10, Y10   // −0 there
	VMULPS       (DX)(AX*4), Y10, Y10
	VMOVUPS      Y10, (DI)(AX*4)
	ADDQ         $8, AX
	CMPQ         AX, CX
	JLT          silu8
	VZEROUPPER
	RET
