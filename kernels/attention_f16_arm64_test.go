//go:build arm64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/tensor"
)

// f16Specials are binary16 values worth sprinkling into K and V: ±0, the
// smallest subnormal, the largest finite, ±Inf and a NaN.
var f16Specials = []uint16{0x0000, 0x8000, 0x0001, 0x83ff, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00}

// TestAttnF16NEONRoutines: the binary16 dot and axpy routines give, bit for
// bit, what the float32 routines give over the widened rows, for head dims
// 8..128, 1..11 slots, unaligned starts and special values, and write
// nothing outside their outputs.
func TestAttnF16NEONRoutines(t *testing.T) {
	requireNEON(t)
	r := rand.New(rand.NewPCG(43, 44))
	halves := func(n int) ([]uint16, []float32) {
		h, w := make([]uint16, n), make([]float32, n)
		for i := range h {
			h[i] = tensor.F32ToF16(float32(r.NormFloat64()))
			if r.IntN(30) == 0 {
				h[i] = f16Specials[r.IntN(len(f16Specials))]
			}
			w[i] = tensor.F16ToF32(h[i])
		}
		return h, w
	}
	const g = 5
	for _, d := range []int{8, 16, 24, 40, 64, 128} {
		for _, n := range []int{1, 3, 4, 5, 8, 11} {
			for _, off := range []int{0, 1, 3} {
				width := d + 8
				q := make([]float32, off+d)[off:]
				for i := range q {
					q[i] = float32(r.NormFloat64())
				}
				kh, kw := halves(off + n*width)
				vh, vw := halves(off + n*width)
				kh, kw, vh, vw = kh[off:], kw[off:], vh[off:], vw[off:]
				scale := float32(1 / math.Sqrt(float64(d)))
				want := make([]float32, n)
				attnDotsNEON(&want[0], &q[0], &kw[0], uintptr(width)*4, n, d, scale)
				buf := make([]float32, 2*g+off+n)
				for i := range buf {
					buf[i] = -7
				}
				sc := buf[g+off : g+off+n]
				attnDotsF16NEON(&sc[0], &q[0], &kh[0], uintptr(width)*2, n, d, scale)
				for j := range want {
					if !sameBits(sc[j], want[j]) {
						t.Fatalf("d=%d n=%d off=%d: score %d = %v over halves, %v over widened rows", d, n, off, j, sc[j], want[j])
					}
				}
				for i, x := range buf {
					if (i < g+off || i >= g+off+n) && x != -7 {
						t.Fatalf("d=%d n=%d off=%d: dots wrote scratch[%d]", d, n, off, i-g-off)
					}
				}
				a := make([]float32, n)
				for i := range a {
					a[i] = float32(r.Float64())
				}
				wantOut := make([]float32, d)
				for i := range wantOut {
					wantOut[i] = float32(r.NormFloat64())
				}
				obuf := make([]float32, 2*g+off+d)
				for i := range obuf {
					obuf[i] = -7
				}
				out := obuf[g+off : g+off+d]
				copy(out, wantOut)
				attnAxpyNEON(&wantOut[0], &a[0], &vw[0], uintptr(width)*4, n, d)
				attnAxpyF16NEON(&out[0], &a[0], &vh[0], uintptr(width)*2, n, d)
				for i := range wantOut {
					if !sameBits(out[i], wantOut[i]) {
						t.Fatalf("d=%d n=%d off=%d: out[%d] = %v over halves, %v over widened rows", d, n, off, i, out[i], wantOut[i])
					}
				}
				for i, x := range obuf {
					if (i < g+off || i >= g+off+d) && x != -7 {
						t.Fatalf("d=%d n=%d off=%d: axpy wrote out[%d]", d, n, off, i-g-off)
					}
				}
			}
		}
	}
}

// TestAttentionF16NEONSameBits: over a KV whose values are binary16, the F16
// kernel gives attentionNEON's bits over the widened pages, for GQA shapes,
// page sizes that split the visible runs, causal and windowed masks; head
// dims off the multiple of 8 take the generic kernel on both sides.
func TestAttentionF16NEONSameBits(t *testing.T) {
	requireNEON(t)
	r := rand.New(rand.NewPCG(11, 17))
	for _, sh := range []struct{ heads, kvHeads, d int }{{1, 1, 8}, {4, 2, 16}, {2, 1, 40}, {8, 2, 64}, {2, 2, 12}, {2, 1, 128}} {
		for _, n := range []int{1, 4, 5, 17, 70} {
			for _, pt := range []int{1, 5, 16} {
				for _, window := range []int{0, 3} {
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
					CausalMask(&m, slots, window)
					s := AttnShape{Heads: sh.heads, KVHeads: sh.kvHeads, HeadDim: sh.d, Scale: float32(1 / math.Sqrt(float64(sh.d)))}
					q := make([]float32, rows*sh.heads*sh.d)
					for i := range q {
						q[i] = float32(r.NormFloat64())
					}
					items := rows * sh.heads
					want, got := make([]float32, len(q)), make([]float32, len(q))
					attentionNEON(want, q, kvw, &m, s, make([]float32, n), 0, items)
					attentionF16NEON(got, q, kv16, &m, s, make([]float32, n), 0, items)
					for i := range want {
						if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
							t.Fatalf("h%d kv%d d%d n=%d page=%d window=%d: element %d: f16 pages %v, widened f32 pages %v",
								sh.heads, sh.kvHeads, sh.d, n, pt, window, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}
