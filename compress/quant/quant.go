// Package quant stores weight rows with fewer bits: symmetric absmax int8 and
// int4 with one scale per group, QLoRA's 4-bit NormalFloat (NF4), and GGUF's
// Q8_0 and Q4_0 in llama.cpp's exact block layouts. A Mix (kmix.go) is one of
// llama.cpp's K-quant file types (q4_k_m, q6_k, …): a per-tensor choice of
// ggml types made by llama.cpp's rule.
//
// A Scheme quantizes one matrix row at a time. Groups never straddle rows: a
// row of cols weights is cut into groups of Scheme.Group from its first weight,
// and when cols is not a multiple of the group (stories260K's hidden size 172)
// the last group of every row is short and has its own scale. Rows are
// independent byte ranges of RowBytes(cols) each, so row r of a matrix starts at
// r*RowBytes(cols) and a matvec can hand rows to different goroutines.
//
// # Storage layouts
//
// int8-gN, N ∈ {32, 64, 128}, per group of n ≤ N weights:
//
//	f32 s | n × int8 q                      s = max|w|/127, q = round(w/s) ∈ [-127, 127], w ≈ s·q
//
// int4-gN, per group of n ≤ N weights:
//
//	f32 s | ceil(n/2) bytes                  s = max|w|/7, q = round(w/s) ∈ [-7, 7], w ≈ s·q
//	byte i: low nibble q[2i]+8, high nibble q[2i+1]+8 (0 when 2i+1 = n)
//
// nf4, per group of n ≤ 64 weights (QLoRA's block size):
//
//	f32 a | ceil(n/2) bytes                  a = max|w|, code = nearest NF4Levels entry to w/a, w ≈ a·NF4Levels[code]
//	byte i: low nibble code[2i], high nibble code[2i+1]
//
// q8_0 and q4_0 are llama.cpp's blocks of 32 (see package tensor), produced by
// tensor.QuantizeRowQ8_0/Q4_0 and decoded by tensor.DequantizeRow. llama.cpp
// requires cols to be a multiple of 32; for other widths sluice zero-pads the
// last block of each row, which only sluice can read (see LlamaCppReadable).
//
// Scales are float32, not float16, in sluice's own layouts: with an f16 scale
// the seed's 8-bit example would decode 0.9 as 0.897 instead of 0.898, and the
// guarantee that every weight comes back within s/2 would hold only
// approximately. The cost is 2 bytes per group: 4.25 bits per weight for
// int4-g128 instead of 4.125.
//
// # Rounding
//
// round is half away from zero (math.Round), the C roundf that the absmax
// literature and llama.cpp use. w/s and s·q are computed in float32.
package quant

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice/tensor"
)

// Kind is a family of layouts.
type Kind uint8

const (
	KindInt8 Kind = iota + 1 // symmetric absmax, 8 bits, f32 scale per group
	KindInt4                 // symmetric absmax, 4 bits, f32 scale per group
	KindNF4                  // QLoRA NormalFloat 4, f32 absmax per group of 64
	KindQ8_0                 // llama.cpp Q8_0: f16 scale per block of 32
	KindQ4_0                 // llama.cpp Q4_0: f16 scale per block of 32
)

// Scheme is a storage layout: a Kind and the number of weights per scale.
// The zero value is not a valid scheme; get one from ParseScheme, Schemes or
// the variables below.
type Scheme struct {
	Kind  Kind
	Group int // weights per scale: 32, 64 or 128 for int8/int4; 64 for nf4; 32 for q8_0/q4_0
}

// The valid schemes.
var (
	Int8G32  = Scheme{KindInt8, 32}
	Int8G64  = Scheme{KindInt8, 64}
	Int8G128 = Scheme{KindInt8, 128}
	Int4G32  = Scheme{KindInt4, 32}
	Int4G64  = Scheme{KindInt4, 64}
	Int4G128 = Scheme{KindInt4, 128}
	NF4      = Scheme{KindNF4, 64}
	Q8_0     = Scheme{KindQ8_0, tensor.QK8_0}
	Q4_0     = Scheme{KindQ4_0, tensor.QK4_0}
)

