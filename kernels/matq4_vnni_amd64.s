//go:build amd64 && !purego

#include "textflag.h"

// Q4_0 × actQ8 with AVX-512 VNNI (VPDPBUSD), 256-bit (EVEX.256, so Y16–Y31
// are usable; Zen 4 runs 512-bit ops as two 256-bit halves anyway). See
// matq4_vnni_amd64.go for the contract and the operation order, which is
// matQ4_0Fast's: per output one float32x8 chain over pairs of blocks,
// a = fma(float32(L), dw·dx, a), then hsum8.
//
// Measured on this Zen 4 (3.7 GHz): VPDPBUSD, VMULPS, VFMADD231PS and
// VFIXUPIMMPS share the two FMA pipes (2 a cycle; VPDPBUSD and FMA latency
// 4), VCVTPH2PS partly; VCVTDQ2PS, VPSUBD and in-lane shuffles do not. A term
// (one pair of blocks against one input) needs two VPDPBUSD, one VMULPS and
// one FMA, so 2 cycles is its floor; the tile kernel takes about 2.6.
//
// Register use common to all kernels:
//	Y0  0x0F in every byte (nibble mask)
//	Y1  zero (L starts at 0 − c)
//	Y2  VFIXUPIMMPS table turning ±Inf weight scales into NaN, as
//	    quantScaleTable does (tokens 4 and 5, ±Inf, → response 3, QNaN;
//	    every other class → 0, unchanged)
//	K2  0xF0: the upper half of a Y register's dwords or an X's words

// SETUP fills Y0–Y2 and K2.
#define SETUP \
	MOVL         $0x0F0F0F0F, R15; \
	VPBROADCASTD R15, Y0;          \
	VPXOR        Y1, Y1, Y1;       \
	MOVL         $0x00330000, R15; \
	VPBROADCASTD R15, Y2;          \
	MOVL         $0xF0, R15;       \
	KMOVW        R15, K2

// WPAIR unpacks the full pair of blocks at A0 (block b) and A18 = A0+18
// (block b+1) into LO = low nibbles (values 0–15 of b, then of b+1), HI =
// high nibbles (values 16–31) and DW = the two f16 scales as float32 in
// lanes 0–3 and 4–7, ±Inf replaced by NaN. LOX and DWX are LO's and DW's
// low halves. The 32 nibble bytes are two loads: b's 16 at A2 = A0+2 (the
// upper half zeroed), then b+1's as the upper 16 of the 32 bytes at
// A4 = A0+4 (a masked load).
#define WPAIR(A0, A2, A4, A18, LO, LOX, HI, DW, DWX) \
	VMOVDQU      A2, LOX;           \
	VMOVDQU32    A4, K2, LO;        \
	VPSRLW       $4, LO, HI;        \
	VPANDD       Y0, LO, LO;        \
	VPANDD       Y0, HI, HI;        \
	VPBROADCASTW A0, DWX;           \
	VPBROADCASTW A18, K2, DWX;      \
	VCVTPH2PS    DWX, DW;           \
	VFIXUPIMMPS  $0, Y2, DW, DW

// WPAIRT is WPAIR with the scales looked up in the table at R13
// (quantScaleTable: ±Inf already NaN), indices in AX and DX: loads only, no
// VCVTPH2PS or VFIXUPIMMPS, which compete with VPDPBUSD and the FMA for
// their two pipes.
#define WPAIRT(A0, A2, A4, A18, LO, LOX, HI, DW) \
	VMOVDQU      A2, LOX;           \
	VMOVDQU32    A4, K2, LO;        \
	VPSRLW       $4, LO, HI;        \
	VPANDD       Y0, LO, LO;        \
	VPANDD       Y0, HI, HI;        \
	MOVWLZX      A0, AX;            \
	MOVWLZX      A18, DX;           \
	VBROADCASTSS (R13)(AX*4), DW;   \
	VBROADCASTSS (R13)(DX*4), K2, DW

// WHALF is WPAIR for an odd last block paired with an empty one: the upper
// 128 bits of LO/HI and lanes 4–7 of DW are zero (VEX loads zero the upper
// half; VMOVQ keeps only the low four f16 words).
#define WHALF(A0, A2, LO, LOX, HI, DW, DWX) \
	VMOVDQU      A2, LOX;           \
	VPSRLW       $4, LO, HI;        \
	VPANDD       Y0, LO, LO;        \
	VPANDD       Y0, HI, HI;        \
	VPBROADCASTW A0, DWX;           \
	VMOVQ        DWX, DWX;          \
	VCVTPH2PS    DWX, DW;           \
	VFIXUPIMMPS  $0, Y2, DW, DW

