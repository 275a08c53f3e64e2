package sample_test

import (
	"fmt"

	"github.com/sluicehq/sluice/sample"
)

func Example() {
	s, err := sample.New(sample.Options{Temperature: 1, TopK: 3, TopP: 0.9, Seed: 42})
	if err != nil {
		panic(err)
	}
	logits := []float32{2, 0.5, 3, -1, 1}
	var sc sample.Scratch // reused across steps: no allocation once warm
	d, err := s.Dist(logits, nil, &sc)
	if err != nil {
		panic(err)
	}
	for i, id := range d.IDs {
		fmt.Printf("id %d p=%.3f\n", id, d.Probs[i])
	}
	// The draw for request 0, position 5 is fixed by the seed, whatever else ran.
	tok, err := s.Next(logits, nil, 0, 5, &sc)
	if err != nil {
		panic(err)
	}
	fmt.Println("next:", tok)
	// Output:
	// id 2 p=0.731
	// id 0 p=0.269
	// next: 2
}

func ExampleUniform() {
	fmt.Printf("%.6f\n", sample.Uniform(0, 0, 0))
	fmt.Println(sample.Uniform(7, 1, 2) == sample.Uniform(7, 1, 2))
	// Output:
	// 0.788857
	// true
}
