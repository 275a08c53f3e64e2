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

//go:noescape
func q6kRows4AVX2(w *byte, ws int, x *byte, nb int, out *float32, os int)

//go:noescape
func q6kRows4VNNI(w *byte, ws int, x *byte, nb int, out *float32, os int)

// q4kRows4Impl and q6kRows4Impl are the Q4_K and Q6_K (Q4_K_M's two
// types) decode kernels matQK takes for one input (nil: the type's dot row
// by row). Why four rows per call: the one-row dots spent a large share of
// their issue slots on a super-block's overhead (the f16 scales, the
// horizontal sums, the float step, for Q4_K also the horizontal sum of the
// mins' product); four rows share those reductions and float steps in the
// lanes of one register, and the VNNI forms fuse the scale multiply and
// the add (VPDPWSSD). From L2 (BenchmarkDecodeStream/1MiB, per
// CPU-second, alternating runs on an AVX-512/AMX Xeon under load 4–7):
// Q4_K 16.2–16.5 → 21.7–22.2 GB/s, Q6_K 22.3–23.1 → 25.3–25.8.
var q4kRows4Impl, q6kRows4Impl qkRows4

func init() { addSelector(selectKQRows) }

func selectKQRows(c isaLevel) {
	q4kRows4Impl, q6kRows4Impl = nil, nil
	switch {
	case c >= isaAVX512 && cpuVNNI:
		q4kRows4Impl, q6kRows4Impl = q4kRows4VNNI, q6kRows4VNNI
	case c >= isaAVX2 && cpuAVX2:
		q4kRows4Impl, q6kRows4Impl = q4kRows4AVX2, q6kRows4AVX2
	}
}

// kqRows4 is the 4-row decode kernel for type t under the current cap, or
// nil.
func kqRows4(t tensor.DType) qkRows4 {
	switch t {
	case tensor.Q4_K:
		return q4kRows4Impl
	case tensor.Q6_K:
		return q6kRows4Impl
	}
	return nil
}
