package quant

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkDot measures one row dot product per scheme (bytes = quantized row).
func BenchmarkDot(b *testing.B) {
	for _, cols := range []int{768, 5632} {
		r := rand.New(rand.NewPCG(1, uint64(cols)))
		w, x := randRow(r, cols), randRow(r, cols)
		for _, s := range Schemes() {
			q := make([]byte, s.RowBytes(cols))
			s.QuantizeRow(q, w)
			b.Run(fmt.Sprintf("%v/cols=%d", s, cols), func(b *testing.B) {
				b.SetBytes(int64(len(q)))
				for b.Loop() {
					s.Dot(q, x)
				}
			})
		}
	}
}

// BenchmarkQuantizeRow measures encoding (bytes = float32 input).
func BenchmarkQuantizeRow(b *testing.B) {
	const cols = 4096
	w := randRow(rand.New(rand.NewPCG(2, 2)), cols)
	for _, s := range Schemes() {
		q := make([]byte, s.RowBytes(cols))
		b.Run(s.String(), func(b *testing.B) {
			b.SetBytes(4 * cols)
			for b.Loop() {
				s.QuantizeRow(q, w)
			}
		})
	}
}