// MACC adds one (weight pair, input) term to ACC: L = Σ nibble·x − c exactly
// (two VPDPBUSD, nibbles LO/HI unsigned, activations signed), then
// ACC = fma(float32(L), DW·d4, ACC). PLO/PHI are the input's 64 pair bytes,
// CA its 8 int32 offsets, DA its 8 float32 scales; L, S are temps.
#define MACC(LO, HI, DW, PLO, PHI, CA, DA, L, S, ACC) \
	VPSUBD      CA, Y1, L;   \
	VPDPBUSD    PLO, LO, L;  \
	VPDPBUSD    PHI, HI, L;  \
	VCVTDQ2PS   L, L;        \
	VMULPS      DA, DW, S;   \
	VFMADD231PS S, L, ACC

// HSUM leaves hsum8(ACC) in X7 lane 0: ((v0+v4)+(v2+v6))+((v1+v5)+(v3+v7)),
// clobbering X8. ACCX is ACC's low 128 bits.
#define HSUM(ACC, ACCX) \
	VEXTRACTF32X4 $1, ACC, X7; \
	VADDPS        X7, ACCX, X7; \
	VMOVHLPS      X7, X7, X8;   \
	VADDPS        X8, X7, X7;   \
	VMOVSHDUP     X7, X8;       \
	VADDSS        X8, X7, X7

// Row kernel: nr consecutive weight rows × 1 input, outputs to dst[0..nr).
// Rows go one at a time: a single sequential weight stream. Two adjacent
// rows at a time (two streams rb apart, two FMA chains) measured 2.7× slower
// with the weights in DRAM (7 vs 19 GB/s) though no faster in L3, and a
// software prefetch did not help it; two rows far apart do help (see
// q4VNNIRowsFar, decode's kernel now; this one serves the leftovers). One row runs near its FMA chain's bound (4
// cycles a pair of blocks, 36 weight bytes): about 5.2 cycles, ~25 GB/s at
// 3.7 GHz, about what one core streams from DRAM. Unrolling two pairs, the
// two VPDPBUSD in parallel chains, or table-lookup scales were no faster.
//	DI weight (advances through all rows), SI/R9/R10 the input's p/c/d4
//	(reset per row), CX pair counter, DX rows left, AX dst.

// func q4VNNIRows(w *byte, rb, nr int, p *int8, c *int32, d *float32, npf, odd int, dst *float32)
TEXT ·q4VNNIRows(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), DI
	MOVQ nr+16(FP), DX
	MOVQ dst+64(FP), AX
	MOVQ odd+56(FP), R13
	SETUP
	TESTQ DX, DX
	JZ    rowsdone

rowsrow:
	MOVQ p+24(FP), SI
	MOVQ c+32(FP), R9
	MOVQ d+40(FP), R10
	MOVQ npf+48(FP), CX
	VPXORD Y16, Y16, Y16
	TESTQ CX, CX
	JZ    rowshalf

rowsloop:
	WPAIR((DI), 2(DI), 4(DI), 18(DI), Y3, X3, Y4, Y5, X5)
	MACC(Y3, Y4, Y5, (SI), 32(SI), (R9), (R10), Y7, Y8, Y16)
	ADDQ $36, DI
	ADDQ $64, SI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  rowsloop

rowshalf:
	TESTQ R13, R13
	JZ    rowsstore
	WHALF((DI), 2(DI), Y3, X3, Y4, Y5, X5)
	MACC(Y3, Y4, Y5, (SI), 32(SI), (R9), (R10), Y7, Y8, Y16)
	ADDQ $18, DI

rowsstore:
	HSUM(Y16, X16)
	VMOVSS X7, (AX)
	ADDQ   $4, AX
	DECQ   DX
	JNZ    rowsrow

rowsdone:
	VZEROUPPER
	RET

// Two-row kernel: rows r and r+h (far apart, each its own sequential weight
// stream in its own pages, so the hardware prefetchers follow both; two
// adjacent rows' interleaved accesses within one page they do not) × 1
// input, for r in [0,nr); outputs to dst[r] and dst[r+h]. Two FMA chains
// overlap the per-pair latency that bounds the one-row kernel.
//	DI row r (row r+h at +R12 = h·rb), SI/R9/R10 the input (reset per row),
//	CX pair counter, DX rows left, AX dst (row r+h's at +R14 = 4h).

