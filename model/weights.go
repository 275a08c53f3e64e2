package model

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// CheckShape reports a tensor whose shape is not the one the architecture needs.
func CheckShape(file string, r offload.Ref, want ...int) error {
	if !r.Valid() {
		return nil
	}
	if !slices.Equal(r.Shape, want) {
		return fmt.Errorf("model: %s: tensor %s has shape %v, want %v", file, r.Name, r.Shape, want)
	}
	if !r.DType.Known() {
		return fmt.Errorf("model: %s: tensor %s has unsupported type %v", file, r.Name, r.DType)
	}
	if bs := r.DType.BlockSize(); r.Cols()%bs != 0 {
		return fmt.Errorf("model: %s: tensor %s of type %v has rows of %d, not a multiple of its block size %d", file, r.Name, r.DType, r.Cols(), bs)
	}
	return nil
}

// Matrix pins r and views it as a kernel weight, in the layout the store
// keeps it in (offload.LayoutOf). Release the Pinned when done.
func Matrix(ctx context.Context, w offload.Store, r offload.Ref) (kernels.Weight, offload.Pinned, error) {
	p, err := w.Acquire(ctx, r)
	if err != nil {
		return kernels.Weight{}, nil, err
	}
	return kernels.Weight{DType: r.DType, Data: p.Bytes(), Rows: r.Rows(), Cols: r.Cols(), Layout: offload.LayoutOf(p)}, p, nil
}

// Vector pins a 1-D tensor and returns it as float32. F32 data is viewed in
// place; other types are decoded into buf (grown as needed).
func Vector(ctx context.Context, w offload.Store, r offload.Ref, buf *[]float32) ([]float32, offload.Pinned, error) {
	p, err := w.Acquire(ctx, r)
	if err != nil {
		return nil, nil, err
	}
	n := int(r.Size) / 4
	if r.DType == tensor.F32 {
		return F32View(p.Bytes())[:n:n], p, nil
	}
	n = r.Cols() * r.Rows()
	*buf = Grow(*buf, n)
	if l := offload.LayoutOf(p); l != kernels.RowMajor {
		m := kernels.Weight{DType: r.DType, Data: p.Bytes(), Rows: r.Rows(), Cols: r.Cols(), Layout: l}
		for i := range m.Rows {
			kernels.DecodeRow((*buf)[i*m.Cols:(i+1)*m.Cols], m, i)
		}
		return *buf, p, nil
	}
	tensor.DequantizeRow(*buf, p.Bytes(), r.DType, n)
	return *buf, p, nil
}

// F32View reinterprets little-endian float32 bytes in place (no copy). The
// bytes must be 4-byte aligned, which GGUF's alignment and our mmap/RAM tiers give.
func F32View(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Row decodes row i of a matrix into dst, whatever its layout.
func Row(dst []float32, m kernels.Weight, i int) {
	kernels.DecodeRow(dst, m, i)
}
