package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/sluicehq/sluice/tensor"
)

// Writer builds a GGUF v3 file. KVs and tensors are written in insertion
// order; tensor data is laid out in the same order, each tensor aligned to
// general.alignment if that KV was added, else to 32 bytes.
//
// The Writer keeps references to the data slices given to AddTensor (a model
// can be larger than what one wants to copy); do not modify them before
// WriteTo returns. A model larger than memory goes through AddTensorFunc,
// whose funcs produce each tensor's bytes while WriteTo runs.
type Writer struct {
	kvs     []KV
	keys    map[string]bool
	tensors []wtensor
	names   map[string]bool
	align   int64
}

type wtensor struct {
	info  tensor.Info // Offset relative to the data section
	data  []byte      // AddTensor's bytes, or nil when write is set
	write func(io.Writer) error
}

// NewWriter returns an empty Writer.
func NewWriter() *Writer {
	return &Writer{keys: map[string]bool{}, names: map[string]bool{}, align: DefaultAlignment}
}

// AddKV appends a metadata entry. value must be one of uint8 int8 uint16 int16
// uint32 int32 uint64 int64 float32 float64 bool string, a slice of one of
// those, or an []any whose elements are themselves such slices (an array of
// arrays). Go's int and uint are rejected on purpose: their width is not a GGUF
// type, and guessing would change what readers see.
func (w *Writer) AddKV(key string, value any) error {
	if key == "" {
		return fmt.Errorf("gguf: AddKV: empty key")
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: AddKV %q: %w: duplicate key", key, ErrCorrupt)
	}
	if err := checkValue(value, 0); err != nil {
		return fmt.Errorf("gguf: AddKV %q: %w", key, err)
	}
	if key == AlignmentKey {
		a, err := alignmentOf(value)
		if err != nil {
			return fmt.Errorf("gguf: AddKV %q: %w", key, err)
		}
		w.align = a
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
	return nil
}

// valueType maps a supported Go value to its GGUF type.
func valueType(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []uint64, []int64, []float64, []any:
		return TypeArray, true
	}
	return 0, false
}

// elemType is the GGUF element type of an array value.
func elemType(v any) ValueType {
	switch v.(type) {
	case []uint8:
		return TypeUint8
	case []int8:
		return TypeInt8
	case []uint16:
		return TypeUint16
	case []int16:
		return TypeInt16
	case []uint32:
		return TypeUint32
	case []int32:
		return TypeInt32
	case []float32:
		return TypeFloat32
	case []bool:
		return TypeBool
	case []string:
		return TypeString
	case []uint64:
		return TypeUint64
	case []int64:
		return TypeInt64
	case []float64:
		return TypeFloat64
	}
	return TypeArray // []any
}

