package kernels

import "github.com/sluicehq/sluice/tensor"

// The generic kernels of ggml's other block types: Q4_1, Q5_0, Q5_1 (blocks
// of 32) and the K-quants Q2_K…Q8_K (super-blocks of 256). They follow
// matGeneric: a tile is one block, decoded with tensor.DequantizeBlock (the
// arithmetic of tensor.DequantizeRow) into a stack buffer once for all n
// inputs, and each output keeps its running float32 sum in dst across tiles,
// strictly in column order. The result is therefore bit-identical to
// kernels/ref.MatMul for every n and pool size, as for the other dtypes.

// blockKernelFor is the generic kernel of one of these types, or nil.
func blockKernelFor(t tensor.DType) matKernel {
	switch t {
	case tensor.Q4_1:
		return matQ4_1Generic
	case tensor.Q5_0:
		return matQ5_0Generic
	case tensor.Q5_1:
		return matQ5_1Generic
	case tensor.Q2_K:
		return matQ2_KGeneric
	case tensor.Q3_K:
		return matQ3_KGeneric
	case tensor.Q4_K:
		return matQ4_KGeneric
	case tensor.Q5_K:
		return matQ5_KGeneric
	case tensor.Q6_K:
		return matQ6_KGeneric
	case tensor.Q8_K:
		return matQ8_KGeneric
	}
	return nil
}

// One function per type, so that matKernel stays a plain func value.

func matQ4_1Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q4_1, dst, w, x, n, rows, cols, lo, hi)
}

func matQ5_0Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q5_0, dst, w, x, n, rows, cols, lo, hi)
}

func matQ5_1Generic(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q5_1, dst, w, x, n, rows, cols, lo, hi)
}

func matQ2_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q2_K, dst, w, x, n, rows, cols, lo, hi)
}

func matQ3_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q3_K, dst, w, x, n, rows, cols, lo, hi)
}

func matQ4_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q4_K, dst, w, x, n, rows, cols, lo, hi)
}

func matQ5_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q5_K, dst, w, x, n, rows, cols, lo, hi)
}

func matQ6_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q6_K, dst, w, x, n, rows, cols, lo, hi)
}

func matQ8_KGeneric(dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	matBlocks(tensor.Q8_K, dst, w, x, n, rows, cols, lo, hi)
}

// matBlocks computes output rows [lo,hi) of a weight of block type t for
// all n inputs.
func matBlocks(t tensor.DType, dst []float32, w []byte, x []float32, n, rows, cols, lo, hi int) {
	bs, bb := t.BlockSize(), t.BlockBytes()
	rb := cols / bs * bb
	var buf [group][tensor.QK_K]float32
	r := lo
	for ; r+group <= hi; r += group {
		for i := 0; i < n; i++ {
			clear(dst[i*rows+r : i*rows+r+group])
		}
		for c := 0; c < cols; c += bs {
			b := c / bs * bb
			w0 := decodeBlock(t, &buf[0], bs, w[(r+0)*rb+b:])
			w1 := decodeBlock(t, &buf[1], bs, w[(r+1)*rb+b:])
			w2 := decodeBlock(t, &buf[2], bs, w[(r+2)*rb+b:])
			w3 := decodeBlock(t, &buf[3], bs, w[(r+3)*rb+b:])
			accumulate4(dst, w0, w1, w2, w3, x, n, rows, cols, r, c)
		}
	}
	for ; r < hi; r++ {
		for i := 0; i < n; i++ {
			dst[i*rows+r] = 0
		}
		for c := 0; c < cols; c += bs {
			accumulate1(dst, decodeBlock(t, &buf[0], bs, w[r*rb+c/bs*bb:]), x, n, rows, cols, r, c)
		}
	}
}

// decodeBlock decodes the block at the start of src into buf[:bs].
func decodeBlock(t tensor.DType, buf *[tensor.QK_K]float32, bs int, src []byte) []float32 {
	tensor.DequantizeBlock(buf[:bs], src, t)
	return buf[:bs]
}
