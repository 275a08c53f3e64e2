package prune_test

import (
	"fmt"

	"github.com/sluicehq/sluice/compress/prune"
)

func Example() {
	// The seed's matrix, pruned to 50% by magnitude.
	w := []float32{0.5, -0.1, 0.3, 0.05, -0.8, 0.2}
	k, _ := prune.Magnitude(w, 0.5)
	fmt.Println(k, w)

	// 2:4 along each row, compressed, multiplied without touching the zeros.
	m := []float32{1, -3, 2, 0.5, 4, 0.1, 0.2, 5}
	_ = prune.NM(m, 1, 8, 2, 4)
	s, _ := prune.Compress24(m, 1, 8)
	y := make([]float32, 1)
	s.MatVec(y, []float32{1, 1, 1, 1, 1, 1, 1, 1})
	fmt.Println(m, s.Values, y)
	// Output:
	// 3 [0.5 0 0.3 0 -0.8 0]
	// [0 -3 2 0 4 0 0 5] [-3 2 4 5] [8]
}
