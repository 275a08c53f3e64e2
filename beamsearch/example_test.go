package beamsearch_test

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/beamsearch"
)

// The seed text's beam example: greedy finds A, continue (0.24); two beams
// find B, end (0.36).
func Example() {
	const A, B, cont, o1, o2, end = 0, 1, 2, 3, 4, 5
	next := func(seq []int32) []float32 {
		p := map[int32]float64{}
		switch {
		case len(seq) == 0:
			p = map[int32]float64{A: .6, B: .4}
		case len(seq) == 1 && seq[0] == A:
			p = map[int32]float64{cont: .4, o1: .3, o2: .3}
		case len(seq) == 1 && seq[0] == B:
			p = map[int32]float64{end: .9, o1: .1}
		default:
			p = map[int32]float64{end: 1}
		}
		row := make([]float32, 6)
		for i := range row {
			row[i] = float32(math.Log(p[int32(i)]))
		}
		return row
	}
	b, err := beamsearch.New(beamsearch.Options{NumBeams: 2, EOS: []int32{end}, MaxNewTokens: 8, Vocab: 6})
	if err != nil {
		panic(err)
	}
	for !b.Done() {
		rows := make([][]float32, b.Live())
		for i := range rows {
			rows[i] = next(b.Tokens(i))
		}
		if _, _, _, err := b.Step(rows); err != nil {
			panic(err)
		}
	}
	best := b.Results()[0]
	fmt.Printf("%v p=%.2f\n", best.Tokens, math.Exp(best.Score))
	// Output:
	// [1 5] p=0.36
}
