package prune

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// denseMatVec is a plain float32 matvec with four accumulators, the dense
// baseline the 2:4 kernel is measured against (same loop style, no SIMD).
func denseMatVec(dst, w, x []float32, rows, cols int) {
	x = x[:cols]
	for r := range dst[:rows] {
		row := w[r*cols : (r+1)*cols]
		var a0, a1, a2, a3 float32
		c := 0
		for ; c+4 <= cols; c += 4 {
			a0 += row[c] * x[c]
			a1 += row[c+1] * x[c+1]
			a2 += row[c+2] * x[c+2]
			a3 += row[c+3] * x[c+3]
		}
		for ; c < cols; c++ {
			a0 += row[c] * x[c]
		}
		dst[r] = (a0 + a1) + (a2 + a3)
	}
}

// BenchmarkMatVec24 compares the compressed 2:4 matvec with the dense f32
// matvec on the same pruned matrices (rows × cols as (out, in)). SetBytes is
// the weight bytes each kernel reads, so MB/s compares memory traffic and
// ns/op compares time.
func BenchmarkMatVec24(b *testing.B) {
	for _, sh := range [][2]int{{288, 768}, {768, 2048}, {2048, 5632}} {
		rows, cols := sh[0], sh[1]
		r := rand.New(rand.NewPCG(uint64(rows), uint64(cols)))
		w := randWeights(r, rows*cols, false)
		if err := NM(w, rows, cols, 2, 4); err != nil {
			b.Fatal(err)
		}
		s, err := Compress24(w, rows, cols)
		if err != nil {
			b.Fatal(err)
		}
		x := randWeights(r, cols, false)
		dst := make([]float32, rows)
		b.Run(fmt.Sprintf("dense/%dx%d", rows, cols), func(b *testing.B) {
			b.SetBytes(int64(4 * rows * cols))
			for b.Loop() {
				denseMatVec(dst, w, x, rows, cols)
			}
		})
		b.Run(fmt.Sprintf("sparse24/%dx%d", rows, cols), func(b *testing.B) {
			b.SetBytes(s.Bytes())
			for b.Loop() {
				s.MatVec(dst, x)
			}
		})
	}
}

// BenchmarkMagnitude measures an unstructured 50% prune of one large matrix.
func BenchmarkMagnitude(b *testing.B) {
	const n = 768 * 2048
	src := randWeights(rand.New(rand.NewPCG(1, 1)), n, false)
	w := make([]float32, n)
	b.SetBytes(4 * n)
	for b.Loop() {
		copy(w, src)
		Magnitude(w, 0.5)
	}
}
