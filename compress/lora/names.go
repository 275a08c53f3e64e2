package lora

import (
	"strconv"
	"strings"
)

// PEFT wraps the base model twice (PeftModel → LoraModel), so every saved key
// starts with this prefix; what follows is the module's path in the HF model.
const peftPrefix = "base_model.model."

// Suffixes of the tensors PEFT saves per module (adapter name already stripped).
const (
	suffixA     = ".lora_A.weight"
	suffixB     = ".lora_B.weight"
	suffixEmbA  = ".lora_embedding_A"
	suffixEmbB  = ".lora_embedding_B"
	suffixMagnt = ".lora_magnitude_vector" // DoRA
)

// layerModules maps the per-layer HF module paths (after "model.layers.N.")
// of the llama family (Llama, Mistral, Qwen2/3, SmolLM, TinyLlama) to GGUF.
var layerModules = map[string]string{
	"self_attn.q_proj": "attn_q",
	"self_attn.k_proj": "attn_k",
	"self_attn.v_proj": "attn_v",
	"self_attn.o_proj": "attn_output",
	"mlp.gate_proj":    "ffn_gate",
	"mlp.up_proj":      "ffn_up",
	"mlp.down_proj":    "ffn_down",
}

// topModules are the modules outside the layer stack.
var topModules = map[string]string{
	"model.embed_tokens": "token_embd",
	"lm_head":            "output",
}

// GGUFName maps an HF module path to the GGUF weight it adapts:
// "model.layers.3.self_attn.q_proj" → "blk.3.attn_q.weight",
// "model.embed_tokens" → "token_embd.weight", "lm_head" → "output.weight".
func GGUFName(module string) (string, bool) {
	if g, ok := topModules[module]; ok {
		return g + ".weight", true
	}
	rest, ok := strings.CutPrefix(module, "model.layers.")
	if !ok {
		return "", false
	}
	num, sub, ok := strings.Cut(rest, ".")
	if !ok || !isIndex(num) {
		return "", false
	}
	g, ok := layerModules[sub]
	if !ok {
		return "", false
	}
	return "blk." + num + "." + g + ".weight", true
}

// HFName is the inverse of GGUFName.
func HFName(tensor string) (string, bool) {
	base, ok := strings.CutSuffix(tensor, ".weight")
	if !ok {
		return "", false
	}
	for hf, g := range topModules {
		if g == base {
			return hf, true
		}
	}
	rest, ok := strings.CutPrefix(base, "blk.")
	if !ok {
		return "", false
	}
	num, g, ok := strings.Cut(rest, ".")
	if !ok || !isIndex(num) {
		return "", false
	}
	for hf, gg := range layerModules {
		if gg == g {
			return "model.layers." + num + "." + hf, true
		}
	}
	return "", false
}

// isIndex accepts a canonical non-negative decimal ("0", "12"; not "01", "+1").
func isIndex(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}

// PEFTNames returns the keys PEFT saves a module's A and B under.
func PEFTNames(module string, embedding bool) (a, b string) {
	if embedding {
		return peftPrefix + module + suffixEmbA, peftPrefix + module + suffixEmbB
	}
	return peftPrefix + module + suffixA, peftPrefix + module + suffixB
}

// splitPEFTName parses a saved key into its module path and which factor it is.
func splitPEFTName(name string) (module string, isB, embedding, ok bool) {
	rest, ok := strings.CutPrefix(name, peftPrefix)
	if !ok {
		return "", false, false, false
	}
	for _, s := range []struct {
		suffix    string
		isB, embd bool
	}{{suffixA, false, false}, {suffixB, true, false}, {suffixEmbA, false, true}, {suffixEmbB, true, true}} {
		if m, ok := strings.CutSuffix(rest, s.suffix); ok && m != "" {
			return m, s.isB, s.embd, true
		}
	}
	return "", false, false, false
}
