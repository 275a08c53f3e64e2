package convert_test

import (
	"fmt"

	"github.com/sluicehq/sluice/convert"
)

func ExampleParseHFConfig() {
	c, err := convert.ParseHFConfig([]byte(`{
		"architectures": ["LlamaForCausalLM"], "hidden_size": 2048, "intermediate_size": 5632,
		"num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
		"vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}`), "config.json")
	fmt.Println(c.HiddenSize/c.NumAttentionHeads, c.NumKeyValueHeads, c.RopeTheta, c.RMSNormEps, err)
	_, err = convert.ParseHFConfig([]byte(`{"architectures": ["MambaForCausalLM"]}`), "config.json")
	fmt.Println(err)
	// Output:
	// 64 4 10000 1e-06 <nil>
	// convert: unsupported: config.json: unknown architecture "MambaForCausalLM" (want LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM)
}
