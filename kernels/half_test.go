package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestRoundF16: RoundF16 (F16C's VCVTPS2PH on AVX2 machines) gives
// tensor.F32ToF16's bits, which model/ref rounds its cache with, for every
// float32 class: normals, halfway cases, subnormal results, underflow to
// zero, overflow to Inf, ±Inf, ±0 and NaNs (the quiet NaN of their sign,
// whatever their payload); at every length's tail and unaligned starts,
// writing nothing past len(src).
func TestRoundF16(t *testing.T) {
	t.Logf("kernels: %s", Impl())
	var xs []float32
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x477fe000, 0x477fefff, 0x477ff000,
		0x38800000, 0x387fffff, 0x33800000, 0x33800001, 0x33000000, 0x33000001, 0x00000001, 0x3f801000, 0x3f803000, 0x3f800fff,
		0x7fc00000, 0x7f800001, 0x7fffffff, 0x7fa00000, 0x7fc01234} {
		xs = append(xs, math.Float32frombits(b), math.Float32frombits(b^0x80000000))
	}
	r := rand.New(rand.NewPCG(16, 11))
	for range 1 << 16 {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	// Every exponent around binary16's range with random mantissas.
	for e := uint32(90); e < 150; e++ {
		for range 64 {
			xs = append(xs, math.Float32frombits(e<<23|r.Uint32()&0x807fffff))
		}
	}
	check := func(src []float32) {
		t.Helper()
		dst := make([]uint16, len(src)+1)
		dst[len(src)] = 0xbeef
		RoundF16(dst, src)
		for i, x := range src {
			if want := tensor.F32ToF16(x); dst[i] != want {
				t.Fatalf("len %d: RoundF16(%g = %#08x) = %#04x, F32ToF16 %#04x", len(src), x, math.Float32bits(x), dst[i], want)
			}
		}
		if dst[len(src)] != 0xbeef {
			t.Fatalf("len %d: wrote past the end", len(src))
		}
	}
	check(xs)
	for n := 0; n <= 33; n++ {
		check(xs[n%5 : n%5+n])
	}
}

// TestRoundScalesF16: the activation quantizer's scale rounding (F16C on
// AVX2 machines) gives roundScalesGeneric's bits for every float32 class,
// the largest binary16 value and its neighbours included (65504 is rounded,
// anything above it, NaNs and +Inf keep their float32 bits), at every
// length's tail and unaligned starts, touching nothing past the slice.
func TestRoundScalesF16(t *testing.T) {
	t.Logf("kernels: %s", Impl())
	var xs []float32
	for _, b := range []uint32{0, 0x7f800000, 0x7f7fffff, 0x477fe000, 0x477fe001, 0x477fefff, 0x477ff000, 0x477ff001,
		0x38800000, 0x387fffff, 0x33800000, 0x33800001, 0x33000000, 0x33000001, 0x00000001, 0x3f801000, 0x3f803000, 0x3f800fff,
		0x7fc00000, 0x7f800001, 0x7fffffff, 0x7fa00000, 0x7fc01234} {
		xs = append(xs, math.Float32frombits(b), math.Float32frombits(b^0x80000000))
	}
	r := rand.New(rand.NewPCG(16, 12))
	for range 1 << 16 {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	for e := uint32(90); e < 150; e++ {
		for range 64 {
			xs = append(xs, math.Float32frombits(e<<23|r.Uint32()&0x807fffff))
		}
	}
	check := func(src []float32) {
		t.Helper()
		want := append([]float32(nil), src...)
		roundScalesGeneric(want)
		got := append(append([]float32(nil), src...), 1234.5)
		roundScalesF16(got[:len(src)])
		for i := range src {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("len %d: roundScalesF16(%g = %#08x) = %#08x, generic %#08x", len(src), src[i], math.Float32bits(src[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
			}
		}
		if got[len(src)] != 1234.5 {
			t.Fatalf("len %d: wrote past the end", len(src))
		}
	}
	check(xs)
	for n := 0; n <= 33; n++ {
		check(xs[n%5 : n%5+n])
	}
}

// BenchmarkRoundScalesF16 is the activation quantizer's scale rounding for
// one 32-input batch of a 768-wide layer input (768 block scales), the
// selected loop against the generic one.
func BenchmarkRoundScalesF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	src := make([]float32, 32*768/tile)
	for i := range src {
		src[i] = float32(r.ExpFloat64()) / 127
	}
	d := make([]float32, len(src))
	for _, k := range []struct {
		name string
		f    func([]float32)
	}{{Impl(), roundScalesF16}, {"generic", roundScalesGeneric}} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				copy(d, src)
				k.f(d)
			}
		})
	}
}
