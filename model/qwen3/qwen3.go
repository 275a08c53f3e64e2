// Package qwen3 is the (dense) Qwen3 architecture: llama's block with an
// RMSNorm over each head of the queries and keys before RoPE, RoPE over the
// two halves of each head (ggml's NEOX rope), no biases, and a head size
// (attention.key_length) independent of the width, as llama.cpp builds it.
package qwen3

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
)

func init() { model.Default.MustRegister(Variant.Name, Variant.New) }

// Variant is qwen3 as a llama variant.
var Variant = llama.Variant{
	Name:      "qwen3",
	RopeStyle: kernels.RopeHalf,
	Require:   []string{"attn_q_norm.weight", "attn_k_norm.weight"},
}

// ReadArch reads the hyperparameters of a qwen3 file.
func ReadArch(src *model.Source) (model.Arch, error) { return Variant.ReadArch(src) }
