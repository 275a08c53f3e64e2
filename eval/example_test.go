package eval_test

import (
	"fmt"

	"github.com/sluicehq/sluice/eval"
)

// A model that is unsure between two tokens, scored against a reference
// that is sure of the first.
func ExampleStats() {
	var s eval.Stats
	model := []float32{0, 0, -100}  // P ≈ (½, ½, 0)
	ref := []float32{10, -10, -100} // P ≈ (1, 0, 0)
	if err := s.Add(model, ref, 0); err != nil {
		panic(err)
	}
	fmt.Printf("perplexity %.3f, KL %.3f nats, top-1 agreement %.0f\n", s.Perplexity(), s.MeanKL(), s.Top1Agreement())
	// Output: perplexity 2.000, KL 0.693 nats, top-1 agreement 1
}
