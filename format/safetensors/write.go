package safetensors

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/sluicehq/sluice/tensor"
)

// Tensor is one tensor to write: Data holds the little-endian bytes of
// Shape's elements in DType.
type Tensor struct {
	Name  string
	DType tensor.DType // F32, F16 or BF16
	Shape []int        // outermost first
	Data  []byte
}

// NewTensor encodes v (len(v) must equal the product of shape) as dt.
func NewTensor(name string, dt tensor.DType, shape []int, v []float32) (Tensor, error) {
	if _, ok := DTypeName(dt); !ok {
		return Tensor{}, fmt.Errorf("safetensors: tensor %q: cannot encode dtype %v (want f32, f16 or bf16)", name, dt)
	}
	n := 1
	for _, d := range shape {
		n *= d
	}
	if n != len(v) {
		return Tensor{}, fmt.Errorf("safetensors: tensor %q: shape %v holds %d values, got %d", name, shape, n, len(v))
	}
	buf := make([]byte, len(v)*dt.BlockBytes())
	for i, x := range v {
		switch dt {
		case tensor.F32:
			binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
		case tensor.F16:
			binary.LittleEndian.PutUint16(buf[2*i:], tensor.F32ToF16(x))
		case tensor.BF16:
			binary.LittleEndian.PutUint16(buf[2*i:], tensor.F32ToBF16(x))
		}
	}
	return Tensor{Name: name, DType: dt, Shape: append([]int(nil), shape...), Data: buf}, nil
}

// headerEntry fixes the key order of a tensor's header object.
type headerEntry struct {
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offsets [2]int64 `json:"data_offsets"`
}

// Write writes tensors (data in the given order) and optional metadata as one
// safetensors file. The header is padded with spaces so the data section starts
// on an 8-byte boundary, as the reference writer does.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	hdr := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		hdr[MetadataKey] = metadata
	}
	var off int64
	for _, t := range tensors {
		name, ok := DTypeName(t.DType)
		switch {
		case t.Name == "" || t.Name == MetadataKey:
			return fmt.Errorf("safetensors: write: invalid tensor name %q", t.Name)
		case !ok:
			return fmt.Errorf("safetensors: write %q: cannot store dtype %v (want f32, f16 or bf16)", t.Name, t.DType)
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("safetensors: write: tensor %q appears twice", t.Name)
		}
		want := int64(t.DType.BlockBytes())
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors: write %q: negative dimension in shape %v", t.Name, t.Shape)
			}
			want *= int64(d)
		}
		if int64(len(t.Data)) != want {
			return fmt.Errorf("safetensors: write %q: shape %v of %s needs %d bytes, data has %d", t.Name, t.Shape, name, want, len(t.Data))
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar: "shape": [], never null
		}
		hdr[t.Name] = headerEntry{DType: name, Shape: shape, Offsets: [2]int64{off, off + want}}
		off += want
	}
	js, err := json.Marshal(hdr) // map keys come out sorted: deterministic files
	if err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	for (8+len(js))%8 != 0 {
		js = append(js, ' ')
	}
	bw := bufio.NewWriter(w)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	bw.Write(lenBuf[:])
	bw.Write(js)
	for _, t := range tensors {
		bw.Write(t.Data)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// WriteFile writes a safetensors file at path atomically: it writes a
// temporary file beside it and renames it into place, so a crash never leaves
// a half-written file under the final name.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if err := Write(tmp, tensors, metadata); err != nil {
		tmp.Close()
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("safetensors: %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
