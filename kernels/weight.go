package kernels

import (
	"errors"
	"fmt"
)

// ErrBadWeight is wrapped by Weight.Validate errors.
var ErrBadWeight = errors.New("bad weight")

// Validate reports whether w can be used by MatMul: a dtype kernels support,
// non-negative dimensions, Cols a whole number of blocks, and Data holding at
// least Rows rows. Binders call it once per tensor; MatMul panics with the same
// message if it would fail.
func (w Weight) Validate() error {
	if w.Rows < 0 || w.Cols < 0 {
		return fmt.Errorf("kernels: weight %d×%d: negative dimension: %w", w.Rows, w.Cols, ErrBadWeight)
	}
	rb, err := w.DType.RowBytes(w.Cols)
	if err != nil {
		return fmt.Errorf("kernels: weight %d×%d %v: %w: %w", w.Rows, w.Cols, w.DType, err, ErrBadWeight)
	}
	if need := int64(w.Rows) * rb; int64(len(w.Data)) < need {
		return fmt.Errorf("kernels: weight %d×%d %v: %d data bytes, want at least %d: %w",
			w.Rows, w.Cols, w.DType, len(w.Data), need, ErrBadWeight)
	}
	switch w.Layout {
	case RowMajor:
	case PanelQ8_0, PanelQ4_0:
		if !panelShape(w.DType, w.Rows, w.Cols) || panelLayout(w.DType) != w.Layout {
			return fmt.Errorf("kernels: weight %d×%d %v: layout %v needs its own type (panel-q8_0: Q8_0, panel-q4_0: Q4_0) with at least %d rows: %w",
				w.Rows, w.Cols, w.DType, w.Layout, PanelRows, ErrBadWeight)
		}
	default:
		return fmt.Errorf("kernels: weight %d×%d %v: unknown layout %v: %w", w.Rows, w.Cols, w.DType, w.Layout, ErrBadWeight)
	}
	return nil
}
