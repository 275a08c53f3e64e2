//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/sluicehq/sluice/tensor"
)

// The AMX-INT8 panel kernels ("avx512-amx": the VNNI set with these for
// PanelQ8_0 and PanelQ4_0 batches), in matq_amx_amd64.s. One tile product
// (TDPBSSD) multiplies 16 inputs' block (an A tile of 16 rows × 32 signed
// bytes: an actQ8 group's block as q8Major lays it out, the groups of 16
// under this set, majorGroup) by a panel block (a B tile of 8 rows × 64
// bytes: row g the 16 weight rows' values 4g…4g+3, which is PanelQ8_0's
// group g) into 16 × 16 exact int32 block dots. Each dot then takes canon's float step,
//
//	acc = fma(float32(s), dW(r,b)·dX(i,b), acc)      // blocks in order
//
// so every output has the bits of canonQ8_0 / canonQ4_0, the VNNI Q8_0
// kernels' and the VNNI and AVX2 Q4_0 kernels': batch invariant, whatever the layout
// or the tile an input falls in.
//
// The B tiles are made signed once per call in a scratch (Q8_0: XOR 0x80
// back from w+128; Q4_0: each nibble −8, low nibbles in rows 0–3 and high
// ones in rows 4–7, the values 4g… and 16+4g…), with the block's 16
// scales as float32, for the row block of panels matPanel hands over, and
// reused for every tile of inputs: signed by signed needs no Σx
// correction, so a block's float step per input is a convert, a multiply
// and an FMA on 16 rows, the sums staying in zmm registers over the row's
// blocks. The inputs go by tiles of 16 (one group each), each over every
// panel in turn; the n%16 inputs of a partly filled last group, and calls
// of fewer than amxMinN inputs, run the VNNI Q8_0 (Q4_0) panel
// kernels, which give the same bits. The tile unit's costs are per
// instruction more than per row (measured on a Sapphire Rapids core,
// independent instructions back to back: a TILESTORED of 8 rows 5.1 ns,
// of 16 rows 6.6 ns; a TDPBSSD of 8 rows × 32 bytes by 32×16 3.4 ns, of 16
// rows 5.7 ns), hence whole groups of 16 rather than two A tiles of 8.
//
// Tile state: each assembly call loads its configuration (amxConfig)
// and releases the tiles before it returns; an assembly function is never
// preempted asynchronously, so no other goroutine runs on the thread in
// between (a signal arriving meanwhile has the tile state saved and
// restored around its handler by the OS, which checked the signal stacks'
// size when it granted the state).

var cpuAMX = cpuVNNI && cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8

// amxOK reports whether the AMX set can run: the CPU has AMX-TILE and
// AMX-INT8 and the OS granted the tile state (asked once, process-wide).
var amxOK = sync.OnceValue(func() bool { return cpuAMX && amxPermit() })

// amxMinN is the fewest inputs of a call that go to the tile unit: one
// whole group. Against the VNNI panel kernels, which take the smaller calls
// (BenchmarkAMXPanels, Sapphire Rapids, 1 thread, two runs), 16 inputs ran
// Q8_0 at 0.83–0.88× (0.96–1.07× in an earlier session run) and Q4_0 at
// 1.0–1.2×; 32 inputs Q8_0 at 1.1–1.4× and Q4_0 at 1.35–1.4×; 128 inputs
// 1.6× and 1.5–1.6×. Within the noise of those figures 16 was kept.
var amxMinN = 16

// amxPanelByPanel is the most tile inputs for which amxTiles calls the
// kernel one panel at a time, so that the panel's unpacked B tiles stay in
// L1 for its one or two tiles (more tiles amortise the row block's unpack
// through L2).
var amxPanelByPanel = 32

// amxConfig is the tile configuration of the kernels (palette 1), two
// sets: tmm0 and tmm3 A tiles of 16 rows × 32 bytes, tmm1 and tmm4 B
// tiles of 8 rows × 64 bytes, tmm2 and tmm5 C tiles of 16 rows × 64 bytes
// (16 int32).
var amxConfig = func() (c [64]byte) {
	c[0] = 1
	for _, t := range [][3]int{{0, 16, 32}, {1, 8, 64}, {2, 16, 64}, {3, 16, 32}, {4, 8, 64}, {5, 16, 64}} {
		c[16+2*t[0]], c[48+t[0]] = byte(t[2]), byte(t[1])
	}
	return c
}()

// amxBlk is one unpacked panel block in the scratch: the B tile and the
// 16 scales as float32.
const amxBlk = 512 + 64

// amxCBufs is the number of 1 KiB C tile buffers after the unpacked panel.
const amxCBufs = 2

// matQ8_0AMXPanel computes output rows [lo,hi) of a PanelQ8_0 weight (lo
// and hi on panel edges, or hi = rows); the rows after the last panel run
// the VNNI row-major kernel.
func matQ8_0AMXPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q8Blk, matQ8_0VNNI, q8AMXPanels)
}

// matQ4_0AMXPanel is matQ8_0AMXPanel for PanelQ4_0, the rows after the
// last panel on the VNNI row-major kernel.
func matQ4_0AMXPanel(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	matPanel(dst, w, xq, n, rows, cols, lo, hi, q4Blk, matQ4_0VNNI, q4AMXPanels)
}

// matQ8_0AMX computes output rows [lo,hi) of a row-major Q8_0 weight (the
// mmap and ssd tiers): batches of amxMinN inputs or more copy each row
// block into panels in scratch and run the tiles over it (the same bits,
// for one pass over the block), the rest the VNNI row-major kernel.
func matQ8_0AMX(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	amxRowMajor(tensor.Q8_0, dst, w, xq, n, rows, cols, lo, hi, matQ8_0VNNI, q8AMXPanels)
}

