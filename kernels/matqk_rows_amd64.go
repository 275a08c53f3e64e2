//go:build amd64 && !purego

package kernels

import "github.com/sluicehq/sluice/tensor"

// qkRows4 is a 4 rows × 1 input decode kernel: the dots of the rows at w,
// w+ws, w+2ws, w+3ws (bytes) with the activation row at x into *out,
// out+os, … (os in bytes), each bit-identical to the type's qkDot.
type qkRows4 func(w *byte, ws int, x *byte, nb int, out *float32, os int)

//go:noescape
func q4kRows4AVX2(w *byte, ws int, x *byte, nb int, out *float32, os int)

//go:noescape
func q4kRows4VNNI(w *byte, ws int, x *byte, nb int, out *float32, os int)

// q4kRows4Impl is the Q4_K decode kernel matQK takes for one input (nil:
// the type's dot row by row). Why four rows per call: the one-row dot spent
// more of its issue slots on a super-block's overhead (the f16 scales,
// the horizontal sums of I and M, the float step) than on the products;
// four rows share those reductions and float steps in the lanes of one
// register, and the VNNI form fuses the scale multiply and the add.
var q4kRows4Impl qkRows4

func init() { addSelector(selectKQRows) }

func selectKQRows(c isaLevel) {
	q4kRows4Impl = nil
	switch {
	case c >= isaAVX512 && cpuVNNI:
		q4kRows4Impl = q4kRows4VNNI
	case c >= isaAVX2 && cpuAVX2:
		q4kRows4Impl = q4kRows4AVX2
	}
}

// kqRows4 is the 4-row decode kernel for type t under the current cap, or
// nil.
func kqRows4(t tensor.DType) qkRows4 {
	if t == tensor.Q4_K {
		return q4kRows4Impl
	}
	return nil
}
