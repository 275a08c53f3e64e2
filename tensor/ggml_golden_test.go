package tensor

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The goldens in testdata/ggml were written by ggml's own C code
// (dequantize_row_* and quantize_row_*_ref; testdata/README.md says how):
//
//	<type>.dequant: nb blocks of random bytes (finite random scales), then
//	                the nb·BlockSize float32 values ggml decoded from them
//	<type>.quant:   nv float32 inputs (rows with outliers, zero, one-signed,
//	                tiny and grid-valued parts), then ggml's nv/BlockSize blocks
//
// Both are compared bit for bit: a decoder or quantizer that differs from
// ggml's in one rounding shows up here.
var goldenTypes = []DType{Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K}

func readGolden(t *testing.T, dt DType, kind string) []byte {
	t.Helper()
	path := filepath.Join("testdata", "ggml", fmt.Sprintf("%v.%s", dt, kind))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func f32sLE(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

func TestGGMLDequantGoldens(t *testing.T) {
	for _, dt := range goldenTypes {
		t.Run(dt.String(), func(t *testing.T) {
			b := readGolden(t, dt, "dequant")
			bs, bb := dt.BlockSize(), dt.BlockBytes()
			per := bb + 4*bs
			if len(b)%per != 0 {
				t.Fatalf("%v.dequant: %d bytes, not a multiple of %d (block + its floats)", dt, len(b), per)
			}
			nb := len(b) / per
			raw, want := b[:nb*bb], f32sLE(b[nb*bb:])
			got := make([]float32, nb*bs)
			DequantizeRow(got, raw, dt, nb*bs)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("value %d (block %d, byte offset %d): got %v (%#08x), ggml %v (%#08x)",
						i, i/bs, i/bs*bb, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

func TestGGMLQuantizeGoldens(t *testing.T) {
	for _, dt := range goldenTypes {
		t.Run(dt.String(), func(t *testing.T) {
			b := readGolden(t, dt, "quant")
			bs, bb := dt.BlockSize(), dt.BlockBytes()
			per := 4*bs + bb
			if len(b)%per != 0 {
				t.Fatalf("%v.quant: %d bytes, not a multiple of %d (floats + their block)", dt, len(b), per)
			}
			nb := len(b) / per
			x, want := f32sLE(b[:nb*bs*4]), b[nb*bs*4:]
			got := make([]byte, nb*bb)
			if err := QuantizeRow(got, x, dt); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("byte %d (block %d, offset %d in it): got %#02x, ggml %#02x",
							i, i/bb, i%bb, got[i], want[i])
					}
				}
			}
		})
	}
}
