package quant

import "github.com/sluicehq/sluice/tensor"

// ggml layouts reuse package tensor's codecs (the ones the GGUF reader and the
// kernels are tested against), so there is exactly one definition of each
// block. Only the zero-padded tail block of a row whose width is not a multiple
// of 32 is handled here.

func ggmlType(k Kind) (t tensor.DType, blockLen int) {
	if k == KindQ8_0 {
		return tensor.Q8_0, tensor.Q8_0BlockLen
	}
	return tensor.Q4_0, tensor.Q4_0BlockLen
}

func ggmlQuantizeRow(k Kind, dst []byte, src []float32) {
	const qk = 32
	quant := tensor.QuantizeRowQ8_0
	if k == KindQ4_0 {
		quant = tensor.QuantizeRowQ4_0
	}
	_, bl := ggmlType(k)
	full := len(src) / qk * qk
	quant(dst, src[:full])
	if tail := src[full:]; len(tail) > 0 {
		var pad [qk]float32
		copy(pad[:], tail)
		quant(dst[full/qk*bl:], pad[:])
	}
}

func ggmlDequantizeRow(k Kind, dst []float32, src []byte) {
	const qk = 32
	t, bl := ggmlType(k)
	full := len(dst) / qk * qk
	tensor.DequantizeRow(dst, src, t, full)
	if tail := dst[full:]; len(tail) > 0 {
		var pad [qk]float32
		ggmlDequantizeBlock(k, pad[:], src[full/qk*bl:])
		copy(tail, pad[:])
	}
}

// ggmlDequantizeBlock decodes one whole block of 32 weights.
func ggmlDequantizeBlock(k Kind, dst []float32, src []byte) {
	t, bl := ggmlType(k)
	tensor.DequantizeRow(dst, src[:bl], t, 32)
}
