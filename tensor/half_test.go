package tensor

import (
	"math"
	"testing"
)

func TestF16(t *testing.T) {
	for _, tc := range []struct {
		f float32
		h uint16
	}{
		{0, 0x0000}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {0.5, 0x3800},
		{5.960464477539063e-08, 0x0001}, // smallest subnormal
		{6.097555160522461e-05, 0x03ff}, // largest subnormal
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
	} {
		if got := F32ToF16(tc.f); got != tc.h {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", tc.f, got, tc.h)
		}
		if got := F16ToF32(tc.h); got != tc.f {
			t.Errorf("F16ToF32(%#04x) = %g, want %g", tc.h, got, tc.f)
		}
	}
	if !math.IsNaN(float64(F16ToF32(F32ToF16(float32(math.NaN()))))) {
		t.Error("NaN did not survive")
	}
	if F32ToF16(70000) != 0x7c00 {
		t.Error("overflow is not Inf")
	}
	// Every finite half round-trips exactly through float32.
	for h := range 1 << 16 {
		f := F16ToF32(uint16(h))
		if f != f {
			continue
		}
		if back := F32ToF16(f); back != uint16(h) {
			t.Fatalf("%#04x → %g → %#04x", h, f, back)
		}
	}
	// Ties round to even: 1 + 2^-11 is halfway between 1 and 1+2^-10.
	if got := F32ToF16(1 + 1.0/2048); got != 0x3c00 {
		t.Errorf("tie rounded to %#04x, want 0x3c00 (even)", got)
	}
}

func TestBF16(t *testing.T) {
	if F32ToBF16(1) != 0x3f80 || BF16ToF32(0x3f80) != 1 {
		t.Error("bf16 of 1")
	}
	if !math.IsNaN(float64(BF16ToF32(F32ToBF16(float32(math.NaN()))))) {
		t.Error("bf16 NaN")
	}
}

// The Q8_0 and Q4_0 codecs against hand-made blocks (llama.cpp layouts).
func TestQuantBlocks(t *testing.T) {
	src := make([]float32, 32)
	for i := range src {
		src[i] = float32(i-16) / 16 // -1 … 0.9375
	}
	q8 := make([]byte, Q8_0BlockLen)
	QuantizeRowQ8_0(q8, src)
	if d := F16ToF32(uint16(q8[0]) | uint16(q8[1])<<8); math.Abs(float64(d-1.0/127)) > 1e-5 {
		t.Errorf("q8_0 scale %g, want 1/127", d)
	}
	if int8(q8[2]) != -127 || int8(q8[2+16]) != 0 {
		t.Errorf("q8_0 values %d %d, want -127 0", int8(q8[2]), int8(q8[18]))
	}
	back := make([]float32, 32)
	DequantizeRow(back, q8, Q8_0, 32)
	for i := range src {
		if math.Abs(float64(back[i]-src[i])) > 1.0/127 {
			t.Errorf("q8_0 %d: %g → %g", i, src[i], back[i])
		}
	}
	q4 := make([]byte, Q4_0BlockLen)
	QuantizeRowQ4_0(q4, src)
	// The largest magnitude (-1) maps to -8, so d = 1/8 and x = d*(q-8).
	if d := F16ToF32(uint16(q4[0]) | uint16(q4[1])<<8); d != 0.125 {
		t.Errorf("q4_0 scale %g, want 0.125", d)
	}
	if q4[2]&0x0f != 0 || q4[2]>>4 != 8 { // weight 0 is -1 → 0; weight 16 is 0 → 8
		t.Errorf("q4_0 byte 0 = %#02x, want 0x80", q4[2])
	}
	DequantizeRow(back, q4, Q4_0, 32)
	for i := range src {
		if math.Abs(float64(back[i]-src[i])) > 0.0625+1e-6 {
			t.Errorf("q4_0 %d: %g → %g", i, src[i], back[i])
		}
	}
}

func TestRowBytes(t *testing.T) {
	for _, tc := range []struct {
		t    DType
		n    int
		want int64
		err  bool
	}{{F32, 10, 40, false}, {F16, 3, 6, false}, {Q8_0, 64, 68, false}, {Q4_0, 32, 18, false}, {Q4_0, 33, 0, true}, {DType(99), 32, 0, true}} {
		got, err := tc.t.RowBytes(tc.n)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%v.RowBytes(%d) = %d, %v", tc.t, tc.n, got, err)
		}
	}
	if _, err := ParseDType("q5_k"); err == nil {
		t.Error("ParseDType accepted q5_k")
	}
}

// llama.cpp rounds Q8_0 ties away from zero (roundf), not to even.
func TestQ8_0TiesAwayFromZero(t *testing.T) {
	src := make([]float32, 32)
	src[0] = 127.0 / 16 // sets d = 1/16 exactly
	src[1], src[2] = 2.5/16, -2.5/16
	q := make([]byte, Q8_0BlockLen)
	QuantizeRowQ8_0(q, src)
	if int8(q[3]) != 3 || int8(q[4]) != -3 {
		t.Fatalf("ties: got %d %d, want 3 -3", int8(q[3]), int8(q[4]))
	}
}

func TestF32Bytes(t *testing.T) {
	v := []float32{1, -2.5, float32(math.Inf(-1)), math.Float32frombits(0x7fc00001), 0}
	b := F32Bytes(v)
	if len(b) != 4*len(v) || b[0] != 0x00 || b[3] != 0x3f {
		t.Fatalf("F32Bytes(1, …) = % x, want 00 00 80 3f first", b)
	}
	got := make([]float32, len(v))
	DequantizeRow(got, b, F32, len(v))
	for i := range v {
		if math.Float32bits(got[i]) != math.Float32bits(v[i]) {
			t.Errorf("element %d: bits %#x, want %#x", i, math.Float32bits(got[i]), math.Float32bits(v[i]))
		}
	}
}
