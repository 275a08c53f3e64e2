package lora_test

import (
	"fmt"

	"github.com/sluicehq/sluice/compress/lora"
)

// The seed's example in sluice's y = W x convention: W = [[1,3],[2,4]],
// A = [[1, 0]] (r×in), B = [[0.5],[0.5]] (out×r), α = 2, r = 1.
func Example() {
	cfg := lora.DefaultConfig()
	cfg.R, cfg.Alpha = 1, 2
	cfg.TargetModules = lora.Targets{Names: []string{"q_proj"}}
	a, b := lora.PEFTNames("model.layers.0.self_attn.q_proj", false)
	ad, err := lora.New(cfg, []lora.Tensor{
		{Name: a, Shape: []int{1, 2}, Data: []float32{1, 0}},
		{Name: b, Shape: []int{2, 1}, Data: []float32{0.5, 0.5}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := ad.Module("blk.0.attn_q.weight")

	w := []float32{1, 3, 2, 4}
	_ = m.Merge(w, 2, 2)
	fmt.Println("merged W':", w)

	y := []float32{4, 6} // W x for x = (1, 1), before the adapter
	m.Apply(y, []float32{1, 1}, 1)
	fmt.Println("unmerged y:", y)
	// Output:
	// merged W': [2 3 3 4]
	// unmerged y: [5 7]
}
