package kernels_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// benchShapes are stories15M's FFN (288×768), a 768×2048 projection and
// TinyLlama's FFN (2048×5632).
var benchShapes = [][2]int{{288, 768}, {768, 2048}, {2048, 5632}}

// BenchmarkMatMul measures one product per dtype and shape, single-threaded,
// at n=1 (decode: MatVec) and n=16 (a prompt chunk or draft tree: each weight
// byte read once for all rows). Bytes are the weight bytes streamed per call,
// so MB/s is the weight bandwidth; compare with BenchmarkStreamRead.
func BenchmarkMatMul(b *testing.B) {
	for _, dt := range dtypes {
		for _, sh := range benchShapes {
			rows, cols := sh[0], sh[1]
			var w kernels.Weight
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", dt, rows, cols, n), func(b *testing.B) {
					if w.Data == nil { // build lazily: -bench filters skip the cost
						w = makeWeight(newRand(b), dt, rows, cols, 0, encoded)
					}
					r := newRand(b)
					x, dst := vec(r, n*cols, normal), make([]float32, n*rows)
					b.SetBytes(int64(len(w.Data)))
					for b.Loop() {
						kernels.MatMul(nil, dst, w, x, n)
					}
				})
			}
		}
	}
}

// BenchmarkMatMulPrefill is one 512-token prompt chunk through a 110M model's
// matrix shapes (768×768 attention, 2048×768 FFN up, 768×2048 FFN down),
// single-threaded: 512 inputs' activations no longer fit in L2 with the
// weight, so this is where loop order and cache blocking show. Bytes are the
// weight bytes.
func BenchmarkMatMulPrefill(b *testing.B) {
	const n = 512
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.F16, tensor.F32} {
		for _, sh := range [][2]int{{768, 768}, {2048, 768}, {768, 2048}} {
			rows, cols := sh[0], sh[1]
			b.Run(fmt.Sprintf("%v/%dx%d/n=%d", dt, rows, cols, n), func(b *testing.B) {
				r := newRand(b)
				w := makeWeight(r, dt, rows, cols, 0, encoded)
				x, dst := vec(r, n*cols, normal), make([]float32, n*rows)
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					kernels.MatMul(nil, dst, w, x, n)
				}
			})
		}
	}
}

// BenchmarkMatVecThreads is the decode product at a 110M model's FFN shape
// (768×2048) and TinyLlama's (2048×5632) on 1 and 2 threads (rows split
// across the Pool): whether a second core pays for its wake-up.
func BenchmarkMatVecThreads(b *testing.B) {
	for _, dt := range dtypes {
		for _, sh := range [][2]int{{768, 2048}, {2048, 5632}} {
			var w kernels.Weight
			for _, th := range []int{1, 2} {
				rows, cols := sh[0], sh[1]
				b.Run(fmt.Sprintf("%v/%dx%d/threads=%d", dt, rows, cols, th), func(b *testing.B) {
					r := newRand(b)
					if w.Data == nil {
						w = makeWeight(r, dt, rows, cols, 0, encoded)
					}
					x, dst := vec(r, cols, normal), make([]float32, rows)
					p := kernels.NewPool(th)
					defer p.Close()
					b.SetBytes(int64(len(w.Data)))
					for b.Loop() {
						kernels.MatVec(p, dst, w, x)
					}
				})
			}
		}
	}
}

// BenchmarkStreamRead sums 256 MiB with the widest loads the build has (64-bit
// words generic, 512-bit vectors with archsimd on AVX-512): the memory
// bandwidth one core can draw, the ceiling for a weight-streaming MatVec.
func BenchmarkStreamRead(b *testing.B) {
	buf := make([]byte, 256<<20)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.SetBytes(int64(len(buf)))
	var sink uint64
	for b.Loop() {
		sink += streamSum(buf)
	}
	if sink == 1 {
		b.Log(sink)
	}
}

func BenchmarkAttention(b *testing.B) {
	for _, n := range []int{256, 2048} {
		b.Run(fmt.Sprintf("ctx=%d", n), func(b *testing.B) {
			r := newRand(b)
			s := kernels.AttnShape{Heads: 32, KVHeads: 4, HeadDim: 64, Scale: 0.125}
			width := s.KVHeads * s.HeadDim
			kv := pagedKV(vec(r, n*width, normal), vec(r, n*width, normal), n, width, 256)
			q, dst := vec(r, s.Heads*s.HeadDim, normal), make([]float32, s.Heads*s.HeadDim)
			scratch := make([]float32, kernels.AttentionScratch(kv, 1))
			b.SetBytes(int64(2 * 4 * n * width))
			for b.Loop() {
				kernels.Attention(dst, q, 1, kv, nil, s, scratch)
			}
		})
	}
}

func BenchmarkPoolFor(b *testing.B) {
	p := kernels.NewPool(runtime.GOMAXPROCS(0))
	defer p.Close()
	fn := func(lo, hi int) {}
	for b.Loop() {
		p.For(64, fn)
	}
}

// BenchmarkMatVecDRAM is decode as a real model runs it: a 110M model's
// matrices (768×768, 2048×768, 768×2048) cycled through ~140 MB of weights, so
// every byte comes from DRAM rather than the L3 cache that holds a single
// BenchmarkMatMul weight, on 1 and 2 threads. Compare MB/s with
// BenchmarkStreamRead.
func BenchmarkMatVecDRAM(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.F16, tensor.F32} {
		var ws []kernels.Weight
		var total int64
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%v/threads=%d", dt, th), func(b *testing.B) {
				r := newRand(b)
				shapes := [][2]int{{768, 768}, {768, 768}, {768, 768}, {768, 768}, {2048, 768}, {2048, 768}, {768, 2048}}
				for total < 140<<20 {
					for _, sh := range shapes {
						w := makeWeight(r, dt, sh[0], sh[1], 0, encoded)
						ws = append(ws, w)
						total += int64(len(w.Data))
					}
				}
				p := kernels.NewPool(th)
				defer p.Close()
				x, dst := vec(r, 2048, normal), make([]float32, 2048)
				b.SetBytes(total)
				for b.Loop() {
					for _, w := range ws {
						kernels.MatVec(p, dst[:w.Rows], w, x[:w.Cols])
					}
				}
			})
		}
	}
}