// GGUF type ids for sluice's own layouts. They start at 1024, far above ggml's
// ids (which end below 64), so a GGUF file carrying them is clearly sluice-only:
// llama.cpp cannot read these tensors and rejects the file.
const (
	DTypeInt8G32  tensor.DType = 1024
	DTypeInt8G64  tensor.DType = 1025
	DTypeInt8G128 tensor.DType = 1026
	DTypeInt4G32  tensor.DType = 1027
	DTypeInt4G64  tensor.DType = 1028
	DTypeInt4G128 tensor.DType = 1029
	DTypeNF4      tensor.DType = 1030
)

// Sentinel errors.
var (
	// ErrUnknownScheme: ParseScheme got a name that is not in Schemes.
	ErrUnknownScheme = errors.New("quant: unknown scheme")
	// ErrSize: a buffer does not match rows × cols.
	ErrSize = errors.New("quant: size mismatch")
	// ErrNotFinite: a weight to quantize is NaN or ±Inf.
	ErrNotFinite = errors.New("quant: weight is not finite")
)

var all = []Scheme{Int8G32, Int8G64, Int8G128, Int4G32, Int4G64, Int4G128, NF4, Q8_0, Q4_0}

var dtypes = map[Scheme]tensor.DType{
	Int8G32: DTypeInt8G32, Int8G64: DTypeInt8G64, Int8G128: DTypeInt8G128,
	Int4G32: DTypeInt4G32, Int4G64: DTypeInt4G64, Int4G128: DTypeInt4G128,
	NF4: DTypeNF4, Q8_0: tensor.Q8_0, Q4_0: tensor.Q4_0,
}

// Schemes lists every valid scheme, in a fixed order.
func Schemes() []Scheme { return append([]Scheme(nil), all...) }

// Valid reports whether s is one of Schemes.
func (s Scheme) Valid() bool {
	_, ok := dtypes[s]
	return ok
}

// String returns the scheme's name: "int8-g32", "int4-g128", "nf4", "q8_0", "q4_0".
func (s Scheme) String() string {
	switch {
	case !s.Valid():
		return fmt.Sprintf("quant.Scheme{Kind:%d, Group:%d}", s.Kind, s.Group)
	case s.Kind == KindInt8:
		return fmt.Sprintf("int8-g%d", s.Group)
	case s.Kind == KindInt4:
		return fmt.Sprintf("int4-g%d", s.Group)
	case s.Kind == KindNF4:
		return "nf4"
	case s.Kind == KindQ8_0:
		return "q8_0"
	}
	return "q4_0"
}

// ParseScheme maps a name (as String returns it; case and surrounding spaces
// are ignored) to its Scheme.
func ParseScheme(name string) (Scheme, error) {
	want := strings.ToLower(strings.TrimSpace(name))
	names := make([]string, len(all))
	for i, s := range all {
		if s.String() == want {
			return s, nil
		}
		names[i] = s.String()
	}
	return Scheme{}, fmt.Errorf("%w %q (valid: %s)", ErrUnknownScheme, name, strings.Join(names, ", "))
}

// DType is the GGUF type id a tensor in this layout carries: tensor.Q8_0 and
// tensor.Q4_0 for llama.cpp's layouts, DTypeInt8G32… for sluice's own.
func (s Scheme) DType() tensor.DType { return dtypes[s] }

// SchemeForDType is the inverse of Scheme.DType.
func SchemeForDType(t tensor.DType) (Scheme, bool) {
	for s, d := range dtypes {
		if d == t {
			return s, true
		}
	}
	return Scheme{}, false
}

// LlamaCppReadable reports whether a row of cols weights in this layout is a
// valid llama.cpp tensor row: only q8_0 and q4_0, and only when cols fills whole
// blocks.
func (s Scheme) LlamaCppReadable(cols int) bool {
	return (s.Kind == KindQ8_0 || s.Kind == KindQ4_0) && s.Valid() && cols%s.Group == 0
}

