package kernels

import (
	"encoding/binary"
	"fmt"

	"github.com/sluicehq/sluice/tensor"
)

// Layout is how a Weight's bytes are arranged.
type Layout uint8

const (
	// RowMajor is the file's layout: row r's blocks at r·RowBytes.
	RowMajor Layout = iota
	// PanelQ8_0 is Q8_0 in panels of PanelRows rows, made by Repack in the
	// bytes the weight already occupies. Panel p (rows 16p…16p+15) fills the
	// 16 rows' bytes, block after block; block b of the panel is 544 bytes,
	// what the 16 rows' block b took in the file:
	//
	//	[0,32)            the 16 rows' f16 scales, row k at 2k
	//	[32+64g, 96+64g)  group g = 0…7: values 4g…4g+3 of rows 0…15, row k
	//	                  at 4k, each byte XOR 0x80 (w+128, unsigned)
	//
	// so one 64-byte load is a vector of 16 rows' 4-value groups, which one
	// VPDPBUSD multiplies by a broadcast 4-byte group of an input, and the
	// 16 scales convert in one instruction. The Rows%16 rows after the last
	// whole panel stay row-major at their own offsets.
	PanelQ8_0
	// PanelQ4_0 is Q4_0 in panels of PanelRows rows, made by Repack in
	// place as PanelQ8_0 is. Block b of a panel is 288 bytes, what the 16
	// rows' block b took in the file:
	//
	//	[0,32)            the 16 rows' f16 scales, row k at 2k
	//	[32+64g, 96+64g)  group g = 0…3: bytes 4g…4g+3 of rows 0…15, row k
	//	                  at 4k, as in the file (low nibbles values
	//	                  4g…4g+3, high nibbles values 16+4g…16+4g+3)
	//
	// so one 32-byte load is 8 rows' byte group, whose masked low and
	// shifted high nibbles VPMADDUBSW multiplies by a broadcast 4-value
	// group of an input (and one 64-byte load 16 rows', for VPDPBUSD on
	// the VNNI set). The Rows%16 rows after the last whole panel stay
	// row-major.
	PanelQ4_0
)

// PanelRows is the number of rows in a PanelQ8_0 panel.
const PanelRows = 16

const (
	panelBlk  = PanelRows * tensor.Q8_0BlockLen // 544: one block of a Q8_0 panel
	panelBlk4 = PanelRows * tensor.Q4_0BlockLen // 288: one block of a Q4_0 panel
)