// func q4VNNIRowsFar(w *byte, far, nr int, p *int8, c *int32, d *float32, npf, odd int, dst *float32, dfar int)
TEXT ·q4VNNIRowsFar(SB), NOSPLIT, $0-80
	MOVQ w+0(FP), DI
	MOVQ far+8(FP), R12
	MOVQ nr+16(FP), DX
	MOVQ dst+64(FP), AX
	MOVQ dfar+72(FP), R14
	MOVQ odd+56(FP), R13
	SETUP
	TESTQ DX, DX
	JZ    r2done

r2row:
	MOVQ p+24(FP), SI
	MOVQ c+32(FP), R9
	MOVQ d+40(FP), R10
	MOVQ npf+48(FP), CX
	VPXORD Y16, Y16, Y16
	VPXORD Y17, Y17, Y17
	TESTQ CX, CX
	JZ    r2half

r2loop:
	WPAIR((DI), 2(DI), 4(DI), 18(DI), Y3, X3, Y4, Y5, X5)
	WPAIR((DI)(R12*1), 2(DI)(R12*1), 4(DI)(R12*1), 18(DI)(R12*1), Y9, X9, Y10, Y11, X11)
	MACC(Y3, Y4, Y5, (SI), 32(SI), (R9), (R10), Y7, Y8, Y16)
	MACC(Y9, Y10, Y11, (SI), 32(SI), (R9), (R10), Y12, Y13, Y17)
	ADDQ $36, DI
	ADDQ $64, SI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  r2loop

r2half:
	TESTQ R13, R13
	JZ    r2store
	WHALF((DI), 2(DI), Y3, X3, Y4, Y5, X5)
	WHALF((DI)(R12*1), 2(DI)(R12*1), Y9, X9, Y10, Y11, X11)
	MACC(Y3, Y4, Y5, (SI), 32(SI), (R9), (R10), Y7, Y8, Y16)
	MACC(Y9, Y10, Y11, (SI), 32(SI), (R9), (R10), Y12, Y13, Y17)
	ADDQ $18, DI

r2store:
	HSUM(Y16, X16)
	VMOVSS X7, (AX)
	HSUM(Y17, X17)
	VMOVSS X7, (AX)(R14*1)
	ADDQ   $4, AX
	DECQ   DX
	JNZ    r2row

r2done:
	VZEROUPPER
	RET

// Tile kernel: 3 weight rows × 4 inputs, register-resident. Each pair's three
// unpacked rows stay in Y3–Y11 and each input's pair data is loaded once into
// Y12–Y15 for the three rows, so a term costs no loads of its own. Measured
// per term: 0.71 ns here; 0.74 with the scales by VCVTPH2PS+VFIXUPIMMPS
// (both take FMA-pipe slots); 0.79 as a 4×4 tile with the activations as
// memory operands (five loads a term); 1.04 as a 4×4 tile of Z registers,
// two inputs per register (Zen 4 splits 512-bit ops, and the masked
// broadcasts that fill both halves cost more than the halved op count saves);
// 0.73 sharing one VMULPS among an input's three rows (the rows' scales
// packed in one register, each row's products picked out by VPSHUFD): fewer
// FMA-pipe ops did not pay for the extra ones, so the pipes are not the only
// limit.
//	Y3+3m, Y4+3m, Y5+3m  row m's LO, HI, DW
//	Y12–Y15              the current input's p low/high 32 bytes, c, d4
//	Y16, Y17             L, S temps
//	Y20+4m+k             accumulator of row m, input k
//	DI row 0 (rows 1, 2 at +BX, +2·BX)
//	SI p of input 0 (input k at +2k·R11), R9 c, R10 d4 (input k at +k·R11)
//	R11 = xs (bytes of c per input), R12 = 3·xs, CX pair counter

// XACC is MACC with the input in Y12–Y15.
#define XACC(LO, HI, DW, ACC) \
	VPSUBD      Y14, Y1, Y16;  \
	VPDPBUSD    Y12, LO, Y16;  \
	VPDPBUSD    Y13, HI, Y16;  \
	VCVTDQ2PS   Y16, Y16;      \
	VMULPS      Y15, DW, Y17;  \
	VFMADD231PS Y17, Y16, ACC

// XINPUT loads one input's pair data and adds its three terms.
#define XINPUT(PLO, PHI, CA, DA, ACC0, ACC1, ACC2) \
	VMOVDQU PLO, Y12;          \
	VMOVDQU PHI, Y13;          \
	VMOVDQU CA, Y14;           \
	VMOVDQU DA, Y15;           \
	XACC(Y3, Y4, Y5, ACC0);    \
	XACC(Y6, Y7, Y8, ACC1);    \
	XACC(Y9, Y10, Y11, ACC2)

