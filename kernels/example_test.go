package kernels_test

import (
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/tensor"
)

// The seed text's tiny trace: one head of d = 2, queries and keys equal to the
// tokens, values the tokens with the second number doubled, causal attention.
func ExampleAttention() {
	tokens := []float32{1, 0, 0, 1, 1, 1} // (1,0), (0,1), (1,1)
	values := []float32{1, 0, 0, 2, 1, 2}
	kv := kernels.KV{K: [][]float32{tokens}, V: [][]float32{values}, PageTokens: 3, Len: 3}
	var mask kernels.Mask
	kernels.CausalMask(&mask, []int32{0, 1, 2}, 0)
	shape := kernels.AttnShape{Heads: 1, KVHeads: 1, HeadDim: 2, Scale: float32(1 / math.Sqrt(2))}

	out := make([]float32, 6)
	kernels.Attention(out, tokens, 3, kv, &mask, shape, make([]float32, kernels.AttentionScratch(kv, 3)))
	for i := 0; i < 3; i++ {
		fmt.Printf("(%.2f, %.2f)\n", out[2*i], out[2*i+1])
	}
	// Output:
	// (1.00, 0.00)
	// (0.33, 1.34)
	// (0.75, 1.50)
}

// A pool shared by every kernel call of a forward pass; nil would run inline.
func ExampleMatVec() {
	p := kernels.NewPool(2)
	defer p.Close()
	// w = [[1 2] [3 4] [5 6]] as little-endian f32.
	w := kernels.Weight{DType: tensor.F32, Rows: 3, Cols: 2, Data: []byte{
		0, 0, 0x80, 0x3f, 0, 0, 0, 0x40,
		0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40,
		0, 0, 0xa0, 0x40, 0, 0, 0xc0, 0x40,
	}}
	dst := make([]float32, 3)
	kernels.MatVec(p, dst, w, []float32{1, 10})
	fmt.Println(dst)
	// Output: [21 43 65]
}
