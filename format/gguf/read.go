package gguf

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/sluicehq/sluice/tensor"
)

// Open reads the header, metadata and tensor index of the GGUF file at path.
// Tensor data is not read.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return Read(fh, st.Size(), path)
}

// Read parses a GGUF file of size bytes from r. name identifies the file in
// errors and becomes File.Path. Every tensor's data range is checked to lie
// inside the file, aligned and not overlapping another's.
func Read(r io.ReaderAt, size int64, name string) (*File, error) {
	d := &decoder{r: r, size: size, name: name}
	f, err := d.file()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// bufSize is the read window: big enough that a 50k-entry vocabulary is read
// in a few dozen ReadAt calls, small enough to be irrelevant next to a model.
const bufSize = 64 << 10

// decoder is a forward-only reader over an io.ReaderAt that tracks the
// absolute offset for error messages and knows how many bytes remain, so that
// every count can be validated before it is used to allocate.
type decoder struct {
	r    io.ReaderAt
	size int64
	name string

	off    int64  // absolute offset of the next byte to decode
	buf    []byte // file bytes [bufOff, bufOff+len(buf))
	bufOff int64
}

func (d *decoder) errAt(off int64, sentinel error, format string, args ...any) *Error {
	return &Error{Path: d.name, Offset: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

func (d *decoder) remaining() int64 { return d.size - d.off }

// next returns the next n bytes (n <= bufSize) and advances past them. The
// slice is valid until the next call. what names the field for the error.
func (d *decoder) next(n int, what string) ([]byte, error) {
	if int64(n) > d.remaining() {
		return nil, d.truncated(int64(n), what)
	}
	start := d.off - d.bufOff
	if start < 0 || start+int64(n) > int64(len(d.buf)) {
		if err := d.fill(n); err != nil {
			return nil, d.errAt(d.off, err, "reading %s: %v", what, err)
		}
		start = 0
	}
	d.off += int64(n)
	return d.buf[start : start+int64(n)], nil
}

// fill loads the window starting at d.off with at least n bytes (n is known to
// be available in the file).
func (d *decoder) fill(n int) error {
	want := min(int64(bufSize), d.remaining())
	want = max(want, int64(n))
	if int64(cap(d.buf)) < want {
		d.buf = make([]byte, want)
	}
	d.buf = d.buf[:want]
	d.bufOff = d.off
	got, err := d.r.ReadAt(d.buf, d.off)
	if got == len(d.buf) {
		return nil
	}
	d.buf = d.buf[:got]
	if err == nil || errors.Is(err, io.EOF) {
		// The reader is shorter than the size we were given.
		return fmt.Errorf("%w: read %d of %d bytes", ErrTruncated, got, want)
	}
	return err
}

func (d *decoder) truncated(n int64, what string) *Error {
	return d.errAt(d.off, ErrTruncated, "%s: want %d bytes at [%d,+%d), but the file ends at %d", what, n, d.off, n, d.size)
}

func (d *decoder) u32(what string) (uint32, error) {
	b, err := d.next(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64(what string) (uint64, error) {
	b, err := d.next(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a GGUF string, checking its length against the bytes left.
func (d *decoder) str(what string) (string, error) {
	at := d.off
	if d.remaining() < 8 { // checked here so the hot path builds no message
		return "", d.truncated(8, what+" length")
	}
	n, err := d.u64(what)
	if err != nil {
		return "", err
	}
	if n > uint64(d.remaining()) {
		return "", d.errAt(at, ErrTruncated, "%s: length %d runs past end of file (%d bytes left after offset %d, size %d)", what, n, d.remaining(), d.off, d.size)
	}
	if n <= bufSize {
		b, err := d.next(int(n), what)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
	b := make([]byte, n)
	if err := d.readFull(b, what); err != nil {
		return "", err
	}
	return string(b), nil
}

// readFull reads len(b) bytes (already validated against the file size)
// bypassing the window.
func (d *decoder) readFull(b []byte, what string) error {
	got, err := d.r.ReadAt(b, d.off)
	if got < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: read %d of %d bytes", ErrTruncated, got, len(b))
		}
		return d.errAt(d.off, err, "reading %s: %v", what, err)
	}
	d.off += int64(len(b))
	return nil
}

func (d *decoder) file() (*File, error) {
	magic, err := d.next(4, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != "GGUF" {
		return nil, d.errAt(0, ErrBadMagic, "magic %q, want \"GGUF\"", magic)
	}
	version, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	if version != 2 && version != 3 {
		return nil, d.errAt(4, ErrUnsupported, "version %d is unsupported (want 2 or 3)", version)
	}
	f := &File{Path: d.name, Version: version, Alignment: DefaultAlignment}

	nTensors, err := d.u64("tensor_count")
	if err != nil {
		return nil, err
	}
	nKV, err := d.u64("kv_count")
	if err != nil {
		return nil, err
	}
	// The smallest KV is an empty key, a type and a 1-byte value; the smallest
	// tensor entry an empty name, n_dims, one ne, type and offset. Bounding the
	// counts by the bytes left keeps the slices below proportional to the file.
	const minKV, minTensor = 8 + 4 + 1, 8 + 4 + 8 + 4 + 8
	if nKV > uint64(d.remaining())/minKV {
		return nil, d.errAt(16, ErrTruncated, "kv_count %d needs at least %d bytes, but only %d are left before the end of file (size %d)",
			nKV, satMul(nKV, minKV), d.remaining(), d.size)
	}
	if left := uint64(d.remaining()) - nKV*minKV; nTensors > left/minTensor {
		return nil, d.errAt(8, ErrTruncated, "tensor_count %d needs at least %d bytes after %d KVs, but only %d are left before the end of file (size %d)",
			nTensors, satMul(nTensors, minTensor), nKV, left, d.size)
	}

	f.KV = make([]KV, 0, nKV)
	seen := make(map[string]int64, nKV)
	for i := range nKV {
		at := d.off
		key, err := d.str(fmt.Sprintf("kv[%d] key", i))
		if err != nil {
			return nil, err
		}
		if prev, dup := seen[key]; dup {
			return nil, d.errAt(at, ErrCorrupt, "duplicate key %q (first at offset %d)", key, prev)
		}
		seen[key] = at
		typAt := d.off
		typ, err := d.u32(fmt.Sprintf("kv %q type", key))
		if err != nil {
			return nil, err
		}
		v, err := d.value(ValueType(typ), typAt, key, 0)
		if err != nil {
			return nil, err
		}
		if key == AlignmentKey {
			a, err := alignmentOf(v)
			if err != nil {
				return nil, d.errAt(typAt, ErrCorrupt, "%s: %v", AlignmentKey, err)
			}
			f.Alignment = a
		}
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}

	if err := d.tensorIndex(f, nTensors); err != nil {
		return nil, err
	}
	return f, nil
}

// alignmentOf validates a general.alignment value: a positive power of two.
func alignmentOf(v any) (int64, error) {
	var a uint64
	switch x := v.(type) {
	case uint8:
		a = uint64(x)
	case uint16:
		a = uint64(x)
	case uint32:
		a = uint64(x)
	case uint64:
		a = x
	case int8, int16, int32, int64:
		i, _ := signed(v)
		if i < 0 {
			return 0, fmt.Errorf("alignment %d, want a positive power of two", i)
		}
		a = uint64(i)
	default:
		return 0, fmt.Errorf("value of type %T, want an unsigned integer", v)
	}
	if a == 0 || a&(a-1) != 0 || a > 1<<30 {
		return 0, fmt.Errorf("alignment %d, want a power of two in [1, 2^30]", a)
	}
	return int64(a), nil
}

// value decodes one value of type typ; typAt is the offset of its type field
// (for errors), key the KV it belongs to.
func (d *decoder) value(typ ValueType, typAt int64, key string, depth int) (any, error) {
	what := func() string { return fmt.Sprintf("kv %q %v value", key, typ) }
	switch typ {
	case TypeString:
		return d.str(what())
	case TypeArray:
		return d.array(key, depth)
	}
	sz := typ.size()
	if sz == 0 {
		return nil, d.errAt(typAt, ErrUnsupported, "kv %q: unknown value type %d (want 0..12)", key, uint32(typ))
	}
	b, err := d.next(int(sz), what())
	if err != nil {
		return nil, err
	}
	switch typ {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeUint16:
		return binary.LittleEndian.Uint16(b), nil
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case TypeUint32:
		return binary.LittleEndian.Uint32(b), nil
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, d.errAt(d.off-1, ErrCorrupt, "kv %q: bool byte %d, want 0 or 1", key, b[0])
		}
		return b[0] == 1, nil
	case TypeUint64:
		return binary.LittleEndian.Uint64(b), nil
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	default: // TypeFloat64
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
}

// array decodes an array value (element type, count, elements) as a typed
// slice, or []any for arrays of arrays. Fixed-size elements are decoded
// straight from the read window: no reflection, no per-element calls.
func (d *decoder) array(key string, depth int) (any, error) {
	if depth >= maxNesting {
		return nil, d.errAt(d.off, ErrUnsupported, "kv %q: arrays nested deeper than %d", key, maxNesting)
	}
	typAt := d.off
	et32, err := d.u32(fmt.Sprintf("kv %q array element type", key))
	if err != nil {
		return nil, err
	}
	et := ValueType(et32)
	esz := et.size()
	if esz == 0 {
		return nil, d.errAt(typAt, ErrUnsupported, "kv %q: unknown array element type %d (want 0..12)", key, et32)
	}
	countAt := d.off
	count, err := d.u64(fmt.Sprintf("kv %q array count", key))
	if err != nil {
		return nil, err
	}
	if count > uint64(d.remaining())/uint64(esz) {
		return nil, d.errAt(countAt, ErrTruncated, "kv %q: array of %d %v needs at least %d bytes, but only %d are left before the end of file (size %d)",
			key, count, et, satMul(count, uint64(esz)), d.remaining(), d.size)
	}
	n := int(count)
	switch et {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			s, err := d.str("string")
			if err != nil {
				// Context is added only on failure: formatting it per
				// element would dominate parsing a 50k-token vocabulary.
				if e, ok := errors.AsType[*Error](err); ok {
					e.Msg = fmt.Sprintf("kv %q element %d of %d: %s", key, i, n, e.Msg)
				}
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	case TypeArray:
		out := make([]any, n)
		for i := range out {
			v, err := d.array(key, depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case TypeUint8:
		return decodeFixed(d, key, n, 1, func(b []byte) uint8 { return b[0] })
	case TypeInt8:
		return decodeFixed(d, key, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case TypeUint16:
		return decodeFixed(d, key, n, 2, binary.LittleEndian.Uint16)
	case TypeInt16:
		return decodeFixed(d, key, n, 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case TypeUint32:
		return decodeFixed(d, key, n, 4, binary.LittleEndian.Uint32)
	case TypeInt32:
		return decodeFixed(d, key, n, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case TypeFloat32:
		return decodeFixed(d, key, n, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case TypeUint64:
		return decodeFixed(d, key, n, 8, binary.LittleEndian.Uint64)
	case TypeInt64:
		return decodeFixed(d, key, n, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	case TypeFloat64:
		return decodeFixed(d, key, n, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	default: // TypeBool
		return d.bools(key, n)
	}
}

// bools decodes a bool array, accepting only the bytes 0 and 1.
func (d *decoder) bools(key string, n int) ([]bool, error) {
	out := make([]bool, n)
	for i := 0; i < n; i += bufSize {
		k := min(bufSize, n-i)
		at := d.off
		b, err := d.next(k, fmt.Sprintf("kv %q elements %d..%d of %d", key, i, i+k-1, n))
		if err != nil {
			return nil, err
		}
		for j, c := range b {
			if c > 1 {
				return nil, d.errAt(at+int64(j), ErrCorrupt, "kv %q: element %d: bool byte %d, want 0 or 1", key, i+j, c)
			}
			out[i+j] = c == 1
		}
	}
	return out, nil
}

// decodeFixed decodes n elements of esz bytes each, window by window. The count
// was validated against the file size by the caller.
func decodeFixed[E any](d *decoder, key string, n, esz int, dec func([]byte) E) ([]E, error) {
	out := make([]E, n)
	per := bufSize / esz
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		b, err := d.next(k*esz, fmt.Sprintf("kv %q elements %d..%d of %d", key, i, i+k-1, n))
		if err != nil {
			return nil, err
		}
		for j := range k {
			out[i+j] = dec(b[j*esz:])
		}
	}
	return out, nil
}

func satMul(a, b uint64) uint64 {
	if b != 0 && a > math.MaxUint64/b {
		return math.MaxUint64
	}
	return a * b
}

// tensorIndex reads nTensors tensor entries, places the data section and
// validates every tensor's data range.
func (d *decoder) tensorIndex(f *File, nTensors uint64) error {
	f.Tensors = make([]tensor.Info, 0, nTensors)
	f.byName = make(map[string]int, nTensors)
	entryAt := make([]int64, 0, nTensors) // offset of each entry's offset field, for errors
	for i := range nTensors {
		at := d.off
		name, err := d.str(fmt.Sprintf("tensor[%d] name", i))
		if err != nil {
			return err
		}
		if j, dup := f.byName[name]; dup {
			return d.errAt(at, ErrCorrupt, "duplicate tensor name %q (first is tensor[%d])", name, j)
		}
		ndAt := d.off
		nd, err := d.u32(fmt.Sprintf("tensor %q n_dims", name))
		if err != nil {
			return err
		}
		if nd < 1 || nd > MaxDims {
			return d.errAt(ndAt, ErrCorrupt, "tensor %q: n_dims %d, want 1..%d", name, nd, MaxDims)
		}
		shape := make([]int, nd)
		elems := int64(1)
		var inner int64
		for j := range int(nd) {
			neAt := d.off
			ne, err := d.u64(fmt.Sprintf("tensor %q ne[%d]", name, j))
			if err != nil {
				return err
			}
			if ne == 0 || ne > math.MaxInt32 {
				return d.errAt(neAt, ErrCorrupt, "tensor %q: ne[%d] = %d, want 1..%d", name, j, ne, math.MaxInt32)
			}
			if elems > math.MaxInt64/int64(ne) {
				return d.errAt(neAt, ErrCorrupt, "tensor %q: element count overflows int64", name)
			}
			elems *= int64(ne)
			if j == 0 {
				inner = int64(ne)
			}
			shape[int(nd)-1-j] = int(ne) // ggml lists innermost first; we store outermost first
		}
		typAt := d.off
		typ, err := d.u32(fmt.Sprintf("tensor %q ggml_type", name))
		if err != nil {
			return err
		}
		dt := tensor.DType(typ)
		rowSize, known, err := rowBytes(dt, inner)
		if !known {
			return d.errAt(typAt, ErrUnsupported, "tensor %q: unknown ggml type %d", name, typ)
		}
		if err != nil {
			return d.errAt(typAt, ErrCorrupt, "tensor %q: shape %v of %s: %v", name, shape, TypeName(dt), err)
		}
		rows := elems / inner
		if rowSize != 0 && rows > math.MaxInt64/rowSize {
			return d.errAt(typAt, ErrCorrupt, "tensor %q: byte size overflows int64", name)
		}
		offAt := d.off
		rel, err := d.u64(fmt.Sprintf("tensor %q offset", name))
		if err != nil {
			return err
		}
		if rel > math.MaxInt64/2 {
			return d.errAt(offAt, ErrCorrupt, "tensor %q: data offset %d is impossibly large (size %d)", name, rel, d.size)
		}
		f.byName[name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, tensor.Info{Name: name, DType: dt, Shape: shape, Offset: int64(rel), Size: rows * rowSize})
		entryAt = append(entryAt, offAt)
	}

	f.DataOffset = alignUp(d.off, f.Alignment)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset%f.Alignment != 0 {
			return d.errAt(entryAt[i], ErrCorrupt, "tensor %q: data offset %d is not a multiple of the alignment %d", t.Name, t.Offset, f.Alignment)
		}
		t.Offset += f.DataOffset
		if t.Size > d.size || t.Offset > d.size-t.Size {
			return d.errAt(entryAt[i], ErrTruncated, "tensor %q data [%d,+%d) runs past end of file (size %d)", t.Name, t.Offset, t.Size, d.size)
		}
	}
	// Overlap check in offset order (files are normally already sorted).
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(f.Tensors[a].Offset, f.Tensors[b].Offset)
	})
	for k := 1; k < len(order); k++ {
		prev, cur := f.Tensors[order[k-1]], f.Tensors[order[k]]
		if cur.Offset < prev.Offset+prev.Size {
			return d.errAt(entryAt[order[k]], ErrCorrupt, "tensor %q data [%d,+%d) overlaps tensor %q data [%d,+%d)",
				cur.Name, cur.Offset, cur.Size, prev.Name, prev.Offset, prev.Size)
		}
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
