// Shared by the 4×C tile and 8-row decode kernels of mathalf_amd64.s (F16)
// and matf32bf16_amd64.s (F32, BF16): the register plan, the k-masks, the
// FMA steps and the four-way lane sum, which must stay one code so the three
// weight types keep hsum16's order. Register use: see those files.

// Lanes 0, 4, 8, 12: where RED4 leaves its four sums.
DATA sumIdx<>+0(SB)/4, $0
DATA sumIdx<>+4(SB)/4, $4
DATA sumIdx<>+8(SB)/4, $8
DATA sumIdx<>+12(SB)/4, $12
DATA sumIdx<>+16(SB)/4, $0
DATA sumIdx<>+20(SB)/4, $0
DATA sumIdx<>+24(SB)/4, $0
DATA sumIdx<>+28(SB)/4, $0
DATA sumIdx<>+32(SB)/4, $0
DATA sumIdx<>+36(SB)/4, $0
DATA sumIdx<>+40(SB)/4, $0
DATA sumIdx<>+44(SB)/4, $0
DATA sumIdx<>+48(SB)/4, $0
DATA sumIdx<>+52(SB)/4, $0
DATA sumIdx<>+56(SB)/4, $0
DATA sumIdx<>+60(SB)/4, $0
GLOBL sumIdx<>(SB), RODATA|NOPTR, $64

// ZERO4 zeroes four accumulators.
#define ZERO4(a0, a1, a2, a3) VPXORD a0, a0, a0; VPXORD a1, a1, a1; VPXORD a2, a2, a2; VPXORD a3, a3, a3

// FMA4 adds the four rows times Z28 into a0..a3.
#define FMA4(a0, a1, a2, a3) \
	VFMADD231PS Z28, Z24, a0; \
	VFMADD231PS Z28, Z25, a1; \
	VFMADD231PS Z28, Z26, a2; \
	VFMADD231PS Z28, Z27, a3

// STEP is one input's x[j:j+16] (at xp) against the four rows.
#define STEP(xp, a0, a1, a2, a3) VMOVUPS (xp)(R12*4), Z28; FMA4(a0, a1, a2, a3)

// STEPT is STEP for the short last chunk.
#define STEPT(xp, a0, a1, a2, a3) VMOVUPS.Z (xp)(R12*4), K1, Z28; FMA4(a0, a1, a2, a3)

// RED4 sums a0..a3 each by hsum16's tree (all four at once, lane for lane
// the same additions) and stores the first K2 of the four sums at dp.
// Needs the index vector in Z24.
#define RED4(a0, a1, a2, a3, dp) \
	VSHUFF32X4 $0x44, a1, a0, Z29; \
	VSHUFF32X4 $0xEE, a1, a0, Z30; \
	VADDPS Z30, Z29, Z29; \
	VSHUFF32X4 $0x44, a3, a2, Z30; \
	VSHUFF32X4 $0xEE, a3, a2, Z31; \
	VADDPS Z31, Z30, Z30; \
	VSHUFF32X4 $0x88, Z30, Z29, Z31; \
	VSHUFF32X4 $0xDD, Z30, Z29, Z29; \
	VADDPS Z29, Z31, Z29; \
	VPERMILPS $0x4E, Z29, Z30; \
	VADDPS Z30, Z29, Z29; \
	VPERMILPS $0xB1, Z29, Z30; \
	VADDPS Z30, Z29, Z29; \
	VPERMPS Z29, Z24, Z29; \
	VMOVUPS X29, K2, (dp)

// MASKS sets R13 to the end of the full chunks (cols R14 rounded down to
// 16), K1 to the tail's lanes (cols%16 low bits) and K2 to the first R15
// (nr) of 4 sums; it zeroes R12 (j) and clobbers CX.
#define MASKS \
	MOVQ R14, R13; \
	ANDQ $~15, R13; \
	MOVQ R14, CX; \
	SUBQ R13, CX; \
	MOVL $1, R12; \
	SHLL CX, R12; \
	DECL R12; \
	KMOVW R12, K1; \
	MOVQ R15, CX; \
	MOVL $1, R12; \
	SHLL CX, R12; \
	DECL R12; \
	KMOVW R12, K2; \
	XORQ R12, R12

// NEXTX sets to = from + cols floats (the next input's row of x).
#define NEXTX(from, to) LEAQ (from)(R14*4), to

