// Package archs registers every architecture sluice runs in model.Default;
// import it for its side effect.
package archs

import (
	_ "github.com/sluicehq/sluice/model/gemma" // gemma2 (Gemma 2), gemma3 (Gemma 3 text)
	_ "github.com/sluicehq/sluice/model/llama" // llama (Llama 2/3, Mistral, TinyLlama, SmolLM)
	_ "github.com/sluicehq/sluice/model/phi3"  // phi3 (Phi-3, Phi-3.5 at their original context)
	_ "github.com/sluicehq/sluice/model/qwen2" // qwen2 (Qwen2, Qwen2.5)
	_ "github.com/sluicehq/sluice/model/qwen3" // qwen3 (dense Qwen3)
)
