//go:build goexperiment.simd && amd64 && !purego

package kernels

// AttentionPerItem is Attention through the per-item archsimd kernel (one dot
// and horizontal sum per slot): the tiled kernel's bit-for-bit reference.
func AttentionPerItem(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32) {
	attentionSIMDItems(dst, q, kv, mask, s, scratch[:max(kv.Len, 0)], 0, rows*s.Heads, vecWidth(s.HeadDim))
}

// AttentionRange runs the active kernel on the items [lo, hi) only, as one
// thread's part of a split call does.
func AttentionRange(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int) {
	attentionImpl(dst, q, kv, mask, s, scratch[:max(kv.Len, 0)], lo, hi)
}

// AttentionTilesBuf runs the tiled kernel with a score buffer of bufLen
// floats (small values force many tiles per call).
func AttentionTilesBuf(dst, q []float32, rows int, kv KV, mask *Mask, s AttnShape, scratch []float32, bufLen int) {
	attentionTiles(dst, q, kv, mask, s, scratch[:max(kv.Len, 0)], make([]float32, bufLen), 0, rows*s.Heads, vecWidth(s.HeadDim))
}
