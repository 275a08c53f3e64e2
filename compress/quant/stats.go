package quant

import "math"

// ErrorStats summarises how far a quantized matrix is from the original.
type ErrorStats struct {
	MaxAbs  float64 // largest |w - ŵ|
	RMS     float64 // sqrt(mean (w - ŵ)²)
	RelRMS  float64 // RMS / sqrt(mean w²): 0 is exact, 1 is as bad as all zeros
	SNRdB   float64 // -20·log10(RelRMS); +Inf when exact
	Bits    float64 // storage bits per weight, scales included
	Weights int
}

// Measure quantizes a row-major (rows, cols) matrix with s, decodes it again
// and compares: the numbers `sluice quantize` reports per tensor.
func Measure(s Scheme, w []float32, rows, cols int) (ErrorStats, error) {
	q := make([]byte, s.MatrixBytes(max(rows, 0), max(cols, 0)))
	if err := s.Quantize(q, w, rows, cols); err != nil {
		return ErrorStats{}, err
	}
	back := make([]float32, len(w))
	if err := s.Dequantize(back, q, rows, cols); err != nil {
		return ErrorStats{}, err
	}
	st := ErrorStats{Bits: s.BitsPerWeight(cols), Weights: len(w)}
	var se, sw float64
	for i, v := range w {
		d := float64(v) - float64(back[i])
		st.MaxAbs = max(st.MaxAbs, math.Abs(d))
		se += d * d
		sw += float64(v) * float64(v)
	}
	if len(w) > 0 {
		st.RMS = math.Sqrt(se / float64(len(w)))
	}
	if sw > 0 {
		st.RelRMS = math.Sqrt(se / sw)
	}
	st.SNRdB = -20 * math.Log10(st.RelRMS)
	return st, nil
}
