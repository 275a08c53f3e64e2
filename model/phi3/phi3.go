// Package phi3 is the Phi-3 architecture (Phi-3 and Phi-3.5 mini/medium with
// their original context): llama's block with the Q, K and V projections
// fused into one attn_qkv matrix, the gate and up projections fused into one
// ffn_up of twice the feed-forward width (gate rows first), and RoPE over
// the two halves of each head (ggml's NEOX rope), as llama.cpp builds it.
// llama.cpp applies no sliding window to phi3 (attention.sliding_window is
// ignored); sluice matches it. The long-context variants' rope_factors_long
// and rope_factors_short are refused.
package phi3

import (
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
)

func init() { model.Default.MustRegister(Variant.Name, Variant.New) }

// Variant is phi3 as a llama variant.
var Variant = llama.Variant{
	Name:        "phi3",
	RopeStyle:   kernels.RopeHalf,
	FusedGateUp: true,
	Unsupported: []string{"rope_factors_long.weight", "rope_factors_short.weight"},
}

// ReadArch reads the hyperparameters of a phi3 file.
func ReadArch(src *model.Source) (model.Arch, error) { return Variant.ReadArch(src) }