// Bits is the width of one stored code (8 or 4).
func (s Scheme) Bits() int {
	if s.Kind == KindInt8 || s.Kind == KindQ8_0 {
		return 8
	}
	return 4
}

// groupBytes is the size of one group of n weights in sluice's own layouts.
func (s Scheme) groupBytes(n int) int {
	if s.Kind == KindInt8 {
		return 4 + n
	}
	return 4 + (n+1)/2
}

// RowBytes is the size of one quantized row of cols weights.
func (s Scheme) RowBytes(cols int) int {
	s.mustValid()
	if cols <= 0 {
		return 0
	}
	switch s.Kind {
	case KindQ8_0:
		return (cols + tensor.QK8_0 - 1) / tensor.QK8_0 * tensor.Q8_0BlockLen
	case KindQ4_0:
		return (cols + tensor.QK4_0 - 1) / tensor.QK4_0 * tensor.Q4_0BlockLen
	}
	n := cols / s.Group * s.groupBytes(s.Group)
	if tail := cols % s.Group; tail > 0 {
		n += s.groupBytes(tail)
	}
	return n
}

// MatrixBytes is the size of rows quantized rows of cols weights.
func (s Scheme) MatrixBytes(rows, cols int) int64 {
	return int64(rows) * int64(s.RowBytes(cols))
}

// BitsPerWeight is the storage cost of a row of cols weights, scales included.
func (s Scheme) BitsPerWeight(cols int) float64 {
	if cols <= 0 {
		return 0
	}
	return float64(8*s.RowBytes(cols)) / float64(cols)
}

func (s Scheme) mustValid() {
	if !s.Valid() {
		panic(fmt.Sprintf("quant: invalid scheme %v", s))
	}
}

// mustFit panics when buf (of the quantized row) is too short for cols
// weights: a programming error, like an index out of range.
func (s Scheme) mustFit(op string, buf, cols int) int {
	n := s.RowBytes(cols)
	if buf < n {
		panic(fmt.Sprintf("quant: %s %v: a row of %d weights needs %d bytes, got %d", op, s, cols, n, buf))
	}
	return n
}

// QuantizeRow encodes src (one row, cols = len(src)) into the first
// RowBytes(len(src)) bytes of dst. NaN and ±Inf give unspecified codes (never
// a panic); Quantize rejects them.
func (s Scheme) QuantizeRow(dst []byte, src []float32) {
	s.mustValid()
	s.mustFit("QuantizeRow", len(dst), len(src))
	switch s.Kind {
	case KindQ8_0, KindQ4_0:
		ggmlQuantizeRow(s.Kind, dst, src)
		return
	}
	for len(src) > 0 {
		n := min(s.Group, len(src))
		switch s.Kind {
		case KindInt8:
			quantizeInt8(dst, src[:n])
		case KindInt4:
			quantizeInt4(dst, src[:n])
		case KindNF4:
			quantizeNF4(dst, src[:n])
		}
		dst, src = dst[s.groupBytes(n):], src[n:]
	}
}

// DequantizeRow decodes one row of len(dst) weights from src.
func (s Scheme) DequantizeRow(dst []float32, src []byte) {
	s.mustValid()
	s.mustFit("DequantizeRow", len(src), len(dst))
	switch s.Kind {
	case KindQ8_0, KindQ4_0:
		ggmlDequantizeRow(s.Kind, dst, src)
		return
	}
	for len(dst) > 0 {
		n := min(s.Group, len(dst))
		s.dequantizeGroup(dst[:n], src)
		dst, src = dst[n:], src[s.groupBytes(n):]
	}
}

func (s Scheme) dequantizeGroup(dst []float32, src []byte) {
	switch s.Kind {
	case KindInt8:
		dequantizeInt8(dst, src)
	case KindInt4:
		dequantizeInt4(dst, src)
	case KindNF4:
		dequantizeNF4(dst, src)
	}
}