func checkValue(v any, depth int) error {
	t, ok := valueType(v)
	if !ok {
		return fmt.Errorf("%w: value of Go type %T (want a sized integer, float32/64, bool, string or a slice of those)", ErrUnsupported, v)
	}
	if t != TypeArray {
		return nil
	}
	if depth >= maxNesting {
		return fmt.Errorf("%w: arrays nested deeper than %d", ErrUnsupported, maxNesting)
	}
	if xs, ok := v.([]any); ok {
		for i, x := range xs {
			if vt, _ := valueType(x); vt != TypeArray {
				return fmt.Errorf("%w: element %d of an array of arrays is %T, want a slice", ErrUnsupported, i, x)
			}
			if err := checkValue(x, depth+1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// AddTensor appends a tensor. shape is outermost first (it is written
// reversed, as ggml's ne); data must be exactly the tensor's byte size for dt.
func (w *Writer) AddTensor(name string, dt tensor.DType, shape []int, data []byte) error {
	size, err := w.checkTensor("AddTensor", name, dt, shape)
	if err != nil {
		return err
	}
	if int64(len(data)) != size {
		return fmt.Errorf("gguf: AddTensor %q: %v %v needs %d bytes, got %d: %w", name, dt, shape, size, len(data), ErrTensorSize)
	}
	w.add(name, dt, shape, size, data, nil)
	return nil
}

// AddTensorFunc appends a tensor whose bytes are produced while the file is
// written, so a converter or generator can stream a model larger than memory
// instead of handing every tensor's bytes to AddTensor up front. The size is
// fixed now from dt and shape (dt.RowBytes of the innermost dimension times
// the number of rows); WriteTo calls write once, in tensor order, with a
// writer positioned at the tensor's (aligned) data, and handles the padding
// around it. write must write exactly the tensor's bytes and must not keep
// the writer: WriteTo fails, naming the tensor and wrapping ErrTensorSize,
// if it writes more or fewer, and wraps any error write returns. Each call
// of WriteTo or WriteFile calls write again.
func (w *Writer) AddTensorFunc(name string, dt tensor.DType, shape []int, write func(io.Writer) error) error {
	size, err := w.checkTensor("AddTensorFunc", name, dt, shape)
	if err != nil {
		return err
	}
	if write == nil {
		return fmt.Errorf("gguf: AddTensorFunc %q: nil write func", name)
	}
	w.add(name, dt, shape, size, nil, write)
	return nil
}

// checkTensor validates a tensor about to be added and returns its byte size.
func (w *Writer) checkTensor(op, name string, dt tensor.DType, shape []int) (int64, error) {
	if name == "" {
		return 0, fmt.Errorf("gguf: %s: empty name", op)
	}
	if w.names[name] {
		return 0, fmt.Errorf("gguf: %s %q: %w: duplicate tensor name", op, name, ErrCorrupt)
	}
	if len(shape) < 1 || len(shape) > MaxDims {
		return 0, fmt.Errorf("gguf: %s %q: %w: %d dimensions, want 1..%d", op, name, ErrUnsupported, len(shape), MaxDims)
	}
	elems := int64(1)
	for _, n := range shape {
		if n < 1 || n > math.MaxInt32 {
			return 0, fmt.Errorf("gguf: %s %q: %w: shape %v has a dimension outside 1..%d", op, name, ErrCorrupt, shape, math.MaxInt32)
		}
		if elems > math.MaxInt64/int64(n) {
			return 0, fmt.Errorf("gguf: %s %q: %w: shape %v overflows int64", op, name, ErrCorrupt, shape)
		}
		elems *= int64(n)
	}
	cols := shape[len(shape)-1]
	row, err := dt.RowBytes(cols)
	if err != nil {
		return 0, fmt.Errorf("gguf: %s %q: %w", op, name, err)
	}
	rows := elems / int64(cols)
	if row != 0 && rows > math.MaxInt64/row {
		return 0, fmt.Errorf("gguf: %s %q: %w: byte size overflows int64", op, name, ErrCorrupt)
	}
	return rows * row, nil
}

func (w *Writer) add(name string, dt tensor.DType, shape []int, size int64, data []byte, write func(io.Writer) error) {
	w.names[name] = true
	w.tensors = append(w.tensors, wtensor{
		info:  tensor.Info{Name: name, DType: dt, Shape: append([]int(nil), shape...), Size: size},
		data:  data,
		write: write,
	})
}

// countingWriter tracks the bytes written and the first error, so the
// encoding code below can stay linear.
type countingWriter struct {
	w   *bufio.Writer
	n   int64
	err error
	tmp [8]byte
}

func (c *countingWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.err = err
}

func (c *countingWriter) u8(v uint8) { c.tmp[0] = v; c.write(c.tmp[:1]) }
func (c *countingWriter) u16(v uint16) {
	binary.LittleEndian.PutUint16(c.tmp[:], v)
	c.write(c.tmp[:2])
}
func (c *countingWriter) u32(v uint32) {
	binary.LittleEndian.PutUint32(c.tmp[:], v)
	c.write(c.tmp[:4])
}
func (c *countingWriter) u64(v uint64) {
	binary.LittleEndian.PutUint64(c.tmp[:], v)
	c.write(c.tmp[:8])
}
func (c *countingWriter) str(s string) {
	c.u64(uint64(len(s)))
	if c.err == nil {
		n, err := c.w.WriteString(s)
		c.n += int64(n)
		c.err = err
	}
}
func (c *countingWriter) pad(align int64) {
	var zero [64]byte
	for c.n%align != 0 && c.err == nil {
		c.write(zero[:min(int64(len(zero)), align-c.n%align)])
	}
}

// stream writes a tensor added by AddTensorFunc through a tensorWriter that
// holds its func to the declared size.
func (c *countingWriter) stream(t *wtensor) {
	if c.err != nil {
		return
	}
	tw := &tensorWriter{c: c, info: &t.info}
	err := t.write(tw)
	switch {
	case c.err != nil: // the output failed; err, if any, is likely its echo
		c.err = fmt.Errorf("tensor %q: %w", t.info.Name, c.err)
	case err != nil:
		c.err = fmt.Errorf("tensor %q: %w", t.info.Name, err)
	case tw.over || tw.n != t.info.Size:
		wrote := fmt.Sprint(tw.n)
		if tw.over {
			wrote = "more"
		}
		c.err = fmt.Errorf("tensor %q: %w: %v %v needs %d bytes, its write func wrote %s", t.info.Name, ErrTensorSize, t.info.DType, t.info.Shape, t.info.Size, wrote)
	}
}

// tensorWriter is the io.Writer an AddTensorFunc func writes to. It refuses
// bytes past the tensor's size, so an over-long func cannot shift the data
// after it before stream notices.
type tensorWriter struct {
	c    *countingWriter
	info *tensor.Info
	n    int64 // bytes written so far
	over bool  // a write past size was refused
}

func (tw *tensorWriter) Write(p []byte) (int, error) {
	if tw.c.err != nil {
		return 0, tw.c.err
	}
	if t := tw.info; int64(len(p)) > t.Size-tw.n {
		tw.over = true
		return 0, fmt.Errorf("%w: %v %v needs %d bytes, its write func wrote more (%d after %d)", ErrTensorSize, t.DType, t.Shape, t.Size, len(p), tw.n)
	}
	before := tw.c.n
	tw.c.write(p)
	tw.n += tw.c.n - before
	return int(tw.c.n - before), tw.c.err
}

// WriteTo writes the whole file to out and returns the bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	n, err := w.writeTo(out)
	if err != nil {
		return n, fmt.Errorf("gguf: write: %w", err)
	}
	return n, nil
}

func (w *Writer) writeTo(out io.Writer) (int64, error) {
	c := &countingWriter{w: bufio.NewWriterSize(out, 1<<20)}
	c.write([]byte("GGUF"))
	c.u32(3)
	c.u64(uint64(len(w.tensors)))
	c.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		c.str(kv.Key)
		t, _ := valueType(kv.Value)
		c.u32(uint32(t))
		writeValue(c, kv.Value)
	}
	var rel int64
	for i := range w.tensors {
		t := &w.tensors[i].info
		t.Offset = rel
		c.str(t.Name)
		c.u32(uint32(len(t.Shape)))
		for j := len(t.Shape) - 1; j >= 0; j-- {
			c.u64(uint64(t.Shape[j]))
		}
		c.u32(uint32(t.DType))
		c.u64(uint64(rel))
		rel = alignUp(rel+t.Size, w.align)
	}
	if len(w.tensors) > 0 {
		c.pad(w.align)
	}
	for i := range w.tensors {
		t := &w.tensors[i]
		if t.write != nil {
			c.stream(t)
		} else {
			c.write(t.data)
		}
		if i < len(w.tensors)-1 {
			c.pad(w.align)
		}
	}
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.n, c.err
}

func writeValue(c *countingWriter, v any) {
	switch x := v.(type) {
	case uint8:
		c.u8(x)
	case int8:
		c.u8(uint8(x))
	case uint16:
		c.u16(x)
	case int16:
		c.u16(uint16(x))
	case uint32:
		c.u32(x)
	case int32:
		c.u32(uint32(x))
	case float32:
		c.u32(math.Float32bits(x))
	case bool:
		if x {
			c.u8(1)
		} else {
			c.u8(0)
		}
	case string:
		c.str(x)
	case uint64:
		c.u64(x)
	case int64:
		c.u64(uint64(x))
	case float64:
		c.u64(math.Float64bits(x))
	default:
		c.u32(uint32(elemType(v)))
		switch xs := v.(type) {
		case []uint8:
			c.u64(uint64(len(xs)))
			c.write(xs)
		case []int8:
			writeFixed(c, xs, 1, func(b []byte, e int8) { b[0] = byte(e) })
		case []uint16:
			writeFixed(c, xs, 2, binary.LittleEndian.PutUint16)
		case []int16:
			writeFixed(c, xs, 2, func(b []byte, e int16) { binary.LittleEndian.PutUint16(b, uint16(e)) })
		case []uint32:
			writeFixed(c, xs, 4, binary.LittleEndian.PutUint32)
		case []int32:
			writeFixed(c, xs, 4, func(b []byte, e int32) { binary.LittleEndian.PutUint32(b, uint32(e)) })
		case []float32:
			writeFixed(c, xs, 4, func(b []byte, e float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(e)) })
		case []bool:
			writeFixed(c, xs, 1, func(b []byte, e bool) {
				b[0] = 0
				if e {
					b[0] = 1
				}
			})
		case []string:
			c.u64(uint64(len(xs)))
			for _, e := range xs {
				c.str(e)
			}
		case []uint64:
			writeFixed(c, xs, 8, binary.LittleEndian.PutUint64)
		case []int64:
			writeFixed(c, xs, 8, func(b []byte, e int64) { binary.LittleEndian.PutUint64(b, uint64(e)) })
		case []float64:
			writeFixed(c, xs, 8, func(b []byte, e float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(e)) })
		case []any:
			c.u64(uint64(len(xs)))
			for _, e := range xs {
				writeValue(c, e)
			}
		}
	}
}

// writeFixed writes the count and the elements of a fixed-size array, encoded
// a chunk at a time (elements of an array carry no type field).
func writeFixed[E any](c *countingWriter, xs []E, esz int, put func([]byte, E)) {
	c.u64(uint64(len(xs)))
	var chunk [4096]byte
	for i := 0; i < len(xs); {
		k := min(len(xs)-i, len(chunk)/esz)
		for j := range k {
			put(chunk[j*esz:], xs[i+j])
		}
		c.write(chunk[:k*esz])
		i += k
	}
}

// WriteFile writes the file to path+".tmp", syncs it and renames it over
// path, so a crash never leaves a half-written model under the real name.
func (w *Writer) WriteFile(path string) error {
	tmp := path + ".tmp"
	fh, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	_, err = w.writeTo(fh)
	if err == nil {
		err = fh.Sync()
	}
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("gguf: write %s: %w", path, err)
	}
	return nil
}