#define XINPUTS \
	XINPUT((SI), 32(SI), (R9), (R10), Y20, Y24, Y28);                                     \
	XINPUT((SI)(R11*2), 32(SI)(R11*2), (R9)(R11*1), (R10)(R11*1), Y21, Y25, Y29);         \
	XINPUT((SI)(R11*4), 32(SI)(R11*4), (R9)(R11*2), (R10)(R11*2), Y22, Y26, Y30);         \
	XINPUT((SI)(R12*2), 32(SI)(R12*2), (R9)(R12*1), (R10)(R12*1), Y23, Y27, Y31)

// func q4VNNITile(w *byte, rb int, p *int8, c *int32, d *float32, xs, npf, odd int, dst *float32, ds int, sc *float32)
TEXT ·q4VNNITile(SB), NOSPLIT, $0-88
	MOVQ sc+80(FP), R13
	MOVQ w+0(FP), DI
	MOVQ rb+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ c+24(FP), R9
	MOVQ d+32(FP), R10
	MOVQ xs+40(FP), R11
	LEAQ (R11)(R11*2), R12
	MOVQ npf+48(FP), CX
	SETUP
	VPXORD Y20, Y20, Y20
	VPXORD Y21, Y21, Y21
	VPXORD Y22, Y22, Y22
	VPXORD Y23, Y23, Y23
	VPXORD Y24, Y24, Y24
	VPXORD Y25, Y25, Y25
	VPXORD Y26, Y26, Y26
	VPXORD Y27, Y27, Y27
	VPXORD Y28, Y28, Y28
	VPXORD Y29, Y29, Y29
	VPXORD Y30, Y30, Y30
	VPXORD Y31, Y31, Y31
	TESTQ CX, CX
	JZ    t3half

t3loop:
	WPAIRT((DI), 2(DI), 4(DI), 18(DI), Y3, X3, Y4, Y5)
	WPAIRT((DI)(BX*1), 2(DI)(BX*1), 4(DI)(BX*1), 18(DI)(BX*1), Y6, X6, Y7, Y8)
	WPAIRT((DI)(BX*2), 2(DI)(BX*2), 4(DI)(BX*2), 18(DI)(BX*2), Y9, X9, Y10, Y11)
	XINPUTS
	ADDQ $36, DI
	ADDQ $64, SI
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNZ  t3loop

t3half:
	MOVQ  odd+56(FP), CX
	TESTQ CX, CX
	JZ    t3done
	WHALF((DI), 2(DI), Y3, X3, Y4, Y5, X5)
	WHALF((DI)(BX*1), 2(DI)(BX*1), Y6, X6, Y7, Y8, X8)
	WHALF((DI)(BX*2), 2(DI)(BX*2), Y9, X9, Y10, Y11, X11)
	XINPUTS

t3done:
	MOVQ dst+64(FP), AX
	MOVQ ds+72(FP), DX
	LEAQ (DX)(DX*2), R12
	HSUM(Y20, X20); VMOVSS X7, (AX)
	HSUM(Y24, X24); VMOVSS X7, 4(AX)
	HSUM(Y28, X28); VMOVSS X7, 8(AX)
	HSUM(Y21, X21); VMOVSS X7, (AX)(DX*1)
	HSUM(Y25, X25); VMOVSS X7, 4(AX)(DX*1)
	HSUM(Y29, X29); VMOVSS X7, 8(AX)(DX*1)
	HSUM(Y22, X22); VMOVSS X7, (AX)(DX*2)
	HSUM(Y26, X26); VMOVSS X7, 4(AX)(DX*2)
	HSUM(Y30, X30); VMOVSS X7, 8(AX)(DX*2)
	HSUM(Y23, X23); VMOVSS X7, (AX)(R12*1)
	HSUM(Y27, X27); VMOVSS X7, 4(AX)(R12*1)
	HSUM(Y31, X31); VMOVSS X7, 8(AX)(R12*1)
	VZEROUPPER
	RET


