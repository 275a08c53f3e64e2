// Package qwen2 is the Qwen2 and Qwen2.5 architecture: llama's block with
// biases on the Q, K and V projections and RoPE over the two halves of each
// head (GGUF qwen2 keeps the checkpoint's unpermuted rows; ggml's NEOX rope),
// as llama.cpp builds it (tied output when output.weight is absent).
package qwen2

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
)

func init() { model.Default.MustRegister(Variant.Name, Variant.New) }

// Variant is qwen2 as a llama variant.
var Variant = llama.Variant{
	Name:      "qwen2",
	RopeStyle: kernels.RopeHalf,
	Require:   []string{"attn_q.bias", "attn_k.bias", "attn_v.bias"},
}

// ReadArch reads the hyperparameters of a qwen2 file.
func ReadArch(src *model.Source) (model.Arch, error) { return Variant.ReadArch(src) }
