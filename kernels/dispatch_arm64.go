//go:build arm64 && !purego

package kernels

import (
	"golang.org/x/sys/cpu"
)

// Kernel selection on arm64, in the default build: NEON (ASIMD) assembly,
// chosen by the CPU features golang.org/x/sys/cpu reports, capped by
// SLUICE_ISA (isaCap: generic, neon or neon-dotprod).
//
//	ASIMD + dot product (SDOT)   F32/F16/BF16, attention (F32 and F16
//	                             pages), Q8_0/Q4_0 and Q8_K activation
//	                             quantization; Q8_0/Q4_0/Q4_K/Q5_K/
//	                             Q6_K by SDOT (K-quant batches in
//	                             panels)                            "neon-dotprod"
//	ASIMD                        the same, the integer dots by
//	                             SMULL/SADALP (K-quants: SMULL/
//	                             SMLAL into int16, then SADDLP)     "neon"
//	anything else                the generic Go kernels             "generic"
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
	matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = nil, nil, nil
	quantizeBlocksImpl = quantizeBlocks
	q8Major = false
	attentionImpl, attentionF16Impl = attentionGeneric, attentionGeneric
	implName, level = "generic", isaGeneric
	if c < isaNEON || !cpuNEON {
		return
	}
	matF32Impl, matF16Impl, matBF16Impl = matF32NEON, matF16NEON, matBF16NEON
	matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0NEON, matQ4_0NEON
	matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KNEON, matQ5_KNEON, matQ6_KNEON
	quantizeBlocksImpl = quantizeBlocksNEON
	attentionImpl, attentionF16Impl = attentionNEON, attentionF16NEON
	implName, level = "neon", isaNEON
	if c >= isaDotProd && cpuDotProd {
		matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0DotProd, matQ4_0DotProd
		matQ4_KActImpl, matQ5_KActImpl, matQ6_KActImpl = matQ4_KDotProd, matQ5_KDotProd, matQ6_KDotProd
		implName, level = "neon-dotprod", isaDotProd
	}
}