func (l Layout) String() string {
	switch l {
	case RowMajor:
		return "row-major"
	case PanelQ8_0:
		return "panel-q8_0"
	case PanelQ4_0:
		return "panel-q4_0"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}

// matQ8_0PanelImpl computes output rows [lo,hi) of a PanelQ8_0 weight (lo
// a multiple of PanelRows; the rows after the last whole panel row-major)
// over quantized activations, with the same bits as matQ8_0ActImpl gives the
// row-major weight. nil when the kernel set has no panel kernel: MatMul then
// un-interleaves each panel into scratch and runs the row-major kernel.
// matQ4_0PanelImpl is the same for PanelQ4_0.
var matQ8_0PanelImpl, matQ4_0PanelImpl actKernel

// Panels reports whether the installed kernel set has a panel kernel for
// t, i.e. whether Repack makes MatMul over t faster. A store calls it
// before repacking: with a set that lacks one, a repacked weight still
// gives the row-major weight's bits, but through a slower copy.
func Panels(t tensor.DType) bool {
	return t == tensor.Q8_0 && matQ8_0PanelImpl != nil || t == tensor.Q4_0 && matQ4_0PanelImpl != nil
}

// Repackable reports whether Repack would lay out a rows×cols weight of
// type t in panels: Q8_0, or Q4_0 when the installed kernel set has a
// Q4_0 panel kernel (Panels), with at least one whole panel of rows.
// (Q8_0 is laid out whatever the set, as before Q4_0 panels existed; a
// Q4_0 panel weight would only make a set without the kernel slower.)
func Repackable(t tensor.DType, rows, cols int) bool {
	return (t == tensor.Q8_0 || t == tensor.Q4_0 && matQ4_0PanelImpl != nil) && panelShape(t, rows, cols)
}

// panelShape reports whether a rows×cols weight of type t has a panel
// layout at all (Validate's check: a panel weight made under one kernel
// set stays valid under another).
func panelShape(t tensor.DType, rows, cols int) bool {
	return (t == tensor.Q8_0 || t == tensor.Q4_0) && rows >= PanelRows && cols > 0 && cols%tensor.QK8_0 == 0
}

// panelLayout is the panel layout of type t.
func panelLayout(t tensor.DType) Layout {
	if t == tensor.Q4_0 {
		return PanelQ4_0
	}
	return PanelQ8_0
}

// Repack rewrites w's bytes in place into the panel layout (see PanelQ8_0,
// PanelQ4_0)
// and returns w with Layout set; it needs a scratch of one panel (16 rows).
// A weight that is not Repackable, or not row-major, is returned unchanged.
// The caller must own Data (never an mmap'd file's bytes) and nothing may
// read it concurrently.
func Repack(w Weight) (Weight, error) {
	if err := w.Validate(); err != nil {
		return w, err
	}
	if w.Layout != RowMajor || !Repackable(w.DType, w.Rows, w.Cols) {
		return w, nil
	}
	nb := w.Cols / tile
	rb := nb * w.DType.BlockBytes()
	tmp := getPanelScratch(PanelRows * rb)
	defer putPanelScratch(tmp)
	for p := 0; p+PanelRows <= w.Rows; p += PanelRows {
		src := w.Data[p*rb : (p+PanelRows)*rb]
		copy(tmp, src)
		panelize(w.DType, src, tmp, nb)
	}
	w.Layout = panelLayout(w.DType)
	return w, nil
}

// panelizeFast, when set (amd64 from AVX2 on), is panelize in assembly.
// The ssd tier lays out every streamed matrix after its read, so this pass
// must run well above the disk's rate: the Go loops below ran at about 1.6
// GB/s of CPU time.
var panelizeFast func(t tensor.DType, dst, src []byte, nb int)

// panelize writes 16 row-major rows of type t (Q8_0 or Q4_0) from src as
// one panel into dst.
func panelize(t tensor.DType, dst, src []byte, nb int) {
	if panelizeFast != nil {
		panelizeFast(t, dst, src, nb)
		return
	}
	panelizeGo(t, dst, src, nb)
}

// panelizeGo is panelize in Go (the reference the assembly is tested
// against).
func panelizeGo(t tensor.DType, dst, src []byte, nb int) {
	if t == tensor.Q4_0 {
		panelizeQ4(dst, src, nb)
	} else {
		panelizeQ8(dst, src, nb)
	}
}

// panelizeQ4 writes the 16 row-major Q4_0 rows of src (nb blocks each) as
// one PanelQ4_0 panel into dst (the same size; not overlapping src).
func panelizeQ4(dst, src []byte, nb int) {
	rb := nb * tensor.Q4_0BlockLen
	_ = src[PanelRows*rb-1]
	_ = dst[PanelRows*rb-1]
	le := binary.LittleEndian
	for b := 0; b < nb; b++ {
		o := dst[b*panelBlk4 : (b+1)*panelBlk4 : (b+1)*panelBlk4]
		for k := 0; k < PanelRows; k++ {
			blk := src[k*rb+b*tensor.Q4_0BlockLen : k*rb+(b+1)*tensor.Q4_0BlockLen]
			_ = blk[tensor.Q4_0BlockLen-1]
			le.PutUint16(o[2*k:], le.Uint16(blk))
			le.PutUint32(o[32+4*k:], le.Uint32(blk[2:]))
			le.PutUint32(o[96+4*k:], le.Uint32(blk[6:]))
			le.PutUint32(o[160+4*k:], le.Uint32(blk[10:]))
			le.PutUint32(o[224+4*k:], le.Uint32(blk[14:]))
		}
	}
}

// panelizeQ8 writes the 16 row-major Q8_0 rows of src (nb blocks each) as
// one PanelQ8_0 panel into dst (the same size; not overlapping src).
func panelizeQ8(dst, src []byte, nb int) {
	rb := nb * tensor.Q8_0BlockLen
	_ = src[PanelRows*rb-1]
	_ = dst[PanelRows*rb-1]
	for b := 0; b < nb; b++ {
		o := dst[b*panelBlk : (b+1)*panelBlk]
		for k := 0; k < PanelRows; k++ {
			blk := src[k*rb+b*tensor.Q8_0BlockLen : k*rb+(b+1)*tensor.Q8_0BlockLen]
			o[2*k], o[2*k+1] = blk[0], blk[1]
			for g := 0; g < 8; g++ {
				v := binary.LittleEndian.Uint32(blk[2+4*g:]) ^ 0x80808080
				binary.LittleEndian.PutUint32(o[32+64*g+4*k:], v)
			}
		}
	}
}

// panelRow writes row r of a panel weight (layout l, nb blocks per row) in
// the file's layout into dst (one row's bytes).
func panelRow(dst, data []byte, l Layout, r, nb int) {
	if l == PanelQ4_0 {
		rb := nb * tensor.Q4_0BlockLen
		p, k := r/PanelRows, r%PanelRows
		base := data[p*PanelRows*rb : (p+1)*PanelRows*rb]
		for b := 0; b < nb; b++ {
			o := base[b*panelBlk4 : (b+1)*panelBlk4]
			blk := dst[b*tensor.Q4_0BlockLen : (b+1)*tensor.Q4_0BlockLen]
			blk[0], blk[1] = o[2*k], o[2*k+1]
			for g := 0; g < 4; g++ {
				copy(blk[2+4*g:2+4*g+4], o[32+64*g+4*k:32+64*g+4*k+4])
			}
		}
		return
	}
	rb := nb * tensor.Q8_0BlockLen
	p, k := r/PanelRows, r%PanelRows
	base := data[p*PanelRows*rb : (p+1)*PanelRows*rb]
	for b := 0; b < nb; b++ {
		o := base[b*panelBlk : (b+1)*panelBlk]
		blk := dst[b*tensor.Q8_0BlockLen : (b+1)*tensor.Q8_0BlockLen]
		blk[0], blk[1] = o[2*k], o[2*k+1]
		for g := 0; g < 8; g++ {
			v := binary.LittleEndian.Uint32(o[32+64*g+4*k:]) ^ 0x80808080
			binary.LittleEndian.PutUint32(blk[2+4*g:], v)
		}
	}
}

// RowBytes writes row r of w in the file's (row-major) layout into dst,
// whatever w's Layout, and returns the row's bytes (dst[:RowBytes]).
func RowBytes(dst []byte, w Weight, r int) []byte {
	rb, err := w.DType.RowBytes(w.Cols)
	if err != nil {
		panic(err)
	}
	if r < 0 || r >= w.Rows {
		panic(fmt.Sprintf("kernels: RowBytes: row %d of %d", r, w.Rows))
	}
	dst = dst[:rb]
	if w.Layout != RowMajor && r < w.Rows/PanelRows*PanelRows {
		panelRow(dst, w.Data, w.Layout, r, w.Cols/tile)
	} else {
		copy(dst, w.Data[int64(r)*rb:int64(r+1)*rb])
	}
	return dst
}

// DecodeRow decodes row r of w into dst (w.Cols values) as
// tensor.DequantizeRow decodes the file's row, whatever w's Layout.
func DecodeRow(dst []float32, w Weight, r int) {
	if w.Layout == RowMajor {
		rb, err := w.DType.RowBytes(w.Cols)
		if err != nil {
			panic(err)
		}
		tensor.DequantizeRow(dst, w.Data[int64(r)*rb:], w.DType, w.Cols)
		return
	}
	var buf [4096]byte
	var row []byte
	if rb, _ := w.DType.RowBytes(w.Cols); rb <= int64(len(buf)) {
		row = RowBytes(buf[:], w, r)
	} else {
		row = RowBytes(make([]byte, rb), w, r)
	}
	tensor.DequantizeRow(dst, row, w.DType, w.Cols)
}

// unpanelFree holds scratch panels for Repack and unpanelled (a free list,
// as actFree, so that neither allocates once warm).
var unpanelFree = make(chan []byte, 16)

// unpanelled runs j's row-major kernel over output rows [lo,hi) of a panel
// weight: each whole panel is copied back to the file's layout in scratch
// and the kernel runs on the copy (dst offset so that its row 0 is the
// panel's first row), so every output gets exactly the bits the row-major
// weight gives on the same kernel set. The rows after the last whole panel
// are row-major already.
func (j *matJob) unpanelled(lo, hi int) {
	checkPanelSplit(j.rows, lo, hi)
	nb := j.cols / tile
	rb := nb * j.dt.BlockBytes()
	full := j.rows / PanelRows * PanelRows
	if r := max(lo, full); r < hi {
		j.rowMajor(j.dst, j.w, r, hi)
	}
	if lo >= min(hi, full) {
		return
	}
	tmp := getPanelScratch(PanelRows * rb)
	for p := lo; p < min(hi, full); p += PanelRows {
		for k := 0; k < PanelRows; k++ {
			panelRow(tmp[k*rb:(k+1)*rb], j.w, j.layout, p+k, nb)
		}
		j.rowMajor(j.dst[p:], tmp, 0, PanelRows)
	}
	putPanelScratch(tmp)
}

// panelScratchMin is the smallest panel scratch getPanelScratch makes: two
// row blocks at the default rowBlockBytes (256 KiB), the most a row block's
// panels or tiles ask for at the usual widths.
const panelScratchMin = 512 << 10

// getPanelScratch is n bytes from unpanelFree, or new ones. A new buffer
// holds at least panelScratchMin bytes, so that which buffer a
// thread happens to take does not decide whether it allocates: with
// MatMul's rows cut into pieces the threads claim, requests of several
// sizes meet the same buffers, and exact-size buffers kept being replaced
// by larger ones (an allocation in a warm decode step, now and then).
func getPanelScratch(n int) []byte {
	var b []byte
	select {
	case b = <-unpanelFree:
	default:
	}
	if cap(b) < n {
		b = make([]byte, max(n, panelScratchMin))
	}
	return b[:n]
}

// putPanelScratch returns b to unpanelFree, dropping it when the list is full.
func putPanelScratch(b []byte) {
	select {
	case unpanelFree <- b:
	default:
	}
}

// checkPanelSplit panics unless [lo,hi) starts and ends on panel edges (or
// at the last row): a kernel computes whole panels.
func checkPanelSplit(rows, lo, hi int) {
	if lo%PanelRows != 0 || hi%PanelRows != 0 && hi != rows {
		panic(fmt.Sprintf("kernels: MatMul: panel weight of %d rows split at [%d,%d), not on multiples of %d", rows, lo, hi, PanelRows))
	}
}
