//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// TestAttentionF16AVX2SameBits: over a KV whose values are binary16, the F16
// kernel (VCVTPH2PS loads) gives, bit for bit, what the float32 AVX2 kernel
// gives over the widened pages: same chains, same order. Also with the
// generic pair, which differ only in the table lookup.
func TestAttentionF16AVX2SameBits(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no AVX2+FMA+F16C on this CPU: the F16 AVX2 kernel cannot run")
	}
	r := rand.New(rand.NewPCG(11, 16))
	for _, sh := range []struct{ heads, kvHeads, d int }{{1, 1, 8}, {4, 2, 16}, {2, 1, 40}, {8, 2, 64}, {4, 4, 72}, {2, 1, 128}} {
		for _, n := range []int{1, 3, 4, 5, 17, 64, 130} {
			for _, pt := range []int{1, 5, 16} {
				kvDim := sh.kvHeads * sh.d
				var kv16, kvw KV
				kv16.PageTokens, kvw.PageTokens, kv16.Len, kvw.Len = pt, pt, n, n
				for p := 0; p*pt < n; p++ {
					kh, vh := make([]uint16, pt*kvDim), make([]uint16, pt*kvDim)
					kw, vw := make([]float32, pt*kvDim), make([]float32, pt*kvDim)
					for i := range kh {
						kh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
						vh[i] = tensor.F32ToF16(float32(r.NormFloat64()))
						kw[i], vw[i] = tensor.F16ToF32(kh[i]), tensor.F16ToF32(vh[i])
					}
					kv16.K16, kv16.V16 = append(kv16.K16, kh), append(kv16.V16, vh)
					kvw.K, kvw.V = append(kvw.K, kw), append(kvw.V, vw)
				}
				rows := 3
				slots := []int32{int32(max(0, n-3)), int32(max(0, n-2)), int32(n - 1)}
				var m Mask
				CausalMask(&m, slots, 0)
				s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
				q := make([]float32, rows*sh.heads*sh.d)
				for i := range q {
					q[i] = float32(r.NormFloat64())
				}
				items := rows * sh.heads
				for _, pair := range []struct {
					name     string
					f32, f16 func(dst, q []float32, kv KV, mask *Mask, s AttnShape, scratch []float32, lo, hi int)
				}{{"avx2", attentionAVX2, attentionAVX2}, {"generic", attentionGeneric, attentionGeneric}} {
					want, got := make([]float32, len(q)), make([]float32, len(q))
					pair.f32(want, q, kvw, &m, s, make([]float32, n), 0, items)
					pair.f16(got, q, kv16, &m, s, make([]float32, n), 0, items)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("%s h%d kv%d d%d n=%d page=%d: element %d: f16 pages %v, widened f32 pages %v",
								pair.name, sh.heads, sh.kvHeads, sh.d, n, pt, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestF32ToF16MatchesF16C: tensor.F32ToF16 (what the KV cache and model/ref
// round with) gives VCVTPS2PH's bits for every float32 class: normals,
// halfway cases, subnormal results, underflow to zero, overflow to Inf, ±Inf
// and ±0. NaNs are compared as NaNs: both give a quiet binary16 NaN of the
// same sign, but VCVTPS2PH keeps the payload's top bits and F32ToF16 the
// canonical 0x7e00 (no kernel reads a NaN's payload).
func TestF32ToF16MatchesF16C(t *testing.T) {
	if !cpuAVX2 {
		t.Skip("no F16C on this CPU")
	}
	var xs []float32
	for _, b := range []uint32{0, 0x80000000, 0x7f800000, 0xff800000, 0x7f7fffff, 0x477fe000, 0x477fefff, 0x477ff000,
		0x38800000, 0x387fffff, 0x33800000, 0x33800001, 0x33000000, 0x33000001, 0x00000001, 0x3f801000, 0x3f803000, 0x3f800fff} {
		xs = append(xs, math.Float32frombits(b), -math.Float32frombits(b))
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
	for len(xs)%8 != 0 {
		xs = append(xs, 1)
	}
	hw := make([]uint16, len(xs))
	cvtPS2PHF16C(&hw[0], &xs[0], len(xs))
	for i, x := range xs {
		sw := tensor.F32ToF16(x)
		if x != x {
			if hw[i]&0x7c00 != 0x7c00 || hw[i]&0x3ff == 0 || sw&0x7c00 != 0x7c00 || sw&0x3ff == 0 || hw[i]>>15 != sw>>15 {
				t.Fatalf("NaN %#08x: F32ToF16 %#04x, VCVTPS2PH %#04x: want NaNs of one sign", math.Float32bits(x), sw, hw[i])
			}
			continue
		}
		if sw != hw[i] {
			t.Fatalf("%g (%#08x): F32ToF16 %#04x, VCVTPS2PH %#04x", x, math.Float32bits(x), sw, hw[i])
		}
	}
}
