package synth_test

import (
	"bytes"
	"fmt"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

func ExampleWrite() {
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		panic(err)
	}
	var buf bytes.Buffer
	if err := synth.Write(&buf, synth.Options{Preset: p, DType: tensor.Q8_0, Seed: 1}); err != nil {
		panic(err)
	}
	f, err := gguf.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "tiny.gguf")
	if err != nil {
		panic(err)
	}
	layers, _ := f.Uint("llama.block_count")
	q, _ := f.Tensor("blk.0.attn_q.weight")
	down, _ := f.Tensor("blk.0.ffn_down.weight")
	fmt.Println(f.Arch(), layers, "layers,", len(f.Tensors), "tensors,", p.Params(), "weights")
	fmt.Println(q.Name, q.DType, q.Shape)
	fmt.Println(down.Name, down.DType, down.Shape, "(176 is no whole number of q8_0 blocks)")
	// Output:
	// llama 2 layers, 21 tensors, 158016 weights
	// blk.0.attn_q.weight q8_0 [64 64]
	// blk.0.ffn_down.weight f16 [64 176] (176 is no whole number of q8_0 blocks)
}
