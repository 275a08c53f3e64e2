//go:build amd64 && !purego

package kernels

import (
	"golang.org/x/sys/cpu"
)

// Kernel selection on amd64, in the default build: the assembly kernels need
// no GOEXPERIMENT, only the CPU features checked here (golang.org/x/sys/cpu,
// which also checks that the OS saves the vector state), capped by
// SLUICE_ISA (isaCap).
//
//	AVX-512 F/BW/VL/DQ + FMA + F16C   F32/F16/BF16: 4×C tiles, 8-row decode
//	  + VNNI                          Q8_0/Q4_0: VPDPBUSD          "avx512-vnni"
//	                                  (also over PanelQ8_0/PanelQ4_0)
//	  + VNNI + AMX-TILE/INT8          PanelQ8_0/PanelQ4_0 batches:  "avx512-amx"
//	    (the OS granting AMX)         TDPBSSD tiles (row-major batches
//	                                  through panels in scratch); the
//	                                  rest as the VNNI set
//	  without VNNI                    Q8_0/Q4_0: the AVX2 kernels  "avx512"
//	AVX2 + FMA + F16C                 all five: 256-bit assembly   "avx2"
//	                                  (Q8_0/Q4_0 also over PanelQ8_0/PanelQ4_0)
//	anything else                     the generic Go kernels       "generic"

var (
	cpuAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	cpuAVX512 = cpuAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ
	cpuVNNI   = cpuAVX512 && cpu.X86.HasAVX512VNNI
)

func init() { addSelector(selectMatrix) }

// selectMatrix installs the matrix kernels for cap c (see isaLevel).
func selectMatrix(c isaLevel) {
	matF32Impl, matF16Impl, matBF16Impl = matF32Generic, matF16Generic, matBF16Generic
	matQ8_0Impl, matQ4_0Impl = matQ8_0Generic, matQ4_0Generic
	matQ8_0ActImpl, matQ4_0ActImpl = nil, nil
	matQ8_0PanelImpl, matQ4_0PanelImpl, q8Major, q4Major, majorGroup = nil, nil, false, false, 8
	quantizeBlocksImpl, panelizeFast = quantizeBlocks, nil
	implName, level = "generic", isaGeneric
	if c >= isaAVX2 && cpuAVX2 {
		quantizeBlocksImpl, panelizeFast = quantizeBlocksAVX2, panelizeAVX2
	}
	switch {
	case c >= isaAVX512 && cpuAVX512:
		matF32Impl, matF16Impl, matBF16Impl = matF32Asm, matF16Asm, matBF16Asm
		matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0AVX2, matQ4_0AVX2
		matQ8_0PanelImpl, matQ4_0PanelImpl, q8Major, q4Major = matQ8_0AVX2Panel, matQ4_0AVX2Panel, true, true
		implName, level = "avx512", isaAVX512
		if cpuVNNI {
			matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0VNNI, matQ4_0VNNI
			matQ8_0PanelImpl, matQ4_0PanelImpl, q8Major, q4Major = matQ8_0VNNIPanel, matQ4_0VNNIPanel, true, true
			implName = "avx512-vnni"
		}
		if c >= isaAMX && cpuAMX && amxOK() {
			matQ8_0ActImpl, matQ8_0PanelImpl = matQ8_0AMX, matQ8_0AMXPanel
			matQ4_0ActImpl, matQ4_0PanelImpl, q4Major, majorGroup = matQ4_0AMX, matQ4_0AMXPanel, true, 16
			implName = "avx512-amx"
		}
	case c >= isaAVX2 && cpuAVX2:
		matF32Impl, matF16Impl, matBF16Impl = matF32AVX2Asm, matF16AVX2Asm, matBF16AVX2Asm
		matQ8_0ActImpl, matQ4_0ActImpl = matQ8_0AVX2, matQ4_0AVX2
		matQ8_0PanelImpl, matQ4_0PanelImpl, q8Major, q4Major = matQ8_0AVX2Panel, matQ4_0AVX2Panel, true, true
		implName, level = "avx2", isaAVX2
	}
}
