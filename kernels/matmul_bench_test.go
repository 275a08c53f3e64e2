package kernels_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/kernels"
)

// BenchmarkMatVec measures one matrix-vector product per dtype at the
// stories15M FFN shape (288×768) and the TinyLlama FFN shape (2048×5632).
// Bytes are the weight bytes streamed per call.
func BenchmarkMatVec(b *testing.B) {
	for _, dt := range dtypes {
		for _, sh := range [][2]int{{288, 768}, {2048, 5632}} {
			rows, cols := sh[0], sh[1]
			var w kernels.Weight
			var x, dst []float32
			for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
				b.Run(fmt.Sprintf("%v/%dx%d/threads=%d", dt, rows, cols, threads), func(b *testing.B) {
					if w.Data == nil { // build lazily: -bench filters skip the cost
						r := newRand(b)
						w = makeWeight(r, dt, rows, cols, 0, encoded)
						x, dst = vec(r, cols, normal), make([]float32, rows)
					}
					p := kernels.NewPool(threads)
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

// BenchmarkMatMul is a prompt chunk of 16 rows at 288×768 (weights decoded
// once per tile for all rows).
func BenchmarkMatMul(b *testing.B) {
	for _, dt := range dtypes {
		b.Run(dt.String(), func(b *testing.B) {
			r := newRand(b)
			const rows, cols, n = 288, 768, 16
			w := makeWeight(r, dt, rows, cols, 0, encoded)
			x, dst := vec(r, n*cols, normal), make([]float32, n*rows)
			b.SetBytes(int64(len(w.Data)))
			for b.Loop() {
				kernels.MatMul(nil, dst, w, x, n)
			}
		})
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