// ---- Panels (Layout PanelQ4_0), the canonical order ----
//
// See matq4_vnni_amd64.go (matQ4_0VNNIPanel). A block of a panel is 288
// bytes at BX: 16 f16 scales, then byte groups 0–3 of the 16 rows (64
// bytes each, row k at 4k). Group g masked is values 4g…4g+3 of the 16
// rows, shifted by 4 and masked values 16+4g…16+4g+3, unsigned 0…15; one
// VPDPBUSD multiplies each by the same 4 values of an input, broadcast.
// The block's −8·Σx (actQ8.sb / 16) starts the integer sum, so it ends
// as Σ(nibble−8)·x, exact: a lane is at most 32·15·127 + 8·32·127 in
// magnitude. Per block:
//	Z0–Z3   values 4g…4g+3 (g = 0…3) of the 16 rows
//	Z4–Z7   values 16+4g…16+4g+3
//	Z8      the 16 rows' scales as float32 (±Inf made NaN)
//	Z30     0x0F in every byte
//	Z31     NaN in every lane
// and per input k of the tile: T (int32, 16 rows) = sb/16, one VPDPBUSD
// per nibble vector, converted; A (the row sums) = fma(T, dW·dX, A).

// Q4PBLOCK loads block BX's nibbles and scales.
#define Q4PBLOCK \
	VCVTPH2PS (BX), Z8; \
	VFPCLASSPSZ $0x18, Z8, K1; \
	VMOVAPS Z31, K1, Z8; \
	VMOVDQU32 32(BX), Z4; \
	VMOVDQU32 96(BX), Z5; \
	VMOVDQU32 160(BX), Z6; \
	VMOVDQU32 224(BX), Z7; \
	VPANDD Z30, Z4, Z0; \
	VPANDD Z30, Z5, Z1; \
	VPANDD Z30, Z6, Z2; \
	VPANDD Z30, Z7, Z3; \
	VPSRLD $4, Z4, Z4; \
	VPSRLD $4, Z5, Z5; \
	VPSRLD $4, Z6, Z6; \
	VPSRLD $4, Z7, Z7; \
	VPANDD Z30, Z4, Z4; \
	VPANDD Z30, Z5, Z5; \
	VPANDD Z30, Z6, Z6; \
	VPANDD Z30, Z7, Z7

// Q4PIN is input k of a tile: its block at xo(R10), sb and db at so(R11),
// so(R12); T the integer accumulator, U a temporary, A the row sums.
#define Q4PIN(xo, so, T, U, A) \
	VPSRAD.BCST $4, so(R11), T; \
	VPDPBUSD.BCST xo+0(R10), Z0, T; \
	VPDPBUSD.BCST xo+4(R10), Z1, T; \
	VPDPBUSD.BCST xo+8(R10), Z2, T; \
	VPDPBUSD.BCST xo+12(R10), Z3, T; \
	VPDPBUSD.BCST xo+16(R10), Z4, T; \
	VPDPBUSD.BCST xo+20(R10), Z5, T; \
	VPDPBUSD.BCST xo+24(R10), Z6, T; \
	VPDPBUSD.BCST xo+28(R10), Z7, T; \
	VCVTDQ2PS T, T; \
	VMULPS.BCST so(R12), Z8, U; \
	VFMADD231PS U, T, A

// Q4PIN1 is Q4PIN for a lone input, the nibble vectors split over two
// integer chains (T and U; integer sums are exact, so the split changes
// no bit).
#define Q4PIN1(T, U, A) \
	VPSRAD.BCST $4, (R11), T; \
	VPXORD U, U, U; \
	VPDPBUSD.BCST 0(R10), Z0, T; \
	VPDPBUSD.BCST 4(R10), Z1, U; \
	VPDPBUSD.BCST 8(R10), Z2, T; \
	VPDPBUSD.BCST 12(R10), Z3, U; \
	VPDPBUSD.BCST 16(R10), Z4, T; \
	VPDPBUSD.BCST 20(R10), Z5, U; \
	VPDPBUSD.BCST 24(R10), Z6, T; \
	VPDPBUSD.BCST 28(R10), Z7, U; \
	VPADDD U, T, T; \
	VCVTDQ2PS T, T; \
	VMULPS.BCST (R12), Z8, U; \
	VFMADD231PS U, T, A

