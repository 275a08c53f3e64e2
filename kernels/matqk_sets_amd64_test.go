//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// qkAsmKernels are the amd64 K-quant kernel sets for TestQKAsmVsModel.
func qkAsmKernels() []qkKern {
	type dotF = func(w, x *byte, nb int) float32
	type tileF = func(w, x *byte, nb, xs int, out *float32, os int)
	return []qkKern{
		{"avx2", cpuAVX2, map[tensor.DType]dotF{tensor.Q4_K: q4kDotAVX2, tensor.Q5_K: q5kDotAVX2, tensor.Q6_K: q6kDotAVX2},
			map[tensor.DType]tileF{tensor.Q4_K: q4kTile4AVX2, tensor.Q5_K: q5kTile4AVX2, tensor.Q6_K: q6kTile4AVX2}},
		{"avx512", cpuAVX512, map[tensor.DType]dotF{tensor.Q4_K: q4kDotAVX512, tensor.Q5_K: q5kDotAVX512, tensor.Q6_K: q6kDotAVX512},
			map[tensor.DType]tileF{tensor.Q4_K: q4kTile4AVX512, tensor.Q5_K: q5kTile4AVX512, tensor.Q6_K: q6kTile4AVX512}},
		{"vnni", cpuVNNI, map[tensor.DType]dotF{tensor.Q4_K: q4kDotVNNI, tensor.Q5_K: q5kDotVNNI, tensor.Q6_K: q6kDotVNNI},
			map[tensor.DType]tileF{tensor.Q4_K: q4kTile4VNNI, tensor.Q5_K: q5kTile4VNNI, tensor.Q6_K: q6kTile4VNNI}},
	}
}