// The C-dependent pieces of a 4×C tile, C = 1..6: XPc points SI, DI, R8–R11
// at the C inputs, ZRc zeroes their accumulators, STc and STTc are a full
// and a short (masked) step over them, RDc sums and stores them (R8 the
// dst stride by then).
#define XP1 NOP
#define ZR1 ZERO4(Z0, Z1, Z2, Z3)
#define ST1 STEP(SI, Z0, Z1, Z2, Z3)
#define STT1 STEPT(SI, Z0, Z1, Z2, Z3)
#define RD1 RED4(Z0, Z1, Z2, Z3, DI)
#define XP2 NEXTX(SI, DI)
#define ZR2 ZERO4(Z0, Z1, Z2, Z3); ZERO4(Z4, Z5, Z6, Z7)
#define ST2 STEP(SI, Z0, Z1, Z2, Z3); STEP(DI, Z4, Z5, Z6, Z7)
#define STT2 STEPT(SI, Z0, Z1, Z2, Z3); STEPT(DI, Z4, Z5, Z6, Z7)
#define RD2 RED4(Z0, Z1, Z2, Z3, DI); ADDQ R8, DI; RED4(Z4, Z5, Z6, Z7, DI)
#define XP3 NEXTX(SI, DI); NEXTX(DI, R8)
#define ZR3 ZERO4(Z0, Z1, Z2, Z3); ZERO4(Z4, Z5, Z6, Z7); ZERO4(Z8, Z9, Z10, Z11)
#define ST3 STEP(SI, Z0, Z1, Z2, Z3); STEP(DI, Z4, Z5, Z6, Z7); STEP(R8, Z8, Z9, Z10, Z11)
#define STT3 STEPT(SI, Z0, Z1, Z2, Z3); STEPT(DI, Z4, Z5, Z6, Z7); STEPT(R8, Z8, Z9, Z10, Z11)
#define RD3 RED4(Z0, Z1, Z2, Z3, DI); ADDQ R8, DI; RED4(Z4, Z5, Z6, Z7, DI); ADDQ R8, DI; RED4(Z8, Z9, Z10, Z11, DI)
#define XP4 NEXTX(SI, DI); NEXTX(DI, R8); NEXTX(R8, R9)
#define ZR4 ZERO4(Z0, Z1, Z2, Z3); ZERO4(Z4, Z5, Z6, Z7); ZERO4(Z8, Z9, Z10, Z11); ZERO4(Z12, Z13, Z14, Z15)
#define ST4 STEP(SI, Z0, Z1, Z2, Z3); STEP(DI, Z4, Z5, Z6, Z7); STEP(R8, Z8, Z9, Z10, Z11); STEP(R9, Z12, Z13, Z14, Z15)
#define STT4 STEPT(SI, Z0, Z1, Z2, Z3); STEPT(DI, Z4, Z5, Z6, Z7); STEPT(R8, Z8, Z9, Z10, Z11); STEPT(R9, Z12, Z13, Z14, Z15)
#define RD4 RED4(Z0, Z1, Z2, Z3, DI); ADDQ R8, DI; RED4(Z4, Z5, Z6, Z7, DI); ADDQ R8, DI; RED4(Z8, Z9, Z10, Z11, DI); ADDQ R8, DI; RED4(Z12, Z13, Z14, Z15, DI)
#define XP5 NEXTX(SI, DI); NEXTX(DI, R8); NEXTX(R8, R9); NEXTX(R9, R10)
#define ZR5 ZERO4(Z0, Z1, Z2, Z3); ZERO4(Z4, Z5, Z6, Z7); ZERO4(Z8, Z9, Z10, Z11); ZERO4(Z12, Z13, Z14, Z15); ZERO4(Z16, Z17, Z18, Z19)
#define ST5 STEP(SI, Z0, Z1, Z2, Z3); STEP(DI, Z4, Z5, Z6, Z7); STEP(R8, Z8, Z9, Z10, Z11); STEP(R9, Z12, Z13, Z14, Z15); STEP(R10, Z16, Z17, Z18, Z19)
#define STT5 STEPT(SI, Z0, Z1, Z2, Z3); STEPT(DI, Z4, Z5, Z6, Z7); STEPT(R8, Z8, Z9, Z10, Z11); STEPT(R9, Z12, Z13, Z14, Z15); STEPT(R10, Z16, Z17, Z18, Z19)
#define RD5 RED4(Z0, Z1, Z2, Z3, DI); ADDQ R8, DI; RED4(Z4, Z5, Z6, Z7, DI); ADDQ R8, DI; RED4(Z8, Z9, Z10, Z11, DI); ADDQ R8, DI; RED4(Z12, Z13, Z14, Z15, DI); ADDQ R8, DI; RED4(Z16, Z17, Z18, Z19, DI)
#define XP6 NEXTX(SI, DI); NEXTX(DI, R8); NEXTX(R8, R9); NEXTX(R9, R10); NEXTX(R10, R11)
#define ZR6 ZERO4(Z0, Z1, Z2, Z3); ZERO4(Z4, Z5, Z6, Z7); ZERO4(Z8, Z9, Z10, Z11); ZERO4(Z12, Z13, Z14, Z15); ZERO4(Z16, Z17, Z18, Z19); ZERO4(Z20, Z21, Z22, Z23)
#define ST6 STEP(SI, Z0, Z1, Z2, Z3); STEP(DI, Z4, Z5, Z6, Z7); STEP(R8, Z8, Z9, Z10, Z11); STEP(R9, Z12, Z13, Z14, Z15); STEP(R10, Z16, Z17, Z18, Z19); STEP(R11, Z20, Z21, Z22, Z23)
#define STT6 STEPT(SI, Z0, Z1, Z2, Z3); STEPT(DI, Z4, Z5, Z6, Z7); STEPT(R8, Z8, Z9, Z10, Z11); STEPT(R9, Z12, Z13, Z14, Z15); STEPT(R10, Z16, Z17, Z18, Z19); STEPT(R11, Z20, Z21, Z22, Z23)
#define RD6 RED4(Z0, Z1, Z2, Z3, DI); ADDQ R8, DI; RED4(Z4, Z5, Z6, Z7, DI); ADDQ R8, DI; RED4(Z8, Z9, Z10, Z11, DI); ADDQ R8, DI; RED4(Z12, Z13, Z14, Z15, DI); ADDQ R8, DI; RED4(Z16, Z17, Z18, Z19, DI); ADDQ R8, DI; RED4(Z20, Z21, Z22, Z23, DI)

