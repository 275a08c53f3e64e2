//go:build arm64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// qkAsmKernels are the arm64 K-quant kernel sets for TestQKAsmVsModel: the
// SDOT kernels (run where the CPU has the dot product) and the
// SMULL/SADALP ones, with the scale table bound.
func qkAsmKernels() []qkKern {
	sets := []struct {
		name string
		ok   bool
		k    map[tensor.DType]*qkNEON
	}{
		{"neon-dotprod", cpuDotProd, map[tensor.DType]*qkNEON{tensor.Q4_K: &q4kDP, tensor.Q5_K: &q5kDP, tensor.Q6_K: &q6kDP}},
		{"neon", cpuNEON, map[tensor.DType]*qkNEON{tensor.Q4_K: &q4kSM, tensor.Q5_K: &q5kSM, tensor.Q6_K: &q6kSM}},
	}
	tab := &quantScaleTable()[0]
	var out []qkKern
	for _, s := range sets {
		kk := qkKern{s.name, s.ok, map[tensor.DType]func(w, x *byte, nb int) float32{},
			map[tensor.DType]func(w, x *byte, nb, xs int, out *float32, os int){}}
		for dt, k := range s.k {
			kk.dot[dt] = func(w, x *byte, nb int) float32 { return k.dot(w, x, nb, tab) }
			kk.tile[dt] = func(w, x *byte, nb, xs int, o *float32, os int) { k.tile(w, x, nb, xs, o, os, tab) }
		}
		out = append(out, kk)
	}
	return out
}
