//go:build (amd64 || arm64) && !purego

package kernels

import (
	"encoding/binary"

	"github.com/sluicehq/sluice/tensor"
)

// The K-quant panel layout both architectures lay a row block out in
// (matqk_panel_amd64.go describes it: "A super-block of a panel"), and the
// scale unpacking that writes its scale vectors: amd64's, and on arm64 the
// model its NEON unpacking is tested against (TestKQScalesNEON); the level
// bytes are written by each architecture's own transposition.

const (
	kqpSM = 5184 // bytes of one super-block of a Q4_K/Q5_K panel
	kqp6  = 5696 // of a Q6_K panel

	kqpLevelsSM = 1088
	kqpLevels6  = 1600
)

// kqPanelBlk is the byte length of one super-block of a t panel.
func kqPanelBlk(t tensor.DType) int {
	if t == tensor.Q6_K {
		return kqp6
	}
	return kqpSM
}

// kqScratchPanels computes outputs [lo, full) for inputs [0, n) (n a

// panelizeSMScales writes row k (0…15) of a Q4_K/Q5_K panel super-block's
// d, dmin, scales and min pairs from the block's first 16 bytes.
func panelizeSMScales(d *[kqpSM]byte, head *[16]byte, k int, words bool) {
	le := binary.LittleEndian
	o := 4 * k & 60
	d[o/2], d[o/2+1], d[32+o/2], d[32+o/2+1] = head[0], head[1], head[2], head[3]
	// tensor.ScaleMinK4 for the 8 sub-blocks at once: a holds bytes 0–7 of
	// the packed scales, c bytes 8–11; sc (bytes j) and m as 8 bytes each.
	a, c := le.Uint64(head[4:]), uint64(le.Uint32(head[12:]))
	lo6 := a & 0x3f3f3f3f3f3f3f3f
	sc := lo6&0xffffffff | (c&0x0f0f0f0f|(a>>6&0x03030303)<<4)<<32
	m := lo6>>32 | (c>>4&0x0f0f0f0f|(a>>38&0x03030303)<<4)<<32
	for j := range 8 {
		v, mj := uint32(sc>>(8*j)&0xff), uint32(m>>(8*j)&0xff)
		if words {
			v |= v << 16
		}
		le.PutUint32(d[(64+64*j+o)&1023:], v)
		le.PutUint32(d[(576+64*j+o)&2047:], mj|mj<<16)
	}
}

// panelizeQ6K writes row k (0…15) of a Q6_K panel super-block's d,
// scales and scale pairs from the row's block.
func panelizeQ6K(d *[kqp6]byte, blk *[tensor.Q6_KBlockLen]byte, k int, words bool) {
	le := binary.LittleEndian
	o := 4 * k & 60
	d[o/2], d[o/2+1] = blk[208], blk[209]
	for s := range 16 {
		v := uint32(int32(int8(blk[192+s])))
		if words {
			v = v&0xffff | v<<16
		}
		le.PutUint32(d[64+64*s+o:], v)
	}
	for u := range 8 {
		lo := uint32(uint16(int16(int8(blk[192+2*u]))))
		hi := uint32(uint16(int16(int8(blk[192+2*u+1]))))
		le.PutUint32(d[1088+64*u+o:], lo|hi<<16)
	}
}
