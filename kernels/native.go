//go:build (amd64 || arm64) && !purego

package kernels

import (
	"math"
	"sync"
)

// What the assembly kernels of both architectures share.

// Block byte lengths (tensor.Q8_0BlockLen, tensor.Q4_0BlockLen).
const (
	q8Blk = 34
	q4Blk = 18
)

// zeroRows sets outputs [lo,hi) of every input: the product with no columns.
func zeroRows(dst []float32, n, rows, lo, hi int) {
	for i := 0; i < n; i++ {
		clear(dst[i*rows+lo : i*rows+hi])
	}
}

// rowBlockBytes is how much weight a batched kernel keeps hot while every
// input tile passes over it: a quarter of a Zen 4 core's 1 MiB L2 (Arm
// cores have 512 KiB to 2 MiB), leaving room for the activations of one
// tile and the prefetcher. From memory each
// weight byte is then read once per call, from L2 once per input tile, while
// the tile's activations stay in L1. Without it a 512-token prompt chunk
// re-read all its activations (1 MiB of int8 at 2048 columns) from L3 for
// every weight row. It only orders the loops, never one output's arithmetic
// (tests shrink it to cross block edges).
var rowBlockBytes = 256 << 10

// rowBlock is the number of weight rows of rowBytes bytes in one block.
func rowBlock(rowBytes int) int {
	return max(1, rowBlockBytes/rowBytes)
}

// quantScaleTable is f16Table with ±Inf mapped to NaN: an Inf block scale
// makes ref's weights ±Inf or NaN (Inf·0), and NaN is the only value the
// factored form dW·dX·Σq can honestly report for that block.
var quantScaleTable = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	*t = *f16Table()
	for i, v := range t {
		if math.IsInf(float64(v), 0) {
			t[i] = float32(math.NaN())
		}
	}
	return t
})
