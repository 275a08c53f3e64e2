//go:build arm64 && !purego

package kernels

import (
	"math"
	"sync"

	"golang.org/x/sys/cpu"
)

// Kernel selection on arm64, in the default build: NEON (ASIMD) assembly,
// chosen by the CPU features golang.org/x/sys/cpu reports, capped by
// SLUICE_ISA (isaCap: generic, neon or neon-dotprod).
//
//	ASIMD + dot product (SDOT)   F32/F16/BF16, attention, activation
//	                             quantization; Q8_0/Q4_0 by SDOT   "neon-dotprod"
//	ASIMD                        the same, Q8_0/Q4_0 by SMULL/SADALP "neon"
//	anything else                the generic Go kernels            "generic"
//
// The two integer paths compute the same exact block sums and the same
// float steps, so "neon" and "neon-dotprod" give the same bits.

var (
	cpuNEON    = cpu.ARM64.HasASIMD
	cpuDotProd = cpuNEON && cpu.ARM64.HasASIMDDP
)

func init() { addSelector(selectNEON) }

// selectNEON installs the kernels for cap c (see isaLevel).
func selectNEON(c isaLevel) {
	matF32Impl, matF16Impl, matBF16Impl = matF32Generic, matF16Generic, matBF16Generic
	matQ8_0Impl, matQ4_0Impl = matQ8_0Generic, matQ4_0Generic
	matQ8_0ActImpl, matQ4_0ActImpl = nil, nil
	quantizeBlocksImpl = quantizeBlocks
	pairsImpl, q8Major = (*actQ8).pairs, false
	attentionImpl = attentionGeneric
	implName, level = "generic", isaGeneric
	if c < isaNEON || !cpuNEON {
		return
	}
	matF32Impl, matF16Impl, matBF16Impl = matF32NEON, matF16NEON, matBF16NEON
	matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0NEON, matQ4_0NEON
	quantizeBlocksImpl = quantizeBlocksNEON
	// The NEON kernels read only actQ8's q and d: skip the amd64 layouts.
	pairsImpl = func(*actQ8, int, int, int) {}
	attentionImpl = attentionNEON
	implName, level = "neon", isaNEON
	if c >= isaDotProd && cpuDotProd {
		matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0DotProd, matQ4_0DotProd
		implName, level = "neon-dotprod", isaDotProd
	}
}

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
// input tile passes over it (a quarter of a 1 MiB L2, as on amd64; Arm
// cores have 512 KiB to 2 MiB). It only orders the loops, never one
// output's arithmetic (tests shrink it to cross block edges).
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
