//go:build goexperiment.simd && amd64 && !purego

package kernels

// f32Rows is, for r in [0,nrows), dst[r] = dotF32x16(w[r·cols:(r+1)·cols], x):
// the same chain and lane sum, so the same bits.
//
//go:noescape
func f32Rows(dst *float32, w *float32, cols, nrows int, x *float32)
