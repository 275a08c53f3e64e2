// AMX (Advanced Matrix Extensions) instructions as bytes: Go's assembler
// has no mnemonics for them. Each is a VEX-encoded instruction,
//
//	C4  [R̄ X̄ B̄ mmmmm=00010]  [W=0 v̄v̄v̄v̄ L=0 pp]  opcode  modrm  [sib disp32]
//
// with pp the implied prefix (0 none, 1 66, 2 F3, 3 F2) and vvvv stored
// inverted (1111 when unused). Registers are given by number: tiles 0–7;
// general registers AX=0, CX=1, DX=2, BX=3, SI=6, DI=7, R8–R15 = 8–15
// (the AMX_ names below). The memory forms always take base + index·1 +
// disp32, so any base (BP and R13 included) encodes; the index register is
// the row stride in bytes and must not be SP. TestAMXEncodings checks each
// macro against plain Go.

#define AMX_AX 0
#define AMX_CX 1
#define AMX_DX 2
#define AMX_BX 3
#define AMX_SI 6
#define AMX_DI 7
#define AMX_R8 8
#define AMX_R9 9
#define AMX_R10 10
#define AMX_R11 11
#define AMX_R12 12
#define AMX_R13 13
#define AMX_R14 14
#define AMX_R15 15

// The second VEX byte for a memory operand (R̄ = 1: the tile needs no
// extension; X̄ and B̄ inverted from the index's and base's bit 3).
#define AMX_VEX1(base, idx) BYTE $(0xE2 ^ (((idx)>>3)<<6) ^ (((base)>>3)<<5))
// modrm (mod = 10: disp32; reg = tile; rm = 100: a sib follows), sib
// (scale 1), disp32.
#define AMX_MEM(t, base, idx, disp) \
	BYTE $(0x84 | ((t)<<3)); \
	BYTE $((((idx)&7)<<3) | ((base)&7)); \
	BYTE $((disp)&0xFF); BYTE $(((disp)>>8)&0xFF); BYTE $(((disp)>>16)&0xFF); BYTE $(((disp)>>24)&0xFF)

// LDTILECFG [base + disp]: load the 64-byte tile configuration (a sib
// with no index: index field 100).
#define LDTILECFG(base, disp) \
	BYTE $0xC4; BYTE $(0xE2 ^ (((base)>>3)<<5)); BYTE $0x78; BYTE $0x49; \
	BYTE $0x84; BYTE $(0x20 | ((base)&7)); \
	BYTE $((disp)&0xFF); BYTE $(((disp)>>8)&0xFF); BYTE $(((disp)>>16)&0xFF); BYTE $(((disp)>>24)&0xFF)

// TILERELEASE: return the tiles to their initial state (and the
// configuration to none), so that the OS need not save them.
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

// TILEZERO tmm(t).
#define TILEZERO(t) BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $(0xC0 | ((t)<<3))

// TILELOADD tmm(t), [base + idx + disp]: the tile's rows from base+disp,
// idx bytes apart (pp = F2).
#define TILELOADD(t, base, idx, disp) \
	BYTE $0xC4; AMX_VEX1(base, idx); BYTE $0x7B; BYTE $0x4B; AMX_MEM(t, base, idx, disp)

// TILESTORED [base + idx + disp], tmm(t): the tile's rows to base+disp,
// idx bytes apart (pp = F3).
#define TILESTORED(base, idx, disp, t) \
	BYTE $0xC4; AMX_VEX1(base, idx); BYTE $0x7A; BYTE $0x4B; AMX_MEM(t, base, idx, disp)

// TDP(pp) tmm(d), tmm(a), tmm(b): d += a·b over int8 groups of four
// (the d rows × 16 int32, a's rows × 4K bytes, b's K rows in groups of 4
// bytes per output column).
#define AMX_TDP(pp, d, a, b) \
	BYTE $0xC4; BYTE $0xE2; BYTE $(((15-(b))<<3) | (pp)); BYTE $0x5E; BYTE $(0xC0 | ((d)<<3) | (a))

// TDPBSSD: a and b signed. TDPBSUD: a signed, b unsigned. TDPBUSD: a
// unsigned, b signed. TDPBUUD: both unsigned.
#define TDPBSSD(d, a, b) AMX_TDP(3, d, a, b)
#define TDPBSUD(d, a, b) AMX_TDP(2, d, a, b)
#define TDPBUSD(d, a, b) AMX_TDP(1, d, a, b)
#define TDPBUUD(d, a, b) AMX_TDP(0, d, a, b)