// matQ4_0AMX is matQ8_0AMX for Q4_0, the rest on the VNNI kernel.
func matQ4_0AMX(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int) {
	amxRowMajor(tensor.Q4_0, dst, w, xq, n, rows, cols, lo, hi, matQ4_0VNNI, q4AMXPanels)
}

// amxRowMajor runs tiles (q8AMXPanels or q4AMXPanels) over the whole
// panels of rows [lo,hi) of a row-major weight of type t, laid out in
// scratch a row block at a time (scratchPanels), and rowMajor over the
// rest (and over everything when n < amxMinN).
func amxRowMajor(t tensor.DType, dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int,
	rowMajor func(dst []float32, w []byte, xq *actQ8, n, rows, cols, lo, hi int),
	tiles func(dst []float32, rows int, wp []byte, np, nb int, xq *actQ8, n, r0 int)) {
	nb := cols / tile
	if n < amxMinN || hi-lo < PanelRows || nb == 0 {
		rowMajor(dst, w, xq, n, rows, cols, lo, hi)
		return
	}
	rb := nb * t.BlockBytes()
	// The assembly trusts its pointers: everything the tiles touch,
	// checked once.
	xb := xq.blocks()
	_ = w[hi*rb-1]
	_ = dst[(n-1)*rows+hi-1]
	last := xq.majorAt(n-1, nb-1, nb)
	_ = xb[(last+1)*tile-1]
	_ = xq.sb[last]
	_ = xq.db[last]
	if full := scratchPanels(t, dst, w, xq, n, rows, lo, hi, nb, rb, tiles); full < hi {
		rowMajor(dst, w, xq, n, rows, cols, full, hi)
	}
}

// q8AMXPanels computes output rows [r0, r0+16·np) from the np Q8_0 panels
// at w for every input: the whole groups of 16 on the tile unit, the rest
// by the VNNI tiles of 8, 4 and 1.
func q8AMXPanels(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) {
	if n < amxMinN {
		q8VNNIPanels(dst, rows, w, np, nb, xq, n, r0)
		return
	}
	q8VNNIPanelsFrom(dst, rows, w, np, nb, xq, n, r0, amxTiles(amxQ8Panels, dst, rows, w, np, nb, xq, n, r0))
}

// q4AMXPanels is q8AMXPanels for Q4_0 panels, the rest by the VNNI Q4_0
// tiles.
func q4AMXPanels(dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) {
	if n < amxMinN {
		q4VNNIPanels(dst, rows, w, np, nb, xq, n, r0)
		return
	}
	q4VNNIPanelsFrom(dst, rows, w, np, nb, xq, n, r0, amxTiles(amxQ4Panels, dst, rows, w, np, nb, xq, n, r0))
}

// amxTiles runs k (amxQ8Panels or amxQ4Panels) over the np panels at w
// for the inputs in whole groups of 16 (n ≥ 16, so actQ8.gw = 16) and
// returns how many that is. matPanel has checked the bounds of w, dst and
// xq for all n inputs.
func amxTiles(k func(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, t16 int, sc *byte, cfg *byte),
	dst []float32, rows int, w []byte, np, nb int, xq *actQ8, n, r0 int) int {
	n16 := n / 16 * 16
	if n16 == 0 {
		return 0
	}
	if xq.gw != 16 {
		panic(fmt.Sprintf("kernels: AMX panels: %d inputs in activation groups of %d, want 16", n, xq.gw))
	}
	buf := getPanelScratch(np*nb*amxBlk + amxCBufs*1024 + 64)
	sc := buf[(64-int(uintptr(unsafe.Pointer(&buf[0]))%64))%64:] // 64-byte aligned
	if n16 <= amxPanelByPanel {
		pb := len(w) / np
		for p := 0; p < np; p++ {
			k(&dst[r0+p*PanelRows], rows, &w[p*pb], 1, nb, &xq.blocks()[0], &xq.db[0], n16/16, &sc[0], &amxConfig[0])
		}
	} else {
		k(&dst[r0], rows, &w[0], np, nb, &xq.blocks()[0], &xq.db[0], n16/16, &sc[0], &amxConfig[0])
	}
	putPanelScratch(buf)
	return n16
}

// amxQ8Panels and amxQ4Panels write dst[k·rows+16p+j] = row 16p+j of the
// np panels at w · input k for the t16 tiles of 16 inputs, input k's
// block b at xb+(k/16)·512·nb+b·512+32·(k%16) (actQ8's groups of 16) and
// its scale at db+(k/16)·16·nb+b·16+k%16; sc is a 64-byte aligned scratch
// of np·nb·amxBlk+2048 bytes, cfg amxConfig.
//
//go:noescape
func amxQ8Panels(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, t16 int, sc *byte, cfg *byte)

//go:noescape
func amxQ4Panels(dst *float32, rows int, w *byte, np, nb int, xb *int8, db *float32, t16 int, sc *byte, cfg *byte)

// amxProbe is one 16×64 by 64×16 tile product of a and b into c by
// TDPBSSD, TDPBSUD, TDPBUSD or TDPBUUD (op 0–3), cfg configuring tiles
// 5–7 as 16 rows of 64 bytes: TestAMXEncodings checks the instruction
// bytes of amx_amd64.h with it.
//
//go:noescape
func amxProbe(cfg *byte, a, b *byte, c *int32, op int)
