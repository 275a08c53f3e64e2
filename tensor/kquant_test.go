package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// f16 constants used by the hand-built blocks.
const (
	h1    = 0x3C00 // 1
	hHalf = 0x3800 // 0.5
	hQtr  = 0x3400 // 0.25
	hM1   = 0xBC00 // -1
)

func put16(b []byte, v uint16) { binary.LittleEndian.PutUint16(b, v) }

func decodeAll(t *testing.T, dt DType, blk []byte) []float32 {
	t.Helper()
	n := dt.BlockSize()
	if len(blk) != dt.BlockBytes() {
		t.Fatalf("%v: hand-built block has %d bytes, want %d", dt, len(blk), dt.BlockBytes())
	}
	got := make([]float32, n)
	DequantizeRow(got, blk, dt, n)
	blockGot := make([]float32, n)
	DequantizeBlock(blockGot, blk, dt)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(blockGot[i]) {
			t.Fatalf("%v: DequantizeRow[%d] = %v but DequantizeBlock %v", dt, i, got[i], blockGot[i])
		}
	}
	return got
}

func checkWeights(t *testing.T, dt DType, got []float32, want func(i int) float32) {
	t.Helper()
	bad := 0
	for i, g := range got {
		if w := want(i); g != w {
			t.Errorf("%v: weight %d = %v, want %v", dt, i, g, w)
			if bad++; bad > 8 {
				t.FailNow()
			}
		}
	}
}

func TestDTypeKQuantProperties(t *testing.T) {
	cases := []struct {
		dt          DType
		name        string
		size, bytes int
	}{
		{Q4_1, "q4_1", 32, 20}, {Q5_0, "q5_0", 32, 22}, {Q5_1, "q5_1", 32, 24},
		{Q2_K, "q2_K", 256, 84}, {Q3_K, "q3_K", 256, 110}, {Q4_K, "q4_K", 256, 144},
		{Q5_K, "q5_K", 256, 176}, {Q6_K, "q6_K", 256, 210}, {Q8_K, "q8_K", 256, 292},
	}
	for _, c := range cases {
		if c.dt.String() != c.name || !c.dt.Known() || c.dt.BlockSize() != c.size || c.dt.BlockBytes() != c.bytes {
			t.Errorf("%d: %q known=%v size %d bytes %d; want %q, %d, %d", uint32(c.dt), c.dt.String(), c.dt.Known(), c.dt.BlockSize(), c.dt.BlockBytes(), c.name, c.size, c.bytes)
		}
		if p, err := ParseDType(c.name); err != nil || p != c.dt {
			t.Errorf("ParseDType(%q) = %v, %v", c.name, p, err)
		}
		if rb, err := c.dt.RowBytes(4 * c.size); err != nil || rb != int64(4*c.bytes) {
			t.Errorf("%v.RowBytes(%d) = %d, %v", c.dt, 4*c.size, rb, err)
		}
		if _, err := c.dt.RowBytes(c.size + 16); err == nil {
			t.Errorf("%v.RowBytes(%d): no error for a partial block", c.dt, c.size+16)
		}
		if c.dt.IsKQuant() != (c.size == 256) {
			t.Errorf("%v.IsKQuant() = %v", c.dt, c.dt.IsKQuant())
		}
	}
}

func TestDequantQ4_1Hand(t *testing.T) {
	blk := make([]byte, Q4_1BlockLen)
	put16(blk, hHalf) // d = 0.5
	put16(blk[2:], hM1)
	for j := range 16 {
		blk[4+j] = byte(j) | byte(15-j)<<4
	}
	// w_j = 0.5*j - 1, w_{j+16} = 0.5*(15-j) - 1.
	checkWeights(t, Q4_1, decodeAll(t, Q4_1, blk), func(i int) float32 {
		if i < 16 {
			return 0.5*float32(i) - 1
		}
		return 0.5*float32(15-(i-16)) - 1
	})
}

func TestDequantQ5_0Hand(t *testing.T) {
	blk := make([]byte, Q5_0BlockLen)
	put16(blk, hQtr)
	binary.LittleEndian.PutUint32(blk[2:], 0x0000FFFF) // fifth bit set for weights 0..15
	for j := range 16 {
		blk[6+j] = byte(j) | byte(j)<<4
	}
	// w_j = 0.25*((16+j)-16) = j/4; w_{j+16} = 0.25*(j-16).
	checkWeights(t, Q5_0, decodeAll(t, Q5_0, blk), func(i int) float32 {
		if i < 16 {
			return 0.25 * float32(i)
		}
		return 0.25 * float32(i-16-16)
	})
}

