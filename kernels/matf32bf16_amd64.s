//go:build amd64 && !purego

#include "textflag.h"
#include "tiles_amd64.h"

// F32 and BF16 matrix tiles (matf32bf16_asm_amd64.go has the Go side and the
// contract), built like the F16 ones in mathalf_amd64.s. Every output is one
// 16-lane float32 chain over its weight row,
//	acc = fma(W[j:j+16], x[j:j+16], acc)   j = 0, 16, 32, …
// with a short last chunk loaded zero-padded under the k-mask K1 (weight and
// x alike), then summed by hsum16's tree: t[k] = acc[k]+acc[k+8];
// a[k] = t[k]+t[k+4]; result = (a[0]+a[2]) + (a[1]+a[3]). BF16 becomes
// float32 exactly by widening to 32 bits and shifting left 16 (VPMOVZXWD,
// VPSLLD), which is what matBF16AVX512 does.
//
// Registers in the 4×C tiles: Z0–Z23 accumulators (input c, row r in
// Z(4c+r)), Z24–Z27 the four weight vectors of this j, Z28 the x vector,
// Z29–Z31 scratch. GP: AX BX CX DX the weight rows, SI DI R8–R11 the inputs,
// R12 j (elements), R13 the end of the full chunks, R14 cols, R15 nr.
// K1 masks the short last chunk's lanes, K2 the sums to store.

// LDF loads the four F32 weight rows' j..j+15 (full chunk).
#define LDF \
	VMOVUPS (AX)(R12*4), Z24; \
	VMOVUPS (BX)(R12*4), Z25; \
	VMOVUPS (CX)(R12*4), Z26; \
	VMOVUPS (DX)(R12*4), Z27

// LDFT is LDF for the short last chunk: lanes outside K1 are +0.
#define LDFT \
	VMOVUPS.Z (AX)(R12*4), K1, Z24; \
	VMOVUPS.Z (BX)(R12*4), K1, Z25; \
	VMOVUPS.Z (CX)(R12*4), K1, Z26; \
	VMOVUPS.Z (DX)(R12*4), K1, Z27

// BF16 converts in place: u32 lanes holding bf16 bits become float32.
#define BF16(z) VPSLLD $16, z, z

// LDB widens and converts the four BF16 weight rows' j..j+15.
#define LDB \
	VPMOVZXWD (AX)(R12*2), Z24; \
	VPMOVZXWD (BX)(R12*2), Z25; \
	VPMOVZXWD (CX)(R12*2), Z26; \
	VPMOVZXWD (DX)(R12*2), Z27; \
	BF16(Z24); BF16(Z25); BF16(Z26); BF16(Z27)

// LDBT is LDB for the short last chunk: lanes outside K1 are +0.
#define LDBT \
	VMOVDQU16.Z (AX)(R12*2), K1, Y29; VPMOVZXWD Y29, Z24; \
	VMOVDQU16.Z (BX)(R12*2), K1, Y29; VPMOVZXWD Y29, Z25; \
	VMOVDQU16.Z (CX)(R12*2), K1, Y29; VPMOVZXWD Y29, Z26; \
	VMOVDQU16.Z (DX)(R12*2), K1, Y29; VPMOVZXWD Y29, Z27; \
	BF16(Z24); BF16(Z25); BF16(Z26); BF16(Z27)

// The decode kernels: Z0–Z7 accumulators, Z8–Z15 weights, Z16 x.
// DPRO8(scale), given w in AX and cols in R14, sets BX CX DX DI R8 R9 R10 to
// the next 7 rows (stride cols·scale bytes), MASKS with K2 = 0xf (a RED4
// stores all four sums) and R15 to the row stride in bytes.
#define DPRO8(scale) \
	MOVL $4, R15; \
	MASKS; \
	LEAQ (R14*scale), R15; \
	LEAQ (AX)(R15*1), BX; \
	LEAQ (BX)(R15*1), CX; \
	LEAQ (CX)(R15*1), DX; \
	LEAQ (DX)(R15*1), DI; \
	LEAQ (DI)(R15*1), R8; \
	LEAQ (R8)(R15*1), R9; \
	LEAQ (R9)(R15*1), R10

