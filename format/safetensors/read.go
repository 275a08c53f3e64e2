package safetensors

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"github.com/sluicehq/sluice/tensor"
)

// File is the parsed header of one safetensors file.
type File struct {
	Path        string
	Size        int64             // bytes in the file
	HeaderBytes int64             // N, the JSON header length (padding included)
	DataOffset  int64             // 8 + N: absolute offset of the data section
	Metadata    map[string]string // "__metadata__", nil when absent
	Tensors     []tensor.Info     // sorted by Offset; Offset ABSOLUTE in the file; Shape outermost first

	byName map[string]int
	src    io.ReaderAt // set by Read; Open leaves it nil and reopens Path on demand
}

// Open parses the header of the safetensors file at path. The file is closed
// before Open returns; ReadF32 reopens it.
func Open(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Msg: err.Error(), Err: err}
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Msg: err.Error(), Err: err}
	}
	f, err := Read(fh, st.Size(), path)
	if err != nil {
		return nil, err
	}
	f.src = nil // fh is closed on return
	return f, nil
}

// Read parses a safetensors header from r, a file of size bytes. path is used in
// error messages and kept as File.Path; r is kept for ReadF32.
func Read(r io.ReaderAt, size int64, path string) (*File, error) {
	bad := func(off int64, sentinel error, format string, args ...any) error {
		return &Error{Path: path, Offset: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
	}
	if size < 8 {
		return nil, bad(0, ErrTruncated, "file is %d bytes, want at least 8 for the header length", size)
	}
	var lenBuf [8]byte
	if err := readFull(r, lenBuf[:], 0); err != nil {
		return nil, &Error{Path: path, Offset: 0, Msg: "read header length: " + err.Error(), Err: err}
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) {
		return nil, bad(0, ErrTruncated, "header length %d runs past the end of the file (%d bytes after the length)", n, size-8)
	}
	if n > MaxHeaderBytes {
		return nil, bad(0, ErrCorrupt, "header length %d exceeds the %d-byte limit", n, MaxHeaderBytes)
	}
	hdr := make([]byte, n)
	if err := readFull(r, hdr, 8); err != nil {
		return nil, &Error{Path: path, Offset: 8, Msg: "read header: " + err.Error(), Err: err}
	}
	f := &File{Path: path, Size: size, HeaderBytes: int64(n), DataOffset: 8 + int64(n), src: r}
	if err := f.parseHeader(hdr); err != nil {
		return nil, err
	}
	return f, nil
}

// entry is one tensor's header object. Pointers tell "missing" from "empty".
type entry struct {
	DType   *string  `json:"dtype"`
	Shape   *[]int64 `json:"shape"`
	Offsets *[]int64 `json:"data_offsets"`
}

// parseHeader walks the header object token by token, so duplicate keys are
// caught and every error can point at the key it concerns.
func (f *File) parseHeader(hdr []byte) error {
	const base = 8 // the header starts after the length prefix
	bad := func(off int64, sentinel error, format string, args ...any) error {
		return &Error{Path: f.Path, Offset: off, Msg: fmt.Sprintf(format, args...), Err: sentinel}
	}
	jsonErr := func(err error, at int64) error {
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			return bad(base+se.Offset, ErrCorrupt, "bad JSON header: %v", se)
		}
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return bad(base+at+te.Offset, ErrCorrupt, "bad JSON header: %v", te)
		}
		return bad(base+at, ErrCorrupt, "bad JSON header: %v", err)
	}
	// skip returns the offset of the next significant byte at or after off,
	// stepping over whitespace and the separators the decoder has not consumed.
	skip := func(off int64) int64 {
		for off < int64(len(hdr)) {
			switch hdr[off] {
			case ' ', '\t', '\r', '\n', ',', ':':
				off++
				continue
			}
			break
		}
		return off
	}

	start := skip(0)
	if start >= int64(len(hdr)) || hdr[start] != '{' {
		return bad(base+start, ErrCorrupt, "header must be a JSON object starting with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	if _, err := dec.Token(); err != nil {
		return jsonErr(err, 0)
	}
	dataSize := f.Size - f.DataOffset
	f.byName = map[string]int{}
	keyAt := map[string]int64{}
	for dec.More() {
		at := skip(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return jsonErr(err, at)
		}
		name, ok := tok.(string)
		if !ok {
			return bad(base+at, ErrCorrupt, "header key is %v, want a string", tok)
		}
		if prev, dup := keyAt[name]; dup {
			return bad(base+at, ErrCorrupt, "key %q appears twice (first at offset %d)", name, base+prev)
		}
		keyAt[name] = at
		valAt := skip(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return jsonErr(err, valAt)
		}
		if name == MetadataKey {
			if err := json.Unmarshal(raw, &f.Metadata); err != nil {
				return bad(base+valAt, ErrCorrupt, "%s must map strings to strings: %v", MetadataKey, err)
			}
			continue
		}
		info, err := f.parseEntry(name, raw, base+at, dataSize)
		if err != nil {
			return err
		}
		f.Tensors = append(f.Tensors, info)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return jsonErr(err, dec.InputOffset())
	}
	if rest := skip(dec.InputOffset()); rest < int64(len(hdr)) {
		return bad(base+rest, ErrCorrupt, "trailing bytes after the JSON header object")
	}

	slices.SortFunc(f.Tensors, func(a, b tensor.Info) int {
		return cmp.Or(cmp.Compare(a.Offset, b.Offset), cmp.Compare(a.Size, b.Size), cmp.Compare(a.Name, b.Name))
	})
	var prev *tensor.Info
	for i := range f.Tensors {
		t := &f.Tensors[i]
		f.byName[t.Name] = i
		if t.Size == 0 {
			continue // an empty tensor occupies no bytes and overlaps nothing
		}
		if prev != nil && prev.Offset+prev.Size > t.Offset {
			return bad(base+keyAt[t.Name], ErrCorrupt, "tensor %q data [%d,%d) overlaps tensor %q data [%d,%d)",
				t.Name, t.Offset-f.DataOffset, t.Offset+t.Size-f.DataOffset,
				prev.Name, prev.Offset-f.DataOffset, prev.Offset+prev.Size-f.DataOffset)
		}
		prev = t
	}
	return nil
}

