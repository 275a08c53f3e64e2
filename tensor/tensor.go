// Package tensor names the element types sluice stores weights and activations in,
// their byte layouts (including GGUF's quantized blocks), and the conversions
// between half-precision formats and float32.
//
// It is a leaf: it imports nothing of ours. Shapes are listed outermost first
// (row-major, numpy order): a weight matrix of `rows` outputs by `cols` inputs is
// Shape{rows, cols}. GGUF lists dimensions innermost first; format/gguf reverses them.
package tensor

import "fmt"

// DType is an element type. The numeric values are GGUF's ggml_type ids so a
// tensor index read from a file needs no translation table.
type DType uint32

const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q8_0 DType = 8
	BF16 DType = 30
)

// Block geometry of the quantized types, as llama.cpp lays them out (ggml-common.h):
//
//	Q8_0: { f16 d; int8 qs[32] }            34 bytes per 32 weights, w = d*q
//	Q4_0: { f16 d; uint8 qs[16] }           18 bytes per 32 weights, w = d*(nibble-8);
//	      byte j holds weight j in its low nibble and weight j+16 in its high nibble.
const (
	QK8_0        = 32
	Q8_0BlockLen = 2 + QK8_0
	QK4_0        = 32
	Q4_0BlockLen = 2 + QK4_0/2
)

// String returns the GGUF spelling ("f32", "q8_0", …).
func (t DType) String() string {
	switch t {
	case F32:
		return "f32"
	case F16:
		return "f16"
	case Q4_0:
		return "q4_0"
	case Q8_0:
		return "q8_0"
	case BF16:
		return "bf16"
	}
	if bt, ok := blockTypes[t]; ok {
		return bt.name
	}
	if c, ok := LookupCodec(t); ok {
		return c.Name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// builtin are the dtypes this package decodes itself.
var builtin = []DType{F32, F16, Q4_0, Q8_0, BF16, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K}

// ParseDType is the inverse of String, registered extensions included.
func ParseDType(s string) (DType, error) {
	for _, t := range builtin {
		if t.String() == s {
			return t, nil
		}
	}
	for _, t := range Extensions() {
		if t.String() == s {
			return t, nil
		}
	}
	return 0, fmt.Errorf("tensor: unknown dtype %q (want f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K or q8_K)", s)
}

// Known reports whether sluice can compute with t.
func (t DType) Known() bool {
	switch t {
	case F32, F16, Q4_0, Q8_0, BF16:
		return true
	}
	if _, ok := blockTypes[t]; ok {
		return true
	}
	_, ok := LookupCodec(t)
	return ok
}

// BlockSize is the number of elements that share one block (1 for plain types).
func (t DType) BlockSize() int {
	switch t {
	case Q8_0:
		return QK8_0
	case Q4_0:
		return QK4_0
	}
	if bt, ok := blockTypes[t]; ok {
		return bt.size
	}
	return 1
}

// BlockBytes is the size in bytes of one block (of one element for plain
// types); 0 for extension dtypes, whose rows are sized by RowBytes alone.
func (t DType) BlockBytes() int {
	switch t {
	case F32:
		return 4
	case F16, BF16:
		return 2
	case Q8_0:
		return Q8_0BlockLen
	case Q4_0:
		return Q4_0BlockLen
	}
	if bt, ok := blockTypes[t]; ok {
		return bt.bytes
	}
	return 0
}

// RowBytes returns the bytes taken by n consecutive elements, or an error when n
// does not fill whole blocks or t is unknown.
func (t DType) RowBytes(n int) (int64, error) {
	if c, ok := LookupCodec(t); ok {
		if n < 0 {
			return 0, fmt.Errorf("tensor: %d elements of %v: negative count", n, t)
		}
		return c.RowBytes(n), nil
	}
	if !t.Known() {
		return 0, fmt.Errorf("tensor: unsupported dtype %v", t)
	}
	bs := t.BlockSize()
	if n < 0 || n%bs != 0 {
		return 0, fmt.Errorf("tensor: %d elements of %v is not a whole number of %d-element blocks", n, t, bs)
	}
	return int64(n/bs) * int64(t.BlockBytes()), nil
}

// Info describes one tensor stored in a file: the tensor index entry that
// format readers produce and offload.Store serves.
type Info struct {
	Name   string // GGUF naming: "blk.3.attn_q.weight"
	DType  DType
	Shape  []int // outermost first
	Offset int64 // absolute byte offset in the file
	Size   int64 // bytes
}

// Elements is the product of the shape.
func (in Info) Elements() int64 {
	n := int64(1)
	for _, d := range in.Shape {
		n *= int64(d)
	}
	return n
}

// Rows and Cols view a tensor as a matrix: Cols is the innermost dimension,
// Rows the product of the others.
func (in Info) Rows() int {
	if len(in.Shape) == 0 {
		return 1
	}
	return int(in.Elements() / int64(in.Shape[len(in.Shape)-1]))
}

func (in Info) Cols() int {
	if len(in.Shape) == 0 {
		return 1
	}
	return in.Shape[len(in.Shape)-1]
}
