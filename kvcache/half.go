package kvcache

import "unsafe"

// halves is page buffer w (c.pageW float32 words) seen as the c.pageF
// binary16 values of an F16 page: the same memory, two halves a word, so
// the budget, the spill file and copy-on-write move F16 pages as they move
// F32 ones (whole buffers), and only the row-level code (Put, View,
// compaction) needs the element type.
func (c *Cache) halves(w []float32) []uint16 {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&w[0])), 2*len(w))[:c.pageF:c.pageF]
}

// copyRow copies one token row (c.rowF values) from element offset so of
// page src to element offset do of page dst, in the pages' element type.
func (c *Cache) copyRow(dst []float32, do int, src []float32, so int) {
	n := c.rowF
	if c.f16 {
		copy(c.halves(dst)[do:do+n], c.halves(src)[so:so+n])
		return
	}
	copy(dst[do:do+n], src[so:so+n])
}
