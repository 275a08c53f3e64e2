package quant

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// The init below registers sluice's own layouts (int8-gN, int4-gN, nf4) as
// tensor dtypes, so that any program importing this package can read, size,
// decode and multiply GGUF tensors carrying DTypeInt8G32… (model blank-imports
// it). q8_0 and q4_0 are ggml's own ids and need no registration; their
// zero-padded variant for widths that are not a multiple of 32 has no dtype id,
// so such tensors are written in another layout (sluice quantize keeps them f32).
func init() {
	for _, s := range all {
		t := s.DType()
		if t < tensor.FirstExtension {
			continue
		}
		if err := tensor.RegisterCodec(t, s.codec()); err != nil {
			panic(fmt.Sprintf("quant: registering %v: %v", s, err))
		}
	}
}

// codec adapts the scheme's row functions to tensor.Codec.
func (s Scheme) codec() tensor.Codec {
	return tensor.Codec{
		Name:     s.String(),
		RowBytes: func(cols int) int64 { return int64(s.RowBytes(cols)) },
		DequantizeRow: func(dst []float32, src []byte, cols int) {
			s.DequantizeRow(dst[:cols], src)
		},
	}
}

// ErrHalfStep: a decoded weight is further than half a quantization step from
// the original.
var ErrHalfStep = errors.New("quant: weight not within s/2")

// CheckHalfStep verifies the absmax guarantee on one row quantized with s
// (int8-gN or int4-gN): every weight of orig decodes from q within s_g/2 of
// itself, s_g being the scale stored for its group, plus the float32 rounding
// of s_g·q. Tools that write quantized files use it to audit their output.
func (s Scheme) CheckHalfStep(orig []float32, q []byte) error {
	if s.Kind != KindInt8 && s.Kind != KindInt4 || !s.Valid() {
		return fmt.Errorf("%w: %v has no half-step guarantee", ErrUnknownScheme, s)
	}
	if len(q) < s.RowBytes(len(orig)) {
		return fmt.Errorf("%w: %v: a row of %d weights needs %d bytes, got %d", ErrSize, s, len(orig), s.RowBytes(len(orig)), len(q))
	}
	var buf [128]float32
	off := 0
	for g := 0; g < len(orig); g += s.Group {
		grp := orig[g:min(g+s.Group, len(orig))]
		back := buf[:len(grp)]
		s.dequantizeGroup(back, q[off:])
		sc := scaleOf(q[off:])
		tol := float64(sc)/2 + float64(absmax(grp))*0x1p-20
		for i, v := range grp {
			if e := math.Abs(float64(v - back[i])); !(e <= tol) {
				return fmt.Errorf("%w: column %d: %v decodes as %v (error %g, scale %g)", ErrHalfStep, g+i, v, back[i], e, sc)
			}
		}
		off += s.groupBytes(len(grp))
	}
	return nil
}
