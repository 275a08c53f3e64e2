package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/tensor"
)

// ConfigFile is the HF model configuration in a model directory.
const ConfigFile = "config.json"

// HFConfig is the part of a Hugging Face llama, mistral or qwen2
// config.json a GGUF needs.
type HFConfig struct {
	// Arch is the GGUF general.architecture the model converts to: "llama"
	// (LlamaForCausalLM, MistralForCausalLM) or "qwen2" (Qwen2ForCausalLM).
	// ParseHFConfig sets it from architectures / model_type.
	Arch                  string          `json:"-"`
	Architectures         []string        `json:"architectures"`
	ModelType             string          `json:"model_type"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      int             `json:"num_key_value_heads"` // 0: = NumAttentionHeads
	HeadDim               int             `json:"head_dim"`            // 0: HiddenSize / NumAttentionHeads
	RMSNormEps            float64         `json:"rms_norm_eps"`        // 0: 1e-6 (transformers' LlamaConfig default)
	RopeTheta             float64         `json:"rope_theta"`          // 0: 10000
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	VocabSize             int             `json:"vocab_size"`
	TieWordEmbeddings     bool            `json:"tie_word_embeddings"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
}

// supportedArchs are the HF architectures convert knows, and the GGUF
// architecture each becomes. Mistral converts to arch llama as llama.cpp
// converts it (which applies no sliding window for arch llama either).
// Qwen2 keeps HF's rotate-half RoPE layout (llama.cpp runs qwen2 with NEOX
// RoPE) and has Q, K and V biases; llama.cpp's qwen2 applies no sliding
// window either, so use_sliding_window is ignored as it ignores it.
var supportedArchs = map[string]string{"LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2"}

// modelTypes maps config.json's model_type to the GGUF architecture when
// architectures is absent.
var modelTypes = map[string]string{"llama": "llama", "mistral": "llama", "qwen2": "qwen2"}