// TILE defines the 4×C tile function name (asmTile's contract) from the
// weight loads LD (a full chunk into Z24–Z27) and LDT (the masked last
// chunk) and the C pieces above.
#define TILE(name, LD, LDT, XP, ZR, ST, STT, RD) \
TEXT name(SB), NOSPLIT, $0-72; \
	MOVQ cols+56(FP), R14; \
	MOVQ nr+64(FP), R15; \
	MASKS; \
	MOVQ w0+16(FP), AX; \
	MOVQ w1+24(FP), BX; \
	MOVQ w2+32(FP), CX; \
	MOVQ w3+40(FP), DX; \
	MOVQ x+48(FP), SI; \
	XP; \
	ZR; \
	CMPQ R12, R13; \
	JGE  tail; \
loop: \
	LD; \
	ST; \
	ADDQ $16, R12; \
	CMPQ R12, R13; \
	JLT  loop; \
tail: \
	CMPQ R12, R14; \
	JGE  done; \
	LDT; \
	STT; \
done: \
	VMOVDQU32 sumIdx<>(SB), Z24; \
	MOVQ dst+0(FP), DI; \
	MOVQ dstStride+8(FP), R8; \
	RD; \
	VZEROUPPER; \
	RET

// FAR8 defines the decode function name(dst *float32, w *E, x *float32,
// cols, stride int): 8 rows stride elements apart (rows r, r+h, …, r+7h;
// eight sequential weight streams far apart) against one input, the 8 sums
// stored at dst[0:8]. shift is log2 of the element size (1: F16 and BF16,
// the only users); STEP and TAIL are the file's full and masked 8-row
// steps (Z8–Z15 weights, Z16 x, Z0–Z7 accumulators). Two steps are one
// cache line of each stream, and the loop over them prefetches every
// stream's line FARPF bytes ahead (past a row's end, the stream's next
// row, which the next call reads), as the AVX2 set's FAR8 does: the
// hardware prefetchers alone did not keep eight streams far enough ahead
// on an AMD EPYC (Zen 5), where this F16 kernel read 24 GB/s from DRAM
// without and 28–29 with (medians of 4 alternating runs on a shared
// host, BenchmarkDecodeStream). A step left over runs alone, then the tail,
// so each chain adds the same products in the same order.
#define FARPF 1024
#define FAR8PF(P) PREFETCHT0 FARPF(P)(R12*2)
#define FAR8(name, shift, STEP, TAIL) \
TEXT name(SB), NOSPLIT, $0-40; \
	MOVQ cols+24(FP), R14; \
	MOVQ w+8(FP), AX; \
	MOVQ x+16(FP), SI; \
	MOVL $4, R15; \
	MASKS; \
	MOVQ stride+32(FP), R15; \
	SHLQ $shift, R15; \
	LEAQ (AX)(R15*1), BX; \
	LEAQ (BX)(R15*1), CX; \
	LEAQ (CX)(R15*1), DX; \
	LEAQ (DX)(R15*1), DI; \
	LEAQ (DI)(R15*1), R8; \
	LEAQ (R8)(R15*1), R9; \
	LEAQ (R9)(R15*1), R10; \
	LEAQ -16(R13), R15; \
	ZERO4(Z0, Z1, Z2, Z3); \
	ZERO4(Z4, Z5, Z6, Z7); \
line: \
	CMPQ R12, R15; \
	JGE  step; \
	FAR8PF(AX); \
	FAR8PF(BX); \
	FAR8PF(CX); \
	FAR8PF(DX); \
	FAR8PF(DI); \
	FAR8PF(R8); \
	FAR8PF(R9); \
	FAR8PF(R10); \
	STEP; \
	ADDQ $16, R12; \
	STEP; \
	ADDQ $16, R12; \
	JMP  line; \
step: \
	CMPQ R12, R13; \
	JGE  tail; \
	STEP; \
	ADDQ $16, R12; \
tail: \
	CMPQ R12, R14; \
	JGE  done; \
	TAIL; \
done: \
	VMOVDQU32 sumIdx<>(SB), Z24; \
	MOVQ dst+0(FP), DI; \
	RED4(Z0, Z1, Z2, Z3, DI); \
	ADDQ $16, DI; \
	RED4(Z4, Z5, Z6, Z7, DI); \
	VZEROUPPER; \
	RET