// Q4PANEL defines name(dst *float32, rows int, w *byte, np, nb int, xb
// *int8, sb *int32, db *float32, n int): np consecutive panels at w (nb
// blocks each) against a tile of inputs whose block b is at xb+b·32n (the
// tile's inputs side by side), sb and db at +b·4n; output (input k, panel
// row j) at dst[k·rows + 16p + j]. ZERO zeroes the tile's sums, STEP runs
// its inputs over block BX, STORE writes its sums. The prefetches run two
// blocks ahead (five lines cover a 288-byte block, the next one's
// overlapping).
#define Q4PANEL(name, ZERO, STEP, STORE) \
TEXT name(SB), NOSPLIT, $0-72; \
	MOVQ dst+0(FP), DI; \
	MOVQ rows+8(FP), R8; \
	SHLQ $2, R8; \
	MOVQ w+16(FP), BX; \
	MOVQ np+24(FP), R9; \
	MOVQ n+64(FP), R14; \
	SHLQ $2, R14; \
	MOVQ R14, R13; \
	SHLQ $3, R13; \
	MOVL $0x7fc00000, AX; \
	VPBROADCASTD AX, Z31; \
	MOVL $0x0f0f0f0f, AX; \
	VPBROADCASTD AX, Z30; \
	TESTQ R9, R9; \
	JZ done; \
panel: \
	MOVQ xb+40(FP), R10; \
	MOVQ sb+48(FP), R11; \
	MOVQ db+56(FP), R12; \
	MOVQ nb+32(FP), DX; \
	ZERO; \
block: \
	PREFETCHT0 576(BX); \
	PREFETCHT0 640(BX); \
	PREFETCHT0 704(BX); \
	PREFETCHT0 768(BX); \
	PREFETCHT0 832(BX); \
	Q4PBLOCK; \
	STEP; \
	ADDQ $288, BX; \
	ADDQ R13, R10; \
	ADDQ R14, R11; \
	ADDQ R14, R12; \
	DECQ DX; \
	JNZ block; \
	STORE; \
	ADDQ $64, DI; \
	DECQ R9; \
	JNZ panel; \
done: \
	VZEROUPPER; \
	RET

// Sums: Z10–Z17; integer accumulators Z18–Z25; temporaries Z26–Z29.

#define Q4ZERO8 \
	VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13; \
	VMOVAPS Z10, Z14; VMOVAPS Z10, Z15; VMOVAPS Z10, Z16; VMOVAPS Z10, Z17
#define Q4STEP8 \
	Q4PIN(0, 0, Z18, Z26, Z10); \
	Q4PIN(32, 4, Z19, Z27, Z11); \
	Q4PIN(64, 8, Z20, Z28, Z12); \
	Q4PIN(96, 12, Z21, Z29, Z13); \
	Q4PIN(128, 16, Z22, Z26, Z14); \
	Q4PIN(160, 20, Z23, Z27, Z15); \
	Q4PIN(192, 24, Z24, Z28, Z16); \
	Q4PIN(224, 28, Z25, Z29, Z17)
#define Q4STORE8 \
	VMOVUPS Z10, (DI); \
	VMOVUPS Z11, (DI)(R8*1); \
	VMOVUPS Z12, (DI)(R8*2); \
	LEAQ (DI)(R8*2), AX; \
	VMOVUPS Z13, (AX)(R8*1); \
	VMOVUPS Z14, (DI)(R8*4); \
	LEAQ (DI)(R8*4), CX; \
	VMOVUPS Z15, (CX)(R8*1); \
	VMOVUPS Z16, (CX)(R8*2); \
	LEAQ (CX)(R8*2), AX; \
	VMOVUPS Z17, (AX)(R8*1)

#define Q4ZERO4 VPXORD Z10, Z10, Z10; VMOVAPS Z10, Z11; VMOVAPS Z10, Z12; VMOVAPS Z10, Z13
#define Q4STEP4 \
	Q4PIN(0, 0, Z18, Z26, Z10); \
	Q4PIN(32, 4, Z19, Z27, Z11); \
	Q4PIN(64, 8, Z20, Z28, Z12); \
	Q4PIN(96, 12, Z21, Z29, Z13)
#define Q4STORE4 \
	VMOVUPS Z10, (DI); \
	VMOVUPS Z11, (DI)(R8*1); \
	VMOVUPS Z12, (DI)(R8*2); \
	LEAQ (DI)(R8*2), AX; \
	VMOVUPS Z13, (AX)(R8*1)

#define Q4ZERO1 VPXORD Z10, Z10, Z10
#define Q4STEP1 Q4PIN1(Z18, Z19, Z10)
#define Q4STORE1 VMOVUPS Z10, (DI)

Q4PANEL(·q4Panel8, Q4ZERO8, Q4STEP8, Q4STORE8)
Q4PANEL(·q4Panel4, Q4ZERO4, Q4STEP4, Q4STORE4)
Q4PANEL(·q4Panel1, Q4ZERO1, Q4STEP1, Q4STORE1)