func TestDequantQ5_1Hand(t *testing.T) {
	blk := make([]byte, Q5_1BlockLen)
	put16(blk, h1)
	put16(blk[2:], hHalf)
	binary.LittleEndian.PutUint32(blk[4:], 0xAAAAAAAA) // odd weights have the fifth bit
	for j := range 16 {
		blk[8+j] = 3 | 5<<4
	}
	checkWeights(t, Q5_1, decodeAll(t, Q5_1, blk), func(i int) float32 {
		q := float32(3)
		if i >= 16 {
			q = 5
		}
		if i%2 == 1 {
			q += 16
		}
		return q + 0.5
	})
}

func TestDequantQ2_KHand(t *testing.T) {
	blk := make([]byte, Q2_KBlockLen)
	scales, qs := blk[0:16], blk[16:80]
	put16(blk[80:], h1)    // d
	put16(blk[82:], hHalf) // dmin
	scales[0] = 0x21       // sub-block 0: scale 1, min 2
	scales[5] = 0x13       // sub-block 5: scale 3, min 1
	scales[15] = 0xF1      // sub-block 15: scale 1, min 15
	qs[1] = 0b11           // weight 1 (half 0, shift 0, l=1): q = 3
	qs[17] = 0b11 << 4     // weight 64+17 (shift 4 → k=2, l=17: sub-block 5): q = 3
	qs[63] = 0b10 << 6     // weight 128+96+31 = 255 (sub-block 15): q = 2
	checkWeights(t, Q2_K, decodeAll(t, Q2_K, blk), func(i int) float32 {
		switch {
		case i == 1:
			return 1*3 - 0.5*2
		case i < 16:
			return -0.5 * 2
		case i == 81:
			return 3*3 - 0.5*1
		case i >= 80 && i < 96:
			return -0.5 * 1
		case i == 255:
			return 1*2 - 0.5*15
		case i >= 240:
			return -0.5 * 15
		}
		return 0
	})
}

func TestDequantQ3_KHand(t *testing.T) {
	blk := make([]byte, Q3_KBlockLen)
	hmask, qs, scales := blk[0:32], blk[32:96], blk[96:108]
	put16(blk[108:], h1)
	// 6-bit scales (stored +32): sub-block 0 = 33 (low 1 in scales[0] low
	// nibble, high 2 in scales[8] bits 0-1); 9 = 30 (low 14 in scales[1]
	// high nibble, high 1 in scales[9] bits 4-5); 15 = 63 (scales[7] high
	// nibble, scales[11] bits 6-7). Every other sub-block reads 0, i.e. -32.
	scales[0], scales[8] = 0x01, 0b10
	scales[1], scales[9] = 0xE0, 0x10
	scales[7], scales[11] = 0xF0, 0xC0
	qs[0], hmask[0] = 0b11, 0x01         // weight 0: q = 3, high bit set: 3
	qs[32+20], hmask[20] = 0b10, 0x10    // weight 128+20 (h=1, k=0): 2, high bit (bit 4) set
	qs[32+31], hmask[31] = 0b11<<6, 0x80 // weight 255 (h=1, k=3): 3, high bit (bit 7) set
	checkWeights(t, Q3_K, decodeAll(t, Q3_K, blk), func(i int) float32 {
		switch {
		case i == 0:
			return 1 * 3
		case i < 16:
			return 1 * -4
		case i == 148:
			return -2 * 2
		case i >= 144 && i < 160:
			return -2 * -4
		case i == 255:
			return 31 * 3
		case i >= 240:
			return 31 * -4
		}
		return -32 * -4 // q = 0 and no high bit: 0-4
	})
}

// k4Header builds the Q4_K/Q5_K head: d = 1, dmin = 0.5, scales 1,2,3,4,
// 44,45,46,47 and mins 0,2,4,6,24,25,26,27, packed by hand.
func k4Header(blk []byte) (sc, mn [8]float32) {
	put16(blk, h1)
	put16(blk[2:], hHalf)
	copy(blk[4:16], []byte{
		0x81, 0x82, 0x83, 0x84, // scales 1..4, bits 6-7: high bits (2) of scales 44..47
		0x40, 0x42, 0x44, 0x46, // mins 0,2,4,6, bits 6-7: high bits (1) of mins 24..27
		0x8C, 0x9D, 0xAE, 0xBF, // low nibbles: scale 12..15 | min 8..11 << 4
	})
	return [8]float32{1, 2, 3, 4, 44, 45, 46, 47}, [8]float32{0, 2, 4, 6, 24, 25, 26, 27}
}

