//go:build !amd64 || purego

package kernels

// rmsNormRowsFast has no row-block kernel here: the rows go one at a time
// through rmsNormImpl.
func rmsNormRowsFast(dst, x, w []float32, d, lo, hi int, eps float32) bool { return false }