// FMA8 adds the 8 weight vectors Z8–Z15 times x (Z16) into Z0–Z7.
#define FMA8 \
	VFMADD231PS Z16, Z8, Z0; \
	VFMADD231PS Z16, Z9, Z1; \
	VFMADD231PS Z16, Z10, Z2; \
	VFMADD231PS Z16, Z11, Z3; \
	VFMADD231PS Z16, Z12, Z4; \
	VFMADD231PS Z16, Z13, Z5; \
	VFMADD231PS Z16, Z14, Z6; \
	VFMADD231PS Z16, Z15, Z7

// DSTEPF is one chunk j..j+15 of the 8 F32 rows. The loop around it
// prefetches the next 8 rows into L2 in memory order, one line per 64
// bytes consumed (F32 only: F16 and BF16 read far-apart rows, FAR8). Measured from DRAM, one core: per-row
// PREFETCHT1 1 KiB ahead gave ~28–29 GB/s on 8192-column rows but 24 GB/s
// on the 110m model's 768-column ones (BenchmarkMatVecDRAM), where the
// eight row streams share 4 KiB pages; the sequential stream gives 29 and
// 27. Without prefetch ~24; PREFETCHT0 or NTA 21–23; 4 rows 21. Prefetches
// past the last row never fault.
#define DSTEPF \
	VMOVUPS (SI)(R12*4), Z16; \
	VFMADD231PS (AX)(R12*4), Z16, Z0; \
	VFMADD231PS (BX)(R12*4), Z16, Z1; \
	VFMADD231PS (CX)(R12*4), Z16, Z2; \
	VFMADD231PS (DX)(R12*4), Z16, Z3; \
	VFMADD231PS (DI)(R12*4), Z16, Z4; \
	VFMADD231PS (R8)(R12*4), Z16, Z5; \
	VFMADD231PS (R9)(R12*4), Z16, Z6; \
	VFMADD231PS (R10)(R12*4), Z16, Z7

// DTAILF is DSTEPF for the short last chunk.
#define DTAILF \
	VMOVUPS.Z (SI)(R12*4), K1, Z16; \
	VMOVUPS.Z (AX)(R12*4), K1, Z8; \
	VMOVUPS.Z (BX)(R12*4), K1, Z9; \
	VMOVUPS.Z (CX)(R12*4), K1, Z10; \
	VMOVUPS.Z (DX)(R12*4), K1, Z11; \
	VMOVUPS.Z (DI)(R12*4), K1, Z12; \
	VMOVUPS.Z (R8)(R12*4), K1, Z13; \
	VMOVUPS.Z (R9)(R12*4), K1, Z14; \
	VMOVUPS.Z (R10)(R12*4), K1, Z15; \
	FMA8

// DSTEPB is one chunk j..j+15 of the 8 BF16 rows.
#define DSTEPB \
	VMOVUPS (SI)(R12*4), Z16; \
	VPMOVZXWD (AX)(R12*2), Z8; \
	VPMOVZXWD (BX)(R12*2), Z9; \
	VPMOVZXWD (CX)(R12*2), Z10; \
	VPMOVZXWD (DX)(R12*2), Z11; \
	VPMOVZXWD (DI)(R12*2), Z12; \
	VPMOVZXWD (R8)(R12*2), Z13; \
	VPMOVZXWD (R9)(R12*2), Z14; \
	VPMOVZXWD (R10)(R12*2), Z15; \
	BF16(Z8); \
	BF16(Z9); \
	BF16(Z10); \
	BF16(Z11); \
	BF16(Z12); \
	BF16(Z13); \
	BF16(Z14); \
	BF16(Z15); \
	FMA8

// DTAILB is DSTEPB for the short last chunk.
#define DTAILB \
	VMOVUPS.Z (SI)(R12*4), K1, Z16; \
	VMOVDQU16.Z (AX)(R12*2), K1, Y8; VPMOVZXWD Y8, Z8; \
	VMOVDQU16.Z (BX)(R12*2), K1, Y9; VPMOVZXWD Y9, Z9; \
	VMOVDQU16.Z (CX)(R12*2), K1, Y10; VPMOVZXWD Y10, Z10; \
	VMOVDQU16.Z (DX)(R12*2), K1, Y11; VPMOVZXWD Y11, Z11; \
	VMOVDQU16.Z (DI)(R12*2), K1, Y12; VPMOVZXWD Y12, Z12; \
	VMOVDQU16.Z (R8)(R12*2), K1, Y13; VPMOVZXWD Y13, Z13; \
	VMOVDQU16.Z (R9)(R12*2), K1, Y14; VPMOVZXWD Y14, Z14; \
	VMOVDQU16.Z (R10)(R12*2), K1, Y15; VPMOVZXWD Y15, Z15; \
	BF16(Z8); \
	BF16(Z9); \
	BF16(Z10); \
	BF16(Z11); \
	BF16(Z12); \
	BF16(Z13); \
	BF16(Z14); \
	BF16(Z15); \
	FMA8

