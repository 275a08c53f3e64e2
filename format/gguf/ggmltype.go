package gguf

import (
	"fmt"

	"github.com/sluicehq/sluice/tensor"
)

// ggmlLayout is the block geometry of a ggml type that sluice does not compute
// with (yet). Knowing it lets the reader index and bounds-check an IQ or
// ternary file, so a model loader can report "unsupported dtype q4_K" for the one
// tensor concerned instead of the whole file failing to parse.
type ggmlLayout struct {
	name       string
	blockSize  int // elements per block
	blockBytes int
}

// otherTypes follows ggml.c's type_traits for the types package tensor does
// not define (it has F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the
// K-quants Q2_K…Q8_K); ids missing from both (4, 5, 31–33, 36–38) were
// removed from ggml and are rejected as unknown.
var otherTypes = map[tensor.DType]ggmlLayout{
	9:  {"q8_1", 32, 36},
	16: {"iq2_xxs", 256, 66},
	17: {"iq2_xs", 256, 74},
	18: {"iq3_xxs", 256, 98},
	19: {"iq1_s", 256, 50},
	20: {"iq4_nl", 32, 18},
	21: {"iq3_s", 256, 110},
	22: {"iq2_s", 256, 82},
	23: {"iq4_xs", 256, 136},
	24: {"i8", 1, 1},
	25: {"i16", 1, 2},
	26: {"i32", 1, 4},
	27: {"i64", 1, 8},
	28: {"f64", 1, 8},
	29: {"iq1_m", 256, 56},
	34: {"tq1_0", 256, 54},
	35: {"tq2_0", 256, 66},
	39: {"mxfp4", 32, 17},
}

// TypeName spells a ggml type id as llama.cpp does, including types sluice
// cannot compute with; unknown ids print as ggml_type(N).
func TypeName(t tensor.DType) string {
	if l, ok := otherTypes[t]; ok {
		return l.name
	}
	return t.String()
}

// rowBytes is tensor.DType.RowBytes extended to every ggml type; ok is false
// for an id ggml does not define.
func rowBytes(t tensor.DType, n int64) (size int64, ok bool, err error) {
	if t.Known() {
		if n > int64(^uint(0)>>1) {
			return 0, true, fmt.Errorf("row of %d elements is too long", n)
		}
		s, err := t.RowBytes(int(n))
		return s, true, err
	}
	l, known := otherTypes[t]
	if !known {
		return 0, false, nil
	}
	if n%int64(l.blockSize) != 0 {
		return 0, true, fmt.Errorf("%d elements of %s is not a whole number of %d-element blocks", n, l.name, l.blockSize)
	}
	return n / int64(l.blockSize) * int64(l.blockBytes), true, nil
}
