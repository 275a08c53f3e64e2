// Package gguf reads and writes GGUF files (versions 2 and 3), the container
// llama.cpp uses for weights, hyper-parameters and tokenizer vocabularies.
//
// Reading parses only the header, the metadata key/values and the tensor index;
// tensor data is never loaded here (offload.Store does that from the absolute
// offsets in File.Tensors). Every count and length in the header is checked
// against the file size before anything is allocated, so a corrupt or hostile
// file yields an *Error naming the file, the byte offset and what was expected,
// never a panic or a huge allocation.
//
// Layout, all little-endian:
//
//	magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//	kv_count × { string key | u32 value_type | value }
//	tensor_count × { string name | u32 n_dims | n_dims × u64 ne (innermost first) | u32 ggml_type | u64 offset }
//	padding to the alignment | tensor data (each tensor at data_start + offset, offset aligned)
//
// where a string is u64 length + bytes and an array value is u32 element type,
// u64 count, elements.
package gguf

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// DefaultAlignment is the data alignment used when general.alignment is absent.
const DefaultAlignment = 32

// AlignmentKey is the metadata key that overrides DefaultAlignment.
const AlignmentKey = "general.alignment"

// MaxDims is the largest number of dimensions a GGUF tensor may have
// (ggml's GGML_MAX_DIMS).
const MaxDims = 4

// maxNesting bounds arrays of arrays, so a hostile file cannot recurse deeply.
const maxNesting = 8

// Sentinel errors; every *Error unwraps to exactly one of them.
var (
	// ErrBadMagic: the file does not start with "GGUF".
	ErrBadMagic = errors.New("gguf: bad magic")
	// ErrUnsupported: a well-formed file this reader cannot handle
	// (version 1, an unknown value type or ggml type).
	ErrUnsupported = errors.New("gguf: unsupported")
	// ErrTruncated: a field or tensor data runs past the end of the file.
	ErrTruncated = errors.New("gguf: truncated")
	// ErrCorrupt: a field holds an impossible value (duplicate key, misaligned
	// or overlapping tensor data, too many dimensions, …).
	ErrCorrupt = errors.New("gguf: corrupt")
	// ErrTensorSize: tensor data given to the Writer (AddTensor's slice or
	// what an AddTensorFunc func wrote) is not the size dt and shape imply.
	ErrTensorSize = errors.New("gguf: tensor data size mismatch")
)

// Error describes a problem at one place in one file.
type Error struct {
	Path   string // the name given to Read (the path for Open)
	Offset int64  // absolute byte offset of the offending field
	Msg    string // what was found and what was expected
	Err    error  // one of ErrBadMagic, ErrUnsupported, ErrTruncated, ErrCorrupt, or an I/O error
}

func (e *Error) Error() string {
	return fmt.Sprintf("gguf: %s: offset %d: %s", e.Path, e.Offset, e.Msg)
}

func (e *Error) Unwrap() error { return e.Err }

// File is the parsed header of a GGUF file.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64         // general.alignment or 32
	DataOffset int64         // absolute offset of the tensor data section
	KV         []KV          // in file order
	Tensors    []tensor.Info // Offset ABSOLUTE in the file; Shape outermost-first (ggml ne reversed); Size in bytes

	// byName indexes Tensors as read; lookups verify the hit so a caller that
	// edits Tensors afterwards still gets correct (if slower) answers.
	byName map[string]int
}

// KV is one metadata entry. Value holds one of the Go types listed on
// (*Writer).AddKV.
type KV struct {
	Key   string
	Value any
}

// ValueType is the GGUF metadata value type id (gguf_type).
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("gguf_type(%d)", uint32(t))
}

// size is the encoded size of one value of a fixed-size type, or for string and
// array the smallest possible encoding (used to bound counts by the file size).
func (t ValueType) size() int64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64, TypeString:
		return 8
	case TypeArray:
		return 4 + 8
	}
	return 0
}

// Get returns the value stored under key.
func (f *File) Get(key string) (any, bool) {
	for i := range f.KV {
		if f.KV[i].Key == key {
			return f.KV[i].Value, true
		}
	}
	return nil, false
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Uint returns an integer value of any width or signedness, provided it is >= 0.
// Converters write hyper-parameters as u32 or i32 inconsistently; callers should
// not care which.
func (f *File) Uint(key string) (uint64, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	if i, ok := signed(v); ok && i >= 0 {
		return uint64(i), true
	}
	return 0, false
}

// Int returns an integer value of any type that fits in an int64.
func (f *File) Int(key string) (int64, bool) {
	v, _ := f.Get(key)
	if i, ok := signed(v); ok {
		return i, true
	}
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint64:
		if x <= math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

func signed(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// Float returns a float32 or float64 value, or an integer value converted.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if i, ok := f.Int(key); ok {
		return float64(i), true
	}
	if u, ok := f.Uint(key); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Strings returns a string array. The slice is shared with the File.
func (f *File) Strings(key string) ([]string, bool) {
	v, _ := f.Get(key)
	s, ok := v.([]string)
	return s, ok
}

// Float32s returns a float32 array (shared with the File), or a float64 array
// converted to a new slice.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case []float32:
		return x, true
	case []float64:
		out := make([]float32, len(x))
		for i, e := range x {
			out[i] = float32(e)
		}
		return out, true
	}
	return nil, false
}

// Int32s returns an int32 array (shared with the File), or any other integer
// array converted element-wise to a new slice when every element fits in an
// int32. Token-type and merge-rank arrays come in several widths in the wild.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case []int32:
		return x, true
	case []int8:
		return convertInts(x)
	case []uint8:
		return convertInts(x)
	case []int16:
		return convertInts(x)
	case []uint16:
		return convertInts(x)
	case []uint32:
		return convertInts(x)
	case []int64:
		return convertInts(x)
	case []uint64:
		return convertInts(x)
	}
	return nil, false
}

func convertInts[E int8 | uint8 | int16 | uint16 | uint32 | int64 | uint64](x []E) ([]int32, bool) {
	out := make([]int32, len(x))
	for i, e := range x {
		if int32(e) < 0 != (e < 0) || E(int32(e)) != e {
			return nil, false
		}
		out[i] = int32(e)
	}
	return out, true
}

// Tensor returns the index entry of the named tensor.
func (f *File) Tensor(name string) (tensor.Info, bool) {
	if i, ok := f.byName[name]; ok && i < len(f.Tensors) && f.Tensors[i].Name == name {
		return f.Tensors[i], true
	}
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return tensor.Info{}, false
}

// Arch returns general.architecture, or "" when it is absent.
func (f *File) Arch() string {
	s, _ := f.String("general.architecture")
	return s
}
