package safetensors_test

import (
	"bytes"
	"fmt"

	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/tensor"
)

func Example() {
	w, _ := safetensors.NewTensor("model.layers.0.mlp.up_proj.weight", tensor.BF16, []int{2, 3}, []float32{1, 2, 3, 4, 5, 6})
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, []safetensors.Tensor{w}, map[string]string{"format": "pt"}); err != nil {
		fmt.Println(err)
		return
	}
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "up.safetensors")
	if err != nil {
		fmt.Println(err)
		return
	}
	info := f.Tensors[0]
	v, _ := f.ReadF32(info.Name)
	fmt.Println(info.Name, info.DType, info.Shape, "at", info.Offset, v)
	// Output: model.layers.0.mlp.up_proj.weight bf16 [2 3] at 136 [1 2 3 4 5 6]
}