// parseEntry validates one tensor entry; at is the absolute offset of its key.
func (f *File) parseEntry(name string, raw json.RawMessage, at, dataSize int64) (tensor.Info, error) {
	bad := func(sentinel error, format string, args ...any) error {
		return &Error{Path: f.Path, Offset: at, Msg: fmt.Sprintf("tensor %q: ", name) + fmt.Sprintf(format, args...), Err: sentinel}
	}
	if name == "" {
		return tensor.Info{}, bad(ErrCorrupt, "empty tensor name")
	}
	var e entry
	if err := json.Unmarshal(raw, &e); err != nil {
		return tensor.Info{}, bad(ErrCorrupt, "want {\"dtype\", \"shape\", \"data_offsets\"}: %v", err)
	}
	switch {
	case e.DType == nil:
		return tensor.Info{}, bad(ErrCorrupt, "missing \"dtype\"")
	case e.Shape == nil:
		return tensor.Info{}, bad(ErrCorrupt, "missing \"shape\"")
	case e.Offsets == nil:
		return tensor.Info{}, bad(ErrCorrupt, "missing \"data_offsets\"")
	}
	dt, ok := dtypes[*e.DType]
	if !ok {
		return tensor.Info{}, &Error{Path: f.Path, Offset: at, Err: ErrUnsupported,
			Msg: fmt.Sprintf("unknown safetensors dtype %s in %s:%s (want F32, F16 or BF16)", *e.DType, f.Path, name)}
	}
	esize := int64(dt.BlockBytes())
	shape := make([]int, len(*e.Shape))
	elems := int64(1)
	for i, d := range *e.Shape {
		if d < 0 {
			return tensor.Info{}, bad(ErrCorrupt, "shape %v has a negative dimension", *e.Shape)
		}
		if d > 0 && elems > math.MaxInt64/esize/d {
			return tensor.Info{}, bad(ErrCorrupt, "shape %v is too large", *e.Shape)
		}
		elems *= d
		shape[i] = int(d)
	}
	off := *e.Offsets
	if len(off) != 2 {
		return tensor.Info{}, bad(ErrCorrupt, "data_offsets has %d values, want [begin, end]", len(off))
	}
	begin, end := off[0], off[1]
	switch {
	case begin < 0 || end < begin:
		return tensor.Info{}, bad(ErrCorrupt, "data_offsets [%d, %d] are reversed or negative", begin, end)
	case end > dataSize:
		return tensor.Info{}, bad(ErrTruncated, "data_offsets [%d, %d] run past the end of the data section (%d bytes)", begin, end, dataSize)
	case end-begin != elems*esize:
		return tensor.Info{}, bad(ErrCorrupt, "data_offsets [%d, %d] hold %d bytes, but shape %v of %s needs %d",
			begin, end, end-begin, shape, *e.DType, elems*esize)
	}
	return tensor.Info{Name: name, DType: dt, Shape: shape, Offset: f.DataOffset + begin, Size: end - begin}, nil
}