func TestScaleMinK4Hand(t *testing.T) {
	blk := make([]byte, Q4_KBlockLen)
	sc, mn := k4Header(blk)
	for j := range 8 {
		s, m := ScaleMinK4(j, blk[4:16])
		if float32(s) != sc[j] || float32(m) != mn[j] {
			t.Errorf("sub-block %d: scale %d min %d, want %v %v", j, s, m, sc[j], mn[j])
		}
	}
}

func TestDequantQ4_KHand(t *testing.T) {
	blk := make([]byte, Q4_KBlockLen)
	sc, mn := k4Header(blk)
	for i := range 128 {
		l := i % 32
		blk[16+i] = byte(l%16) | byte(15-l%16)<<4
	}
	checkWeights(t, Q4_K, decodeAll(t, Q4_K, blk), func(i int) float32 {
		p, r := i/64, i%64
		if r < 32 {
			return sc[2*p]*float32(r%16) - 0.5*mn[2*p]
		}
		return sc[2*p+1]*float32(15-(r-32)%16) - 0.5*mn[2*p+1]
	})
}

func TestDequantQ5_KHand(t *testing.T) {
	blk := make([]byte, Q5_KBlockLen)
	sc, mn := k4Header(blk)
	for l := range 32 {
		if l < 16 {
			blk[16+l] = 0x55 // bits 0,2,4,6: the low-nibble weights of every pair p
		} else {
			blk[16+l] = 0xAA // bits 1,3,5,7: the high-nibble weights
		}
	}
	for i := range 128 {
		l := i % 32
		blk[48+i] = byte(l%16) | byte(15-l%16)<<4
	}
	checkWeights(t, Q5_K, decodeAll(t, Q5_K, blk), func(i int) float32 {
		p, r := i/64, i%64
		if r < 32 {
			q := float32(r % 16)
			if r < 16 {
				q += 16
			}
			return sc[2*p]*q - 0.5*mn[2*p]
		}
		l := r - 32
		q := float32(15 - l%16)
		if l >= 16 {
			q += 16
		}
		return sc[2*p+1]*q - 0.5*mn[2*p+1]
	})
}

func TestDequantQ6_KHand(t *testing.T) {
	blk := make([]byte, Q6_KBlockLen)
	ql, qh, scales := blk[0:128], blk[128:192], blk[192:208]
	put16(blk[208:], h1)
	scales[0], scales[2], scales[4], scales[6] = 3, 0xFE, 5, 1 // 0xFE = -2
	scales[15] = 0xFF                                          // -1
	ql[0] = 0x21                                               // weight 0 low bits 1, weight 64 low bits 2
	qh[0] = 0b11100100                                         // high bits: weight 0: 0, weight 32: 1, weight 64: 2, weight 96: 3
	ql[127] = 0xF0                                             // half 1, l = 31: weight 128+96+31 = 255 low bits 15
	qh[63] = 0xC0                                              // and high bits 3: q = 63
	checkWeights(t, Q6_K, decodeAll(t, Q6_K, blk), func(i int) float32 {
		switch {
		case i == 0:
			return 3 * (1 - 32)
		case i < 16:
			return 3 * -32
		case i == 32:
			return -2 * (16 - 32)
		case i >= 32 && i < 48:
			return -2 * -32
		case i == 64:
			return 5 * (2 + 32 - 32)
		case i >= 64 && i < 80:
			return 5 * -32
		case i == 96:
			return 1 * (48 - 32)
		case i >= 96 && i < 112:
			return 1 * -32
		case i == 255:
			return -1 * (63 - 32)
		case i >= 240:
			return -1 * -32
		}
		return 0
	})
}

func TestDequantQ8_KHand(t *testing.T) {
	blk := make([]byte, Q8_KBlockLen)
	binary.LittleEndian.PutUint32(blk, math.Float32bits(0.25))
	for j := range 256 {
		blk[4+j] = byte(int8(j - 128))
	}
	checkWeights(t, Q8_K, decodeAll(t, Q8_K, blk), func(i int) float32 { return 0.25 * float32(i-128) })
}