// The 4×C tiles. Each computes, for rows w0..w3 (repeat a row to fill a
// tile: same chain, same bits) and inputs x, x+cols, …, x+(C−1)·cols, the
// sums dst[c·dstStride + r] for r < nr (dstStride in bytes).

TILE(·f32Tile4x1, LDF, LDFT, XP1, ZR1, ST1, STT1, RD1)

TILE(·f32Tile4x2, LDF, LDFT, XP2, ZR2, ST2, STT2, RD2)

TILE(·f32Tile4x3, LDF, LDFT, XP3, ZR3, ST3, STT3, RD3)

TILE(·f32Tile4x4, LDF, LDFT, XP4, ZR4, ST4, STT4, RD4)

TILE(·f32Tile4x5, LDF, LDFT, XP5, ZR5, ST5, STT5, RD5)

TILE(·f32Tile4x6, LDF, LDFT, XP6, ZR6, ST6, STT6, RD6)

TILE(·bf16Tile4x1, LDB, LDBT, XP1, ZR1, ST1, STT1, RD1)

TILE(·bf16Tile4x2, LDB, LDBT, XP2, ZR2, ST2, STT2, RD2)

TILE(·bf16Tile4x3, LDB, LDBT, XP3, ZR3, ST3, STT3, RD3)

TILE(·bf16Tile4x4, LDB, LDBT, XP4, ZR4, ST4, STT4, RD4)

TILE(·bf16Tile4x5, LDB, LDBT, XP5, ZR5, ST5, STT5, RD5)

TILE(·bf16Tile4x6, LDB, LDBT, XP6, ZR6, ST6, STT6, RD6)

// f32Dec8 is the F32 decode kernel: 8 consecutive weight rows from w
// (stride cols) against one input, storing 8 sums at dst. The next 8 rows
// are prefetched into L1 (T0): T1 (to L2) left a model whose weights sit in
// L2 (stories260K, 1 MB) waiting on L2 at every load, and measured no
// better on rows streamed from DRAM.

// func f32Dec8(dst *float32, w *float32, x *float32, cols int)
TEXT ·f32Dec8(SB), NOSPLIT, $0-32
	MOVQ cols+24(FP), R14
	MOVQ w+8(FP), AX
	MOVQ x+16(FP), SI
	DPRO8(4)
	ZERO4(Z0, Z1, Z2, Z3)
	ZERO4(Z4, Z5, Z6, Z7)
	MOVQ R14, R11 // the next 8 rows, prefetched in memory order (DSTEPF)
	SHLQ $5, R11
	ADDQ AX, R11
	CMPQ R12, R13
	JGE  tail
loop:
	PREFETCHT0 0(R11)
	PREFETCHT0 64(R11)
	PREFETCHT0 128(R11)
	PREFETCHT0 192(R11)
	PREFETCHT0 256(R11)
	PREFETCHT0 320(R11)
	PREFETCHT0 384(R11)
	PREFETCHT0 448(R11)
	ADDQ $512, R11
	DSTEPF
	ADDQ $16, R12
	CMPQ R12, R13
	JLT  loop
tail:
	CMPQ R12, R14
	JGE  done
	DTAILF
done:
	VMOVDQU32 sumIdx<>(SB), Z24
	MOVQ dst+0(FP), DI
	RED4(Z0, Z1, Z2, Z3, DI)
	ADDQ $16, DI
	RED4(Z4, Z5, Z6, Z7, DI)
	VZEROUPPER
	RET

// bf16Far8: the BF16 decode kernel (see FAR8).
FAR8(·bf16Far8, 1, DSTEPB, DTAILB)
