//go:build amd64 && !purego

#include "textflag.h"

// The attention softmax's vector loops (softmax_amd64.go): lane-wise max,
// e^(x-mx) with the lane sums, and the division, in AVX-512 (16 lanes) and
// AVX2 + FMA (8 lanes). The exp is expF32x16/expF32x8 of the archsimd build
// instruction for instruction (exp.go has its constants and error bound), so
// the two builds give the same bits.

// expc holds each constant of the exp eight times (a 256-bit operand; the
// AVX-512 loops broadcast its first lane): log2(e), -ln2 high and low,
// 1.5·2^23, P0…P5, 1, the under- and overflow bounds, +Inf, and the bias
// bits(1.5·2^23)-127 that turns t's low bits into an exponent field.
DATA expc<>+0(SB)/4, $0x3fb8aa3b
DATA expc<>+4(SB)/4, $0x3fb8aa3b
DATA expc<>+8(SB)/4, $0x3fb8aa3b
DATA expc<>+12(SB)/4, $0x3fb8aa3b
DATA expc<>+16(SB)/4, $0x3fb8aa3b
DATA expc<>+20(SB)/4, $0x3fb8aa3b
DATA expc<>+24(SB)/4, $0x3fb8aa3b
DATA expc<>+28(SB)/4, $0x3fb8aa3b
DATA expc<>+32(SB)/4, $0xbf318000
DATA expc<>+36(SB)/4, $0xbf318000
DATA expc<>+40(SB)/4, $0xbf318000
DATA expc<>+44(SB)/4, $0xbf318000
DATA expc<>+48(SB)/4, $0xbf318000
DATA expc<>+52(SB)/4, $0xbf318000
DATA expc<>+56(SB)/4, $0xbf318000
DATA expc<>+60(SB)/4, $0xbf318000
DATA expc<>+64(SB)/4, $0x395e8083
DATA expc<>+68(SB)/4, $0x395e8083
DATA expc<>+72(SB)/4, $0x395e8083
DATA expc<>+76(SB)/4, $0x395e8083
DATA expc<>+80(SB)/4, $0x395e8083
DATA expc<>+84(SB)/4, $0x395e8083
DATA expc<>+88(SB)/4, $0x395e8083
DATA expc<>+92(SB)/4, $0x395e8083
DATA expc<>+96(SB)/4, $0x4b400000
DATA expc<>+100(SB)/4, $0x4b400000
DATA expc<>+104(SB)/4, $0x4b400000
DATA expc<>+108(SB)/4, $0x4b400000
DATA expc<>+112(SB)/4, $0x4b400000
DATA expc<>+116(SB)/4, $0x4b400000
DATA expc<>+120(SB)/4, $0x4b400000
DATA expc<>+124(SB)/4, $0x4b400000
DATA expc<>+128(SB)/4, $0x39506967
DATA expc<>+132(SB)/4, $0x39506967
DATA expc<>+136(SB)/4, $0x39506967
DATA expc<>+140(SB)/4, $0x39506967
DATA expc<>+144(SB)/4, $0x39506967
DATA expc<>+148(SB)/4, $0x39506967
DATA expc<>+152(SB)/4, $0x39506967
DATA expc<>+156(SB)/4, $0x39506967
DATA expc<>+160(SB)/4, $0x3ab743ce
DATA expc<>+164(SB)/4, $0x3ab743ce
DATA expc<>+168(SB)/4, $0x3ab743ce
DATA expc<>+172(SB)/4, $0x3ab743ce
DATA expc<>+176(SB)/4, $0x3ab743ce
DATA expc<>+180(SB)/4, $0x3ab743ce
DATA expc<>+184(SB)/4, $0x3ab743ce
DATA expc<>+188(SB)/4, $0x3ab743ce
DATA expc<>+192(SB)/4, $0x3c088908
DATA expc<>+196(SB)/4, $0x3c088908
DATA expc<>+200(SB)/4, $0x3c088908
DATA expc<>+204(SB)/4, $0x3c088908
DATA expc<>+208(SB)/4, $0x3c088908
DATA expc<>+212(SB)/4, $0x3c088908
DATA expc<>+216(SB)/4, $0x3c088908
DATA expc<>+220(SB)/4, $0x3c088908
DATA expc<>+224(SB)/4, $0x3d2aa9c1
DATA expc<>+228(SB)/4, $0x3d2aa9c1
DATA expc<>+232(SB)/4, $0x3d2aa9c1
DATA expc<>+236(SB)/4, $0x3d2aa9c1
DATA expc<>+240(SB)/4, $0x3d2aa9c1
DATA expc<>+244(SB)/4, $0x3d2aa9c1
DATA expc<>+248(SB)/4, $0x3d2aa9c1
DATA expc<>+252(SB)/4, $0x3d2aa9c1
DATA expc<>+256(SB)/4, $0x3e2aaaaa
DATA expc<>+260(SB)/4, $0x3e2aaaaa
DATA expc<>+264(SB)/4, $0x3e2aaaaa
DATA expc<>+268(SB)/4, $0x3e2aaaaa
DATA expc<>+272(SB)/4, $0x3e2aaaaa
DATA expc<>+276(SB)/4, $0x3e2aaaaa
DATA expc<>+280(SB)/4, $0x3e2aaaaa
DATA expc<>+284(SB)/4, $0x3e2aaaaa
DATA expc<>+288(SB)/4, $0x3f000000
DATA expc<>+292(SB)/4, $0x3f000000
DATA expc<>+296(SB)/4, $0x3f000000
DATA expc<>+300(SB)/4, $0x3f000000
DATA expc<>+304(SB)/4, $0x3f000000
DATA expc<>+308(SB)/4, $0x3f000000
DATA expc<>+312(SB)/4, $0x3f000000
DATA expc<>+316(SB)/4, $0x3f000000
DATA expc<>+320(SB)/4, $0x3f800000
DATA expc<>+324(SB)/4, $0x3f800000
DATA expc<>+328(SB)/4, $0x3f800000
DATA expc<>+332(SB)/4, $0x3f800000
DATA expc<>+336(SB)/4, $0x3f800000
DATA expc<>+340(SB)/4, $0x3f800000
DATA expc<>+344(SB)/4, $0x3f800000
DATA expc<>+348(SB)/4, $0x3f800000
DATA expc<>+352(SB)/4, $0xc2aea8f6
DATA expc<>+356(SB)/4, $0xc2aea8f6
DATA expc<>+360(SB)/4, $0xc2aea8f6
DATA expc<>+364(SB)/4, $0xc2aea8f6
DATA expc<>+368(SB)/4, $0xc2aea8f6
DATA expc<>+372(SB)/4, $0xc2aea8f6
DATA expc<>+376(SB)/4, $0xc2aea8f6
DATA expc<>+380(SB)/4, $0xc2aea8f6
DATA expc<>+384(SB)/4, $0x42b0bd71
DATA expc<>+388(SB)/4, $0x42b0bd71
DATA expc<>+392(SB)/4, $0x42b0bd71
DATA expc<>+396(SB)/4, $0x42b0bd71
DATA expc<>+400(SB)/4, $0x42b0bd71
DATA expc<>+404(SB)/4, $0x42b0bd71
DATA expc<>+408(SB)/4, $0x42b0bd71
DATA expc<>+412(SB)/4, $0x42b0bd71
DATA expc<>+416(SB)/4, $0x7f800000
DATA expc<>+420(SB)/4, $0x7f800000
DATA expc<>+424(SB)/4, $0x7f800000
DATA expc<>+428(SB)/4, $0x7f800000
DATA expc<>+432(SB)/4, $0x7f800000
DATA expc<>+436(SB)/4, $0x7f800000
DATA expc<>+440(SB)/4, $0x7f800000
DATA expc<>+444(SB)/4, $0x7f800000
DATA expc<>+448(SB)/4, $0x4b3fff81
DATA expc<>+452(SB)/4, $0x4b3fff81
DATA expc<>+456(SB)/4, $0x4b3fff81
DATA expc<>+460(SB)/4, $0x4b3fff81
DATA expc<>+464(SB)/4, $0x4b3fff81
DATA expc<>+468(SB)/4, $0x4b3fff81
DATA expc<>+472(SB)/4, $0x4b3fff81
DATA expc<>+476(SB)/4, $0x4b3fff81
GLOBL expc<>(SB), RODATA|NOPTR, $480