// Dot returns the dot product of a quantized row with x (cols = len(x)). It is
// bit-identical to dequantizing the row and summing sequentially in float32:
//
//	s.DequantizeRow(w, row)
//	for i := range x { acc += float32(w[i] * x[i]) }
//
// (the float32 conversion forbids fusing into an FMA, so every platform agrees).
func (s Scheme) Dot(row []byte, x []float32) float32 {
	s.mustValid()
	s.mustFit("Dot", len(row), len(x))
	var buf [128]float32 // the largest group
	var acc float32
	group, step := s.Group, 0
	for len(x) > 0 {
		n := min(group, len(x))
		switch s.Kind {
		case KindQ8_0, KindQ4_0:
			ggmlDequantizeBlock(s.Kind, buf[:group], row)
			step = s.RowBytes(group)
		default:
			s.dequantizeGroup(buf[:n], row)
			step = s.groupBytes(n)
		}
		for i, w := range buf[:n] {
			acc += float32(w * x[i])
		}
		x, row = x[n:], row[step:]
	}
	return acc
}

// Quantize encodes a row-major (rows, cols) matrix: row r of src goes to
// dst[r*RowBytes(cols):]. It checks sizes and rejects NaN and ±Inf, naming the
// row and column.
func (s Scheme) Quantize(dst []byte, src []float32, rows, cols int) error {
	if !s.Valid() {
		return fmt.Errorf("%w: %v", ErrUnknownScheme, s)
	}
	if rows < 0 || cols < 0 || len(src) != rows*cols {
		return fmt.Errorf("%w: %v: (%d, %d) matrix needs %d weights, got %d", ErrSize, s, rows, cols, rows*cols, len(src))
	}
	rb := s.RowBytes(cols)
	if int64(len(dst)) < int64(rows)*int64(rb) {
		return fmt.Errorf("%w: %v: (%d, %d) matrix needs %d bytes, dst has %d", ErrSize, s, rows, cols, int64(rows)*int64(rb), len(dst))
	}
	for i, v := range src {
		if v-v != 0 { // NaN or ±Inf
			return fmt.Errorf("%w: %v at row %d, column %d", ErrNotFinite, v, i/cols, i%cols)
		}
	}
	for r := range rows {
		s.QuantizeRow(dst[r*rb:(r+1)*rb], src[r*cols:(r+1)*cols])
	}
	return nil
}

// Dequantize decodes a (rows, cols) matrix quantized by Quantize.
func (s Scheme) Dequantize(dst []float32, src []byte, rows, cols int) error {
	if !s.Valid() {
		return fmt.Errorf("%w: %v", ErrUnknownScheme, s)
	}
	if rows < 0 || cols < 0 || len(dst) != rows*cols {
		return fmt.Errorf("%w: %v: (%d, %d) matrix needs %d weights, dst has %d", ErrSize, s, rows, cols, rows*cols, len(dst))
	}
	rb := s.RowBytes(cols)
	if int64(len(src)) < int64(rows)*int64(rb) {
		return fmt.Errorf("%w: %v: (%d, %d) matrix needs %d bytes, src has %d", ErrSize, s, rows, cols, int64(rows)*int64(rb), len(src))
	}
	for r := range rows {
		s.DequantizeRow(dst[r*cols:(r+1)*cols], src[r*rb:(r+1)*rb])
	}
	return nil
}

// MatVec computes dst = W x for a quantized row-major W (rows, cols):
//
//	for r := range rows { dst[r] = s.Dot(w[r*RowBytes(cols):], x) }
func (s Scheme) MatVec(dst []float32, w []byte, x []float32, rows, cols int) {
	rb := s.RowBytes(cols)
	x = x[:cols]
	for r := range dst[:rows] {
		dst[r] = s.Dot(w[r*rb:(r+1)*rb], x)
	}
}