// Tensor returns the index entry of the named tensor.
func (f *File) Tensor(name string) (tensor.Info, bool) {
	if i, ok := f.byName[name]; ok && i < len(f.Tensors) && f.Tensors[i].Name == name {
		return f.Tensors[i], true
	}
	for _, t := range f.Tensors { // Tensors edited by the caller: fall back to a scan
		if t.Name == name {
			return t, true
		}
	}
	return tensor.Info{}, false
}

// Names lists the tensor names in file order.
func (f *File) Names() []string {
	out := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		out[i] = t.Name
	}
	return out
}

// ReadF32 reads the named tensor and widens it to float32.
func (f *File) ReadF32(name string) ([]float32, error) {
	info, ok := f.Tensor(name)
	if !ok {
		return nil, &Error{Path: f.Path, Offset: -1, Msg: fmt.Sprintf("no tensor %q", name), Err: os.ErrNotExist}
	}
	r := f.src
	if r == nil {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, &Error{Path: f.Path, Offset: -1, Msg: err.Error(), Err: err}
		}
		defer fh.Close()
		r = fh
	}
	return ReadF32(r, f.Path, info)
}

// ReadF32 reads the tensor described by info from r (a file named path, for
// errors) and widens F16/BF16 to float32.
func ReadF32(r io.ReaderAt, path string, info tensor.Info) ([]float32, error) {
	esize := int64(info.DType.BlockBytes())
	if _, ok := DTypeName(info.DType); !ok || info.Size != info.Elements()*esize {
		return nil, &Error{Path: path, Offset: info.Offset, Err: ErrUnsupported,
			Msg: fmt.Sprintf("tensor %q: cannot read %v shape %v (%d bytes) as float32", info.Name, info.DType, info.Shape, info.Size)}
	}
	buf := make([]byte, info.Size)
	if err := readFull(r, buf, info.Offset); err != nil {
		return nil, &Error{Path: path, Offset: info.Offset, Msg: fmt.Sprintf("tensor %q: read %d bytes: %v", info.Name, info.Size, err), Err: err}
	}
	n := int(info.Elements())
	out := make([]float32, n)
	tensor.DequantizeRow(out, buf, info.DType, n)
	return out, nil
}

// readFull is ReadAt that accepts io.EOF alongside a full read (the io.ReaderAt
// contract allows it) and reports a short read as io.ErrUnexpectedEOF.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	if len(p) == 0 {
		return nil
	}
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}
