package spec_test

import (
	"fmt"

	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/spec"
)

// One round of chain speculative decoding: two proposals, the first
// accepted by the target, the second rejected and replaced from the
// residual.
func ExampleVerifyChain() {
	q := []sample.Dist{{Probs: []float32{0.5, 0.3, 0.2}}, {Probs: []float32{0.5, 0.3, 0.2}}}
	p := []sample.Dist{{Probs: []float32{0.2, 0.5, 0.3}}, {Probs: []float32{0, 0, 1}}, {Probs: []float32{1, 0, 0}}}
	draft := []int32{1, 0}             // token 1: p/q > 1, always kept; token 0: p = 0, never
	u := spec.KeyedUniforms(42, 0, 10) // request 0, first proposal at position 10
	accepted, next, err := spec.VerifyChain(p, q, draft, u, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("emit", draft[:accepted], "then", next)
	// Output:
	// emit [1] then 2
}

func ExamplePromptLookup() {
	history := []int32{7, 1, 2, 3, 4, 9, 1, 2, 3}
	draft, err := spec.PromptLookup(nil, history, spec.LookupOptions{MaxNgram: 3, MinNgram: 1, NumDraft: 3})
	if err != nil {
		panic(err)
	}
	fmt.Println(draft)
	// Output:
	// [4 9 1]
}
