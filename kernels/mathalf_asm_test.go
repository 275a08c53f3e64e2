//go:build goexperiment.simd && amd64 && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"simd/archsimd"

	"github.com/sluicehq/sluice/tensor"
)

// The assembly F16 kernel must reproduce matF16AVX512 bit for bit: same
// chain per output, same lane-sum tree, exact conversion. These tests compare
// the two on awkward shapes and values, check that nothing outside [lo,hi)
// is written, and check VCVTPH2PS against tensor.F16ToF32 for every half.

func requireAVX512(t testing.TB) {
	t.Helper()
	if !archsimd.X86.AVX512() || !archsimd.X86.FMA() {
		t.Skip("CPU lacks AVX-512: the assembly F16 kernel cannot run here")
	}
}

// asmGuard is written around and between the outputs a call may write; its
// bits are unusual so an accidental equal value is implausible.
var asmGuard = math.Float32frombits(0x7f8badf1)

// halfSpecials are binary16 patterns worth sprinkling into weights: ±0,
// subnormals (smallest, largest, one in between), the largest normal, ±Inf,
// quiet and signalling NaNs with payloads.
var halfSpecials = []uint16{
	0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff, 0x0155, 0x7bff, 0xfbff,
	0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfd55, 0x7fff,
}

// halfWeight returns rows×cols little-endian halves: N(0,1) values, with
// halfSpecials mixed in when special is set. The bytes start at offset off
// of their allocation (off odd makes the data misaligned).
func halfWeight(r *rand.Rand, rows, cols, off int, special bool) []byte {
	b := make([]byte, off+2*rows*cols)[off:]
	for k := range rows * cols {
		h := tensor.F32ToF16(float32(r.NormFloat64()))
		if special && r.IntN(8) == 0 {
			h = halfSpecials[r.IntN(len(halfSpecials))]
		}
		binary.LittleEndian.PutUint16(b[2*k:], h)
	}
	return b
}

// asmVec returns n N(0,1) floats, with NaN, ±Inf, ±MaxFloat32, ±0 and a
// subnormal mixed in when special is set.
func asmVec(r *rand.Rand, n int, special bool) []float32 {
	sp := []float32{
		float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, -math.MaxFloat32,
		0, float32(math.Copysign(0, -1)), math.Float32frombits(1),
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
		if special && r.IntN(16) == 0 {
			v[i] = sp[r.IntN(len(sp))]
		}
	}
	return v
}

// sameBits is bit identity, except that two NaNs match whatever their
// payloads: when several NaNs meet in one sum, which payload an x86 add or
// FMA propagates depends on operand order, which Go's register allocator
// chooses for matF16AVX512. TestMatF16AsmNaNPayload checks payloads where
// only one NaN reaches an output.
func sameBits(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || (a != a && b != b)
}

// runHalf calls k on a guarded destination (every output of [lo,hi) and the
// guards between and around them) and returns the n×rows outputs; it fails
// t if k wrote outside rows [lo,hi).
func runHalf(t *testing.T, k matKernel, w []byte, x []float32, n, rows, cols, lo, hi int) []float32 {
	t.Helper()
	const pad = 5
	buf := make([]float32, pad+n*rows+pad)
	for i := range buf {
		buf[i] = asmGuard
	}
	dst := buf[pad : pad+n*rows]
	k(dst, w, x, n, rows, cols, lo, hi)
	for i, v := range buf {
		j := i - pad
		if j >= 0 && j < n*rows && j%rows >= lo && j%rows < hi {
			continue
		}
		if math.Float32bits(v) != math.Float32bits(asmGuard) {
			t.Fatalf("n=%d %d×%d rows [%d,%d): guard element %d (dst index %d) overwritten with %v", n, rows, cols, lo, hi, i, j, v)
		}
	}
	return dst
}

// TestMatF16AsmEveryHalf converts all 65536 halves: row h holds h at column
// h%16 and zeros elsewhere, x is all ones, so output h is F16ToF32(h)+0
// summed with zeros. Both kernels must give exactly that: -0 becomes +0
// (−0·1 + 0), a NaN comes out quiet (bit 22 set) with its payload, everything
// else is tensor.F16ToF32's value. This is where a signalling NaN would
// differ: halfToF32x16 keeps it signalling, VCVTPH2PS quiets it, and the FMA
// then quiets the former, so both end at the same bits.
func TestMatF16AsmEveryHalf(t *testing.T) {
	requireAVX512(t)
	const rows, cols = 1 << 16, 16
	w := make([]byte, 2*rows*cols)
	for h := range rows {
		binary.LittleEndian.PutUint16(w[2*(h*cols+h%cols):], uint16(h))
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = 1
	}
	want := make([]float32, rows)
	matF16AVX512(want, w, x, 1, rows, cols, 0, rows)
	got := make([]float32, rows)
	matF16Asm(got, w, x, 1, rows, cols, 0, rows)
	for h := range rows {
		f := tensor.F16ToF32(uint16(h))
		exp := math.Float32bits(f)
		switch {
		case f != f:
			exp |= 1 << 22
		case f == 0:
			exp = 0
		}
		if g := math.Float32bits(got[h]); g != exp || g != math.Float32bits(want[h]) {
			t.Fatalf("half %#04x: matF16Asm %#08x, matF16AVX512 %#08x, want %#08x", h, g, math.Float32bits(want[h]), exp)
		}
	}
}

// TestMatF16AsmNaNPayload: when a single NaN weight reaches an output (finite
// x, no Inf), its quieted payload is the result's, bit for bit, in both
// kernels, for quiet and signalling NaNs of either sign.
func TestMatF16AsmNaNPayload(t *testing.T) {
	requireAVX512(t)
	r := rand.New(rand.NewPCG(16, 4))
	nans := []uint16{0x7c01, 0xfc01, 0x7d55, 0xfe00, 0x7e01, 0x7fff, 0xffff, 0x7c80}
	for _, cols := range []int{1, 15, 16, 17, 40, 100, 768} {
		t.Run(fmt.Sprintf("cols=%d", cols), func(t *testing.T) {
			const rows, n = 9, 7
			w := halfWeight(r, rows, cols, 0, false)
			for row := range rows {
				h := nans[(row+cols)%len(nans)]
				binary.LittleEndian.PutUint16(w[2*(row*cols+r.IntN(cols)):], h)
			}
			x := asmVec(r, n*cols, false)
			want := runHalf(t, matF16AVX512, w, x, n, rows, cols, 0, rows)
			got := runHalf(t, matF16Asm, w, x, n, rows, cols, 0, rows)
			for i := range want {
				nan := tensor.F16ToF32(nans[(i%rows+cols)%len(nans)])
				exp := math.Float32bits(nan) | 1<<22
				if math.Float32bits(got[i]) != exp || math.Float32bits(want[i]) != exp {
					t.Fatalf("dst[%d]: matF16Asm %#08x, matF16AVX512 %#08x, want %#08x",
						i, math.Float32bits(got[i]), math.Float32bits(want[i]), exp)
				}
			}
		})
	}
}
