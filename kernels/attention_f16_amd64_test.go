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