// TestQuantizeQ8_KHand: x_j = j-128; the largest magnitude is x_0 = -128,
// so iscale = -127/-128, q_0 = -127, q_255 = round(126.0078) = 126, and d
// = 1/iscale = 128/127.
func TestQuantizeQ8_KHand(t *testing.T) {
	x := make([]float32, 256)
	for j := range x {
		x[j] = float32(j - 128)
	}
	blk := make([]byte, Q8_KBlockLen)
	QuantizeRowQ8_K(blk, x)
	iscale := float32(-127) / float32(-128)
	if d := math.Float32frombits(binary.LittleEndian.Uint32(blk)); d != 1/iscale {
		t.Errorf("d = %v, want %v", d, 1/iscale)
	}
	if q0, q255 := int8(blk[4]), int8(blk[4+255]); q0 != -127 || q255 != 126 {
		t.Errorf("q0 = %d, q255 = %d, want -127, 126", q0, q255)
	}
	for g := range 16 {
		var sum int
		for _, q := range blk[4+16*g : 4+16*g+16] {
			sum += int(int8(q))
		}
		if b := int16(binary.LittleEndian.Uint16(blk[260+2*g:])); int(b) != sum {
			t.Errorf("bsums[%d] = %d, want %d", g, b, sum)
		}
	}
	// Every value is within half a step of its decoding.
	w := make([]float32, 256)
	DequantizeRow(w, blk, Q8_K, 256)
	for j := range x {
		if e := math.Abs(float64(w[j] - x[j])); e > 0.5*128/127+1e-4 {
			t.Errorf("x[%d] = %v decodes to %v", j, x[j], w[j])
		}
	}
}

// TestQuantizeK4Ramp: sub-blocks holding the levels 0..15 exactly are
// reproduced up to the f16 rounding of d = 1/63 (scale code 63).
func TestQuantizeK4Ramp(t *testing.T) {
	x := make([]float32, 256)
	for i := range x {
		x[i] = float32(i % 16)
	}
	for _, dt := range []DType{Q4_K, Q5_K} {
		blk := make([]byte, dt.BlockBytes())
		if err := QuantizeRow(blk, x, dt); err != nil {
			t.Fatal(err)
		}
		for j := range 8 {
			if s, m := ScaleMinK4(j, blk[4:16]); s != 63 || m != 0 {
				t.Errorf("%v sub-block %d: scale %d min %d, want 63 0", dt, j, s, m)
			}
		}
		w := make([]float32, 256)
		DequantizeRow(w, blk, dt, 256)
		d := F16ToF32(F32ToF16(1.0 / 63))
		for i := range x {
			if want := float32(d*63) * x[i]; w[i] != want {
				t.Errorf("%v weight %d: %v, want %v", dt, i, w[i], want)
				break
			}
		}
	}
}

// TestQuantizeRoundTrip quantizes Gaussian rows with every quantizer and
// bounds the decoding error (relative RMS), plus an all-zero row.
func TestQuantizeRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 4096
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	x[7] = 9 // an outlier
	bounds := map[DType]float64{
		Q8_0: 0.01, Q4_0: 0.12, Q4_1: 0.10, Q5_0: 0.06, Q5_1: 0.05,
		Q2_K: 0.40, Q3_K: 0.20, Q4_K: 0.10, Q5_K: 0.05, Q6_K: 0.025, Q8_K: 0.01,
	}
	for dt, bound := range bounds {
		blk := make([]byte, n/dt.BlockSize()*dt.BlockBytes())
		if err := QuantizeRow(blk, x, dt); err != nil {
			t.Fatal(err)
		}
		w := make([]float32, n)
		DequantizeRow(w, blk, dt, n)
		var se, ss float64
		for i := range x {
			e := float64(w[i] - x[i])
			se += e * e
			ss += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%v: relative RMS error %.4f", dt, rel)
		if rel > bound || math.IsNaN(rel) {
			t.Errorf("%v: relative RMS error %.4f > %.4f", dt, rel, bound)
		}
		zero := make([]float32, dt.BlockSize())
		zb := make([]byte, dt.BlockBytes())
		if err := QuantizeRow(zb, zero, dt); err != nil {
			t.Fatal(err)
		}
		DequantizeRow(w[:len(zero)], zb, dt, len(zero))
		for i, v := range w[:len(zero)] {
			if v != 0 {
				t.Errorf("%v: zero block decodes to %v at %d", dt, v, i)
				break
			}
		}
	}
}

func TestQuantizeRowErrors(t *testing.T) {
	if err := QuantizeRow(make([]byte, 144), make([]float32, 100), Q4_K); err == nil {
		t.Error("partial block: no error")
	}
	if err := QuantizeRow(make([]byte, 10), make([]float32, 256), Q4_K); err == nil {
		t.Error("short dst: no error")
	}
	if err := QuantizeRow(make([]byte, 1024), make([]float32, 256), F16); err == nil {
		t.Error("F16: no error")
	}
}

func TestNearestInt(t *testing.T) {
	for _, c := range []struct {
		f float32
		i int32
	}{{0.5, 0}, {1.5, 2}, {2.5, 2}, {-0.5, 0}, {-1.5, -2}, {-2.6, -3}, {126.0078, 126}, {4194303, 4194303}} {
		if got := nearestInt(c.f); got != c.i {
			t.Errorf("nearestInt(%v) = %d, want %d", c.f, got, c.i)
		}
	}
}
