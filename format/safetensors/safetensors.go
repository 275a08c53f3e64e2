// Package safetensors reads and writes Hugging Face safetensors files and the
// sharded model.safetensors.index.json that ties several of them together.
//
// Layout, all little-endian:
//
//	u64 N | N bytes of JSON header | tensor data
//
// The header is one JSON object. Each key is a tensor name whose value is
// {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, with
// begin and end relative to the start of the data section; the optional key
// "__metadata__" maps strings to strings. Shapes are outermost first (row-major),
// the same order as tensor.Info, so nothing is reversed.
//
// Reading parses only the header. Tensor data stays on disk: File.Tensors carry
// absolute offsets so offload.Store can mmap the file, and ReadF32 decodes one
// tensor when a caller wants floats. Every length and offset is checked against
// the file size before anything is allocated, so a corrupt or hostile file gives
// an *Error naming the file, the byte offset and what was expected, never a
// panic or a huge allocation.
package safetensors

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/tensor"
)

// MaxHeaderBytes bounds the JSON header, as the reference implementation does
// (100 MB), so a hostile length prefix cannot make us allocate gigabytes.
const MaxHeaderBytes = 100_000_000

// MetadataKey is the reserved header key holding free-form string metadata.
const MetadataKey = "__metadata__"

// Sentinel errors; every *Error unwraps to exactly one of them (or to an I/O error).
var (
	// ErrTruncated: the header length or a tensor's data runs past the end of the file.
	ErrTruncated = errors.New("safetensors: truncated")
	// ErrCorrupt: the header is not valid JSON of the expected shape, or offsets
	// overlap, are reversed, or disagree with shape × dtype.
	ErrCorrupt = errors.New("safetensors: corrupt")
	// ErrUnsupported: a well-formed file with a dtype sluice does not compute with.
	ErrUnsupported = errors.New("safetensors: unsupported")
)

// Error describes a problem at one place in one file.
type Error struct {
	Path   string // the name given to Read (the path for Open)
	Offset int64  // absolute byte offset of the offending field; -1 when none applies
	Msg    string // what was found and what was expected
	Err    error  // ErrTruncated, ErrCorrupt, ErrUnsupported or an I/O error
}

func (e *Error) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("safetensors: %s: %s", e.Path, e.Msg)
	}
	return fmt.Sprintf("safetensors: %s: offset %d: %s", e.Path, e.Offset, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// dtypes maps the safetensors spelling to the element types sluice computes with.
var dtypes = map[string]tensor.DType{
	"F32":  tensor.F32,
	"F16":  tensor.F16,
	"BF16": tensor.BF16,
}

// ParseDType maps a safetensors dtype string ("F32", "F16", "BF16") to a DType.
func ParseDType(s string) (tensor.DType, bool) {
	t, ok := dtypes[s]
	return t, ok
}

// DTypeName is the inverse of ParseDType.
func DTypeName(t tensor.DType) (string, bool) {
	switch t {
	case tensor.F32:
		return "F32", true
	case tensor.F16:
		return "F16", true
	case tensor.BF16:
		return "BF16", true
	}
	return "", false
}