// func softmaxMaxAVX512(x *float32, n int, m *[16]float32)
// m = the lane-wise VMAXPS of x's n/16 blocks (n a positive multiple of 16).
TEXT ·softmaxMaxAVX512(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    m+16(FP), DI
	VMOVUPS (SI), Z0
	MOVQ    $16, AX

max16:
	CMPQ    AX, CX
	JGE     max16done
	VMAXPS  (SI)(AX*4), Z0, Z0
	ADDQ    $16, AX
	JMP     max16

max16done:
	VMOVUPS Z0, (DI)
	VZEROUPPER
	RET

// func softmaxExpAVX512(x *float32, n int, mx float32, sum *[16]float32)
// x[i] = e^(x[i]-mx) for i < n (a multiple of 16), and sum's lanes += each
// block's, block after block.
TEXT ·softmaxExpAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Z2
	MOVQ         sum+24(FP), DI
	VMOVUPS      (DI), Z18
	VBROADCASTSS expc<>+0(SB), Z3
	VBROADCASTSS expc<>+96(SB), Z4
	VBROADCASTSS expc<>+32(SB), Z5
	VBROADCASTSS expc<>+64(SB), Z6
	VBROADCASTSS expc<>+128(SB), Z7
	VBROADCASTSS expc<>+160(SB), Z8
	VBROADCASTSS expc<>+192(SB), Z9
	VBROADCASTSS expc<>+224(SB), Z10
	VBROADCASTSS expc<>+256(SB), Z11
	VBROADCASTSS expc<>+288(SB), Z12
	VBROADCASTSS expc<>+320(SB), Z13
	VBROADCASTSS expc<>+352(SB), Z14
	VBROADCASTSS expc<>+384(SB), Z15
	VBROADCASTSS expc<>+416(SB), Z16
	VPBROADCASTD expc<>+448(SB), Z17
	XORQ         AX, AX

exp16:
	CMPQ        AX, CX
	JGE         exp16done
	VMOVUPS     (SI)(AX*4), Z19
	VSUBPS      Z2, Z19, Z19      // x - mx
	VMOVAPS     Z4, Z21
	VFMADD231PS Z3, Z19, Z21      // t = x·log2e + 1.5·2^23
	VSUBPS      Z4, Z21, Z22      // n = round(x·log2e)
	VMOVAPS     Z19, Z23
	VFMADD231PS Z5, Z22, Z23      // r = x - n·ln2hi
	VFMADD231PS Z6, Z22, Z23      // r -= n·ln2lo
	VMOVAPS     Z7, Z24
	VFMADD213PS Z8, Z23, Z24      // p = P0·r + P1
	VFMADD213PS Z9, Z23, Z24
	VFMADD213PS Z10, Z23, Z24
	VFMADD213PS Z11, Z23, Z24
	VFMADD213PS Z12, Z23, Z24     // … + P5
	VMULPS      Z23, Z23, Z25     // r²
	VFMADD213PS Z23, Z25, Z24     // y = p·r² + r
	VADDPS      Z13, Z24, Z24     // y + 1
	VPSUBD      Z17, Z21, Z26
	VPSLLD      $23, Z26, Z26     // 2^n
	VMULPS      Z26, Z24, Z24
	VCMPPS      $1, Z14, Z19, K1  // x < under: 0
	VXORPS      Z24, Z24, K1, Z24
	VCMPPS      $0x1e, Z15, Z19, K2 // x > over: +Inf
	VMOVAPS     Z16, K2, Z24
	VMOVUPS     Z24, (SI)(AX*4)
	VADDPS      Z24, Z18, Z18
	ADDQ        $16, AX
	JMP         exp16

exp16done:
	VMOVUPS Z18, (DI)
	VZEROUPPER
	RET

// func softmaxDivAVX512(x *float32, n int, s float32)
// x[i] /= s for i < n (a multiple of 16).
TEXT ·softmaxDivAVX512(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Z1
	XORQ         AX, AX

div16:
	CMPQ    AX, CX
	JGE     div16done
	VMOVUPS (SI)(AX*4), Z0
	VDIVPS  Z1, Z0, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     div16

div16done:
	VZEROUPPER
	RET

// func softmaxMaxAVX2(x *float32, n int, m *[16]float32)
// m[0:8] = the lane-wise VMAXPS of x's n/8 blocks (n a positive multiple of 8).
TEXT ·softmaxMaxAVX2(SB), NOSPLIT, $0-24
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    m+16(FP), DI
	VMOVUPS (SI), Y0
	MOVQ    $8, AX

max8:
	CMPQ    AX, CX
	JGE     max8done
	VMAXPS  (SI)(AX*4), Y0, Y0
	ADDQ    $8, AX
	JMP     max8

max8done:
	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET

// func softmaxExpAVX2(x *float32, n int, mx float32, sum *[16]float32)
// softmaxExpAVX512 on 8 lanes (sum[0:8]); the constants the 16 registers
// cannot hold are memory operands.
TEXT ·softmaxExpAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y0
	MOVQ         sum+24(FP), DI
	VMOVUPS      (DI), Y5
	VMOVUPS      expc<>+0(SB), Y1
	VMOVUPS      expc<>+96(SB), Y2
	VMOVUPS      expc<>+32(SB), Y3
	VMOVUPS      expc<>+64(SB), Y4
	VMOVUPS      expc<>+160(SB), Y13
	VMOVUPS      expc<>+192(SB), Y14
	VMOVUPS      expc<>+224(SB), Y15
	XORQ         AX, AX

exp8:
	CMPQ        AX, CX
	JGE         exp8done
	VMOVUPS     (SI)(AX*4), Y6
	VSUBPS      Y0, Y6, Y6        // x - mx
	VMOVAPS     Y2, Y7
	VFMADD231PS Y1, Y6, Y7        // t
	VSUBPS      Y2, Y7, Y8        // n
	VMOVAPS     Y6, Y9
	VFMADD231PS Y3, Y8, Y9
	VFMADD231PS Y4, Y8, Y9        // r
	VMOVUPS     expc<>+128(SB), Y10
	VFMADD213PS Y13, Y9, Y10
	VFMADD213PS Y14, Y9, Y10
	VFMADD213PS Y15, Y9, Y10
	VFMADD213PS expc<>+256(SB), Y9, Y10
	VFMADD213PS expc<>+288(SB), Y9, Y10
	VMULPS      Y9, Y9, Y11       // r²
	VFMADD213PS Y9, Y11, Y10      // y = p·r² + r
	VADDPS      expc<>+320(SB), Y10, Y10
	VPSUBD      expc<>+448(SB), Y7, Y11
	VPSLLD      $23, Y11, Y11     // 2^n
	VMULPS      Y11, Y10, Y10
	VCMPPS      $1, expc<>+352(SB), Y6, Y12   // x < under: 0
	VANDNPS     Y10, Y12, Y10
	VCMPPS      $0x1e, expc<>+384(SB), Y6, Y12 // x > over: +Inf
	VBLENDVPS   Y12, expc<>+416(SB), Y10, Y10
	VMOVUPS     Y10, (SI)(AX*4)
	VADDPS      Y10, Y5, Y5
	ADDQ        $8, AX
	JMP         exp8

exp8done:
	VMOVUPS Y5, (DI)
	VZEROUPPER
	RET

// func softmaxDivAVX2(x *float32, n int, s float32)
// x[i] /= s for i < n (a multiple of 8).
TEXT ·softmaxDivAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS s+16(FP), Y1
	XORQ         AX, AX

div8:
	CMPQ    AX, CX
	JGE     div8done
	VMOVUPS (SI)(AX*4), Y0
	VDIVPS  Y1, Y0, Y0
	VMOVUPS Y0, (SI)(AX*4)
	ADDQ    $8, AX
	JMP     div8

div8done:
	VZEROUPPER
	RET

// EXP16 is softmaxExpAVX512's body for one block: Z24 = e^(Z19 - Z2), with
// its constants in Z3…Z17 as that function loads them; K1, K2 and Z21…Z26
// are scratch.
#define EXP16 \
	VSUBPS      Z2, Z19, Z19; \
	VMOVAPS     Z4, Z21; \
	VFMADD231PS Z3, Z19, Z21; \
	VSUBPS      Z4, Z21, Z22; \
	VMOVAPS     Z19, Z23; \
	VFMADD231PS Z5, Z22, Z23; \
	VFMADD231PS Z6, Z22, Z23; \
	VMOVAPS     Z7, Z24; \
	VFMADD213PS Z8, Z23, Z24; \
	VFMADD213PS Z9, Z23, Z24; \
	VFMADD213PS Z10, Z23, Z24; \
	VFMADD213PS Z11, Z23, Z24; \
	VFMADD213PS Z12, Z23, Z24; \
	VMULPS      Z23, Z23, Z25; \
	VFMADD213PS Z23, Z25, Z24; \
	VADDPS      Z13, Z24, Z24; \
	VPSUBD      Z17, Z21, Z26; \
	VPSLLD      $23, Z26, Z26; \
	VMULPS      Z26, Z24, Z24; \
	VCMPPS      $1, Z14, Z19, K1; \
	VXORPS      Z24, Z24, K1, Z24; \
	VCMPPS      $0x1e, Z15, Z19, K2; \
	VMOVAPS     Z16, K2, Z24

// func softmaxRowAVX512(x *float32, n int)
//
// softmaxLanes(x[:n], 16) in one call (n ≥ 1): the same max (the blocks'
// lane-wise VMAXPS, then max32 over the lanes in order from x[0], then
// over the tail: VMAXSS v, mx is v > mx ? v : mx), the same exp and lane
// sums, the tail through a block of -Inf (here a masked load into one),
// the same reduction of the sums and the same divisions; the tail's
// results are stored through the mask.
TEXT ·softmaxRowAVX512(SB), NOSPLIT, $64-16
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    CX, R8
	ANDQ    $-16, R8           // full
	VMOVSS  (SI), X0           // mx = x[0]
	TESTQ   R8, R8
	JZ      tailmax
	VMOVUPS (SI), Z1
	MOVQ    $16, AX

rmax16:
	CMPQ    AX, R8
	JGE     rmaxlanes
	VMAXPS  (SI)(AX*4), Z1, Z1
	ADDQ    $16, AX
	JMP     rmax16

rmaxlanes:
	VMOVUPS Z1, 0(SP)
	XORQ    AX, AX

rlane:
	VMOVSS  (SP)(AX*4), X2
	VMAXSS  X0, X2, X0
	INCQ    AX
	CMPQ    AX, $16
	JLT     rlane

tailmax:
	MOVQ    R8, AX

rtail:
	CMPQ    AX, CX
	JGE     rexp
	VMOVSS  (SI)(AX*4), X2
	VMAXSS  X0, X2, X0
	INCQ    AX
	JMP     rtail

rexp:
	VBROADCASTSS X0, Z2
	VXORPS       Z18, Z18, Z18
	VBROADCASTSS expc<>+0(SB), Z3
	VBROADCASTSS expc<>+96(SB), Z4
	VBROADCASTSS expc<>+32(SB), Z5
	VBROADCASTSS expc<>+64(SB), Z6
	VBROADCASTSS expc<>+128(SB), Z7
	VBROADCASTSS expc<>+160(SB), Z8
	VBROADCASTSS expc<>+192(SB), Z9
	VBROADCASTSS expc<>+224(SB), Z10
	VBROADCASTSS expc<>+256(SB), Z11
	VBROADCASTSS expc<>+288(SB), Z12
	VBROADCASTSS expc<>+320(SB), Z13
	VBROADCASTSS expc<>+352(SB), Z14
	VBROADCASTSS expc<>+384(SB), Z15
	VBROADCASTSS expc<>+416(SB), Z16
	VPBROADCASTD expc<>+448(SB), Z17
	XORQ         AX, AX

rexp16:
	CMPQ    AX, R8
	JGE     rexptail
	VMOVUPS (SI)(AX*4), Z19
	EXP16
	VMOVUPS Z24, (SI)(AX*4)
	VADDPS  Z24, Z18, Z18
	ADDQ    $16, AX
	JMP     rexp16

rexptail:
	MOVQ     CX, R9
	SUBQ     R8, R9            // tail length
	JZ       rsum
	MOVQ     R9, CX
	MOVL     $1, DX
	SHLL     CX, DX
	DECL     DX
	KMOVW    DX, K3            // the tail's lanes
	VXORPS   Z20, Z20, Z20
	VSUBPS   Z16, Z20, Z19     // -Inf
	VMOVUPS  (SI)(R8*4), K3, Z19
	EXP16
	VMOVAPS  Z24, Z27          // the tail's weights until the division
	VADDPS   Z24, Z18, Z18

rsum:
	// sum[k] += sum[k+8]; sum[k] += sum[k+4]; (s0+s2)+(s1+s3).
	VEXTRACTF32X8 $1, Z18, Y1
	VADDPS        Y1, Y18, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VADDPS        X1, X0, X2
	VMOVSHDUP     X2, X3
	VADDSS        X3, X2, X2
	VBROADCASTSS  X2, Z1
	XORQ          AX, AX

rdiv16:
	CMPQ    AX, R8
	JGE     rdivtail
	VMOVUPS (SI)(AX*4), Z0
	VDIVPS  Z1, Z0, Z0
	VMOVUPS Z0, (SI)(AX*4)
	ADDQ    $16, AX
	JMP     rdiv16

rdivtail:
	TESTQ   R9, R9
	JZ      rdone
	VDIVPS  Z1, Z27, Z27
	VMOVUPS Z27, K3, (SI)(R8*4)

rdone:
	VZEROUPPER
	RET