// ParseHFConfig decodes and validates a config.json; path names it in errors.
// Keys it does not know are ignored (HF configs carry dozens of training
// settings); missing required keys, impossible shapes and architectures other
// than llama, mistral and qwen2 are errors.
func ParseHFConfig(data []byte, path string) (HFConfig, error) {
	var c HFConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return c, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	c.Arch = modelTypes[c.ModelType]
	for _, a := range c.Architectures {
		arch, ok := supportedArchs[a]
		if !ok {
			return c, fmt.Errorf("%w: %s: unknown architecture %q (want LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM)", ErrUnsupported, path, a)
		}
		if c.Arch != "" && c.Arch != arch && c.ModelType != "" {
			return c, fmt.Errorf("%w: %s: architectures %q and model_type %q disagree", ErrConfig, path, a, c.ModelType)
		}
		c.Arch = arch
	}
	if c.Arch == "" {
		return c, fmt.Errorf("%w: %s: unknown architecture: model_type %q, architectures %q (want llama, mistral or qwen2)", ErrUnsupported, path, c.ModelType, c.Architectures)
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.MaxPositionEmbeddings == 0 {
		c.MaxPositionEmbeddings = 2048
	}
	const limit = 1 << 24
	for _, f := range []struct {
		key string
		v   int
	}{
		{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"max_position_embeddings", c.MaxPositionEmbeddings},
		{"vocab_size", c.VocabSize},
	} {
		if f.v <= 0 || f.v > limit {
			return c, fmt.Errorf("%w: %s: %s is %d: want 1 to %d", ErrConfig, path, f.key, f.v, limit)
		}
	}
	switch {
	case c.HiddenSize%c.NumAttentionHeads != 0 || (c.HiddenSize/c.NumAttentionHeads)%2 != 0:
		return c, fmt.Errorf("%w: %s: hidden_size %d is not num_attention_heads %d times an even head size", ErrConfig, path, c.HiddenSize, c.NumAttentionHeads)
	case c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return c, fmt.Errorf("%w: %s: num_attention_heads %d is not a multiple of num_key_value_heads %d", ErrConfig, path, c.NumAttentionHeads, c.NumKeyValueHeads)
	case c.HeadDim != 0 && c.HeadDim != c.HiddenSize/c.NumAttentionHeads:
		return c, fmt.Errorf("%w: %s: head_dim %d is not hidden_size/num_attention_heads = %d", ErrUnsupported, path, c.HeadDim, c.HiddenSize/c.NumAttentionHeads)
	case len(c.RopeScaling) > 0 && string(c.RopeScaling) != "null":
		return c, fmt.Errorf("%w: %s: rope_scaling %s", ErrUnsupported, path, c.RopeScaling)
	case !(c.RMSNormEps > 0 && c.RMSNormEps < 1) || math.IsNaN(c.RMSNormEps):
		return c, fmt.Errorf("%w: %s: rms_norm_eps %g: want 0 < eps < 1", ErrConfig, path, c.RMSNormEps)
	case !(c.RopeTheta > 0) || math.IsInf(c.RopeTheta, 0) || c.RopeTheta > math.MaxFloat32:
		return c, fmt.Errorf("%w: %s: rope_theta %g: want a positive float32", ErrConfig, path, c.RopeTheta)
	}
	return c, nil
}

// hfTensor is one weight a GGUF needs, under both names.
type hfTensor struct {
	hf, gguf string
	shape    []int
	permute  int // > 0: permute rows for this many heads (Q and K)
}

// hfTensors lists, in GGUF order, the tensors c describes. For llama, Q and
// K rows are permuted from HF's rotate-half layout to GGML's adjacent pairs;
// qwen2 keeps them (NEOX RoPE) and adds the Q, K and V biases.
func hfTensors(c HFConfig) []hfTensor {
	d, h, v := c.HiddenSize, c.IntermediateSize, c.VocabSize
	kv := d / c.NumAttentionHeads * c.NumKeyValueHeads
	qp, kp := c.NumAttentionHeads, c.NumKeyValueHeads
	if c.Arch != "llama" {
		qp, kp = 0, 0
	}
	ts := []hfTensor{
		{hf: "model.embed_tokens.weight", shape: []int{v, d}},
		{hf: "model.norm.weight", gguf: "output_norm.weight", shape: []int{d}},
	}
	if !c.TieWordEmbeddings {
		ts = append(ts, hfTensor{hf: "lm_head.weight", shape: []int{v, d}})
	}
	for l := range c.NumHiddenLayers {
		p := "model.layers." + strconv.Itoa(l) + "."
		b := "blk." + strconv.Itoa(l) + "."
		ts = append(ts,
			hfTensor{hf: p + "input_layernorm.weight", gguf: b + "attn_norm.weight", shape: []int{d}},
			hfTensor{hf: p + "self_attn.q_proj.weight", shape: []int{d, d}, permute: qp},
			hfTensor{hf: p + "self_attn.k_proj.weight", shape: []int{kv, d}, permute: kp},
			hfTensor{hf: p + "self_attn.v_proj.weight", shape: []int{kv, d}},
		)
		if c.Arch == "qwen2" {
			ts = append(ts,
				hfTensor{hf: p + "self_attn.q_proj.bias", gguf: b + "attn_q.bias", shape: []int{d}},
				hfTensor{hf: p + "self_attn.k_proj.bias", gguf: b + "attn_k.bias", shape: []int{kv}},
				hfTensor{hf: p + "self_attn.v_proj.bias", gguf: b + "attn_v.bias", shape: []int{kv}},
			)
		}
		ts = append(ts,
			hfTensor{hf: p + "self_attn.o_proj.weight", shape: []int{d, d}},
			hfTensor{hf: p + "post_attention_layernorm.weight", gguf: b + "ffn_norm.weight", shape: []int{d}},
			hfTensor{hf: p + "mlp.gate_proj.weight", shape: []int{h, d}},
			hfTensor{hf: p + "mlp.up_proj.weight", shape: []int{h, d}},
			hfTensor{hf: p + "mlp.down_proj.weight", shape: []int{d, h}},
		)
	}
	for i := range ts {
		if ts[i].gguf == "" {
			// the linear layers: the same mapping LoRA adapters use
			ts[i].gguf, _ = lora.GGUFName(strings.TrimSuffix(ts[i].hf, ".weight"))
		}
	}
	return ts
}

// HF converts the Hugging Face llama, mistral or qwen2 model in dir.
func HF(dir string, o Options) (*gguf.Writer, error) {
	cfgPath := filepath.Join(dir, ConfigFile)
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("convert: %w", err)
	}
	c, err := ParseHFConfig(data, cfgPath)
	if err != nil {
		return nil, err
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	want := hfTensors(c)
	known := map[string]bool{}
	for _, t := range want {
		known[t.hf] = true
	}
	for _, name := range set.Names() {
		switch {
		case known[name]:
		case strings.HasSuffix(name, ".rotary_emb.inv_freq"): // old exports: recomputed from rope_theta
		case name == "lm_head.weight" && c.TieWordEmbeddings: // a tied copy
		default:
			fi, _, _ := set.Tensor(name)
			return nil, fmt.Errorf("%w: %s: tensor %q has no GGUF %s name", ErrUnsupported, set.Files[fi].Path, name, c.Arch)
		}
	}
	m := metadata{
		arch: c.Arch, hfDir: dir, name: o.Name, dim: c.HiddenSize, hidden: c.IntermediateSize, layers: c.NumHiddenLayers,
		heads: c.NumAttentionHeads, kvHeads: c.NumKeyValueHeads, context: c.MaxPositionEmbeddings,
		vocab: c.VocabSize, ropeBase: float32(c.RopeTheta), eps: float32(c.RMSNormEps),
	}
	if m.name == "" {
		m.name = filepath.Base(filepath.Clean(dir))
	}
	w := gguf.NewWriter()
	if err := m.write(w, dir, o); err != nil {
		return nil, err
	}
	for _, t := range want {
		fi, info, ok := set.Tensor(t.hf)
		if !ok {
			return nil, fmt.Errorf("%w: %s: %s (GGUF %s, shape %v)", ErrMissing, dir, t.hf, t.gguf, t.shape)
		}
		file := set.Files[fi].Path
		if !slices.Equal(info.Shape, t.shape) {
			return nil, fmt.Errorf("%w: %s: tensor %s has shape %v, %s says %v", ErrShape, file, t.hf, info.Shape, ConfigFile, t.shape)
		}
		v, err := set.ReadF32(t.hf)
		if err != nil {
			return nil, err
		}
		if t.permute > 0 {
			if err := lora.PermuteRows(v, t.shape[0], t.shape[1], t.permute); err != nil {
				return nil, fmt.Errorf("convert: %s: tensor %s: %w", file, t.hf, err)
			}
		}
		if err := w.AddTensor(t.gguf, tensor.F32, t.shape, tensor.F32Bytes(v)); err != nil {
			return nil, fmt.Errorf("convert: %s: %w", file, err)
		}
	}
	return w, nil
}
