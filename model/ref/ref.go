// Package ref is the oracle: a plain, single-function forward pass of a
// llama-family model over float32 weights, one token at a time, in the manner
// of llama2.c's run.c. It uses kernels/ref only. Every fast path in sluice is
// tested against it; it is never used to serve.
//
// It runs the architectures built from llama's block: llama (with Llama 3's
// rotary frequency factors), qwen2 (Q/K/V biases, half-split RoPE) and qwen3
// (per-head Q/K RMSNorm) and phi3 (fused attn_qkv and gate|up, split here
// into Q, K, V, Gate and Up). Whatever optional tensor a file holds (biases,
// Q/K norms, rope_freqs) is applied, as llama.cpp applies it.
//
// It also runs gemma2 and gemma3 (model/gemma): the embedding scaled by
// √dim, queries scaled after RoPE, attention scores and logits soft-capped,
// post-attention and post-feed-forward norms, the GELU-gated feed-forward
// network, and per layer the sliding window and RoPE base of local layers.
package ref

import (
	"context"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/kernels"
	kref "github.com/sluicehq/sluice/kernels/ref"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/gemma"
	"github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/model/phi3"
	"github.com/sluicehq/sluice/model/qwen2"
	"github.com/sluicehq/sluice/model/qwen3"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

// Weights are every tensor decoded to float32, shapes as commented (row-major, out×in).
type Weights struct {
	TokenEmbd  []float32   // (vocab, dim)
	AttnNorm   [][]float32 // (layer)(dim)
	Q, K, V, O [][]float32 // (layer)(heads*hd, dim), (kvHeads*hd, dim) ×2, (dim, heads*hd)
	FFNNorm    [][]float32 // (layer)(dim)
	Gate, Up   [][]float32 // (layer)(hidden, dim)
	Down       [][]float32 // (layer)(dim, hidden)
	OutputNorm []float32   // (dim)
	Output     []float32   // (vocab, dim)
	// Optional, nil when the file lacks them (per layer, or nil slices):
	QBias, KBias, VBias, OBias [][]float32 // (layer)(heads*hd), (kvHeads*hd) ×2, (dim)
	QNorm, KNorm               [][]float32 // (layer)(hd)
	RopeFactors                []float32   // (ropeDim/2) divisors of the rotary frequencies
	// Gemma's norms of the attention and feed-forward outputs (nil otherwise).
	AttnPostNorm, FFNPostNorm [][]float32 // (layer)(dim)
}

// readArch is each architecture's hyperparameter reader.
var readArch = map[string]func(*model.Source) (model.Arch, error){
	"llama":  llama.ReadArch,
	"qwen2":  qwen2.ReadArch,
	"qwen3":  qwen3.ReadArch,
	"phi3":   phi3.ReadArch,
	"gemma2": gemma.ReadArch,
	"gemma3": gemma.ReadArch,
}

// Transformer is run.c's Transformer: config, weights and run state.
type Transformer struct {
	Arch model.Arch
	W    Weights
	// Gemma is the gemma hyperparameters of a gemma2/gemma3 file (nil for
	// the llama family).
	Gemma *gemma.Params
	// KVType is the element type the cache stores K and V in: tensor.F32
	// (the zero value: llama2.c's cache) or tensor.F16, each value rounded
	// to binary16 (nearest even, tensor.F32ToF16) when written and read back
	// widened, as the engine's F16 KV cache does. Set it before Forward.
	KVType tensor.DType
	// run state (llama2.c RunState)
	x, xb, xb2, hb, hb2, q, k, v, att, logits []float32
	keyCache, valueCache                      [][]float32 // (layer)(seqLen, kvDim)
	seqLen                                    int
}

// New decodes every weight of src through store. seqLen bounds the positions
// Forward accepts (0 = the model's context length).
func New(ctx context.Context, src *model.Source, store offload.Store, seqLen int) (*Transformer, error) {
	read, ok := readArch[src.Config.Architecture()]
	if !ok {
		return nil, fmt.Errorf("ref: %s: architecture %q is not one the oracle runs", src.Path, src.Config.Architecture())
	}
	a, err := read(src)
	if err != nil {
		return nil, err
	}
	if seqLen <= 0 {
		seqLen = a.Context
	}
	load := func(name string) ([]float32, error) {
		r, ok := store.Lookup(name)
		if !ok {
			return nil, fmt.Errorf("ref: %s: missing tensor %s", src.Path, name)
		}
		p, err := store.Acquire(ctx, r)
		if err != nil {
			return nil, err
		}
		defer p.Release()
		n := int(tensor.Info{Shape: r.Shape}.Elements())
		out := make([]float32, n)
		rows, cols := r.Rows(), r.Cols()
		rb, err := r.DType.RowBytes(cols)
		if err != nil {
			return nil, fmt.Errorf("ref: %s: %s: %w", src.Path, name, err)
		}
		// A store may keep a matrix in a kernel layout (offload.LayoutOf):
		// model.Row decodes the file's rows from any of them.
		m := kernels.Weight{DType: r.DType, Data: p.Bytes(), Rows: rows, Cols: cols, Layout: offload.LayoutOf(p)}
		if len(p.Bytes()) < rows*int(rb) {
			return nil, fmt.Errorf("ref: %s: %s: %d bytes, want %d", src.Path, name, len(p.Bytes()), rows*int(rb))
		}
		for i := range rows {
			model.Row(out[i*cols:(i+1)*cols], m, i)
		}
		return out, nil
	}
	t := &Transformer{Arch: a, seqLen: seqLen}
	if a.Name == "gemma2" || a.Name == "gemma3" {
		g, err := gemma.ReadParams(src)
		if err != nil {
			return nil, err
		}
		t.Gemma = &g
	}
	w := &t.W
	if w.TokenEmbd, err = load("token_embd.weight"); err != nil {
		return nil, err
	}
	if w.OutputNorm, err = load("output_norm.weight"); err != nil {
		return nil, err
	}
	if a.TiedOutput {
		w.Output = w.TokenEmbd
	} else if w.Output, err = load("output.weight"); err != nil {
		return nil, err
	}
	// entry is a per-layer tensor and the slice it is appended to.
	type entry struct {
		dst  *[][]float32
		name string
	}
	for l := range a.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		names := []entry{
			{&w.AttnNorm, "attn_norm.weight"}, {&w.O, "attn_output.weight"}, {&w.FFNNorm, "ffn_norm.weight"},
			{&w.Down, "ffn_down.weight"},
		}
		if t.Gemma != nil {
			names = append(names, entry{&w.AttnPostNorm, "post_attention_norm.weight"}, entry{&w.FFNPostNorm, "post_ffw_norm.weight"})
		}
		qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
		if _, fused := store.Lookup(p + "attn_qkv.weight"); fused {
			qkv, err := load(p + "attn_qkv.weight") // rows: Q, then K, then V
			if err != nil {
				return nil, err
			}
			w.Q = append(w.Q, qkv[:qd*a.Dim])
			w.K = append(w.K, qkv[qd*a.Dim:(qd+kvd)*a.Dim])
			w.V = append(w.V, qkv[(qd+kvd)*a.Dim:])
		} else {
			names = append(names, entry{&w.Q, "attn_q.weight"}, entry{&w.K, "attn_k.weight"}, entry{&w.V, "attn_v.weight"})
		}
		if _, gated := store.Lookup(p + "ffn_gate.weight"); gated {
			names = append(names, entry{&w.Gate, "ffn_gate.weight"}, entry{&w.Up, "ffn_up.weight"})
		} else {
			gu, err := load(p + "ffn_up.weight") // rows: gate, then up
			if err != nil {
				return nil, err
			}
			w.Gate = append(w.Gate, gu[:a.Hidden*a.Dim])
			w.Up = append(w.Up, gu[a.Hidden*a.Dim:])
		}
		for _, e := range names {
			v, err := load(p + e.name)
			if err != nil {
				return nil, err
			}
			*e.dst = append(*e.dst, v)
		}
		for _, e := range []entry{
			{&w.QBias, "attn_q.bias"}, {&w.KBias, "attn_k.bias"}, {&w.VBias, "attn_v.bias"},
			{&w.OBias, "attn_output.bias"}, {&w.QNorm, "attn_q_norm.weight"}, {&w.KNorm, "attn_k_norm.weight"},
		} {
			var v []float32
			if _, ok := store.Lookup(p + e.name); ok {
				if v, err = load(p + e.name); err != nil {
					return nil, err
				}
			}
			*e.dst = append(*e.dst, v)
		}
	}
	if t.Gemma == nil {
		if w.RopeFactors, err = llama.RopeFactors(ctx, src, store, a); err != nil {
			return nil, err
		}
	}
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	t.x, t.xb = make([]float32, a.Dim), make([]float32, a.Dim)
	t.xb2 = make([]float32, a.Dim)
	t.hb, t.hb2 = make([]float32, a.Hidden), make([]float32, a.Hidden)
	t.q, t.k, t.v, t.att = make([]float32, qd), make([]float32, kvd), make([]float32, kvd), make([]float32, qd)
	t.logits = make([]float32, a.Vocab)
	for range a.Layers {
		t.keyCache = append(t.keyCache, make([]float32, seqLen*kvd))
		t.valueCache = append(t.valueCache, make([]float32, seqLen*kvd))
	}
	return t, nil
}

// roundF16 rounds x to binary16 values in place.
func roundF16(x []float32) {
	for i, v := range x {
		x[i] = tensor.F16ToF32(tensor.F32ToF16(v))
	}
}

// addOpt adds an optional bias (nil: none).
func addOpt(x, bias []float32) {
	if bias != nil {
		kref.Add(x, bias)
	}
}

func matmul(dst, x, w []float32, rows, cols int) {
	kref.MatMul(dst, kernels.Weight{DType: tensor.F32, Data: f32bytes(w), Rows: rows, Cols: cols}, x, 1)
}

// Forward runs token at pos and returns the logits (valid until the next call).
// Positions must be fed in order 0, 1, 2, … (the cache holds one sequence).
func (t *Transformer) Forward(token int32, pos int) ([]float32, error) {
	a, w := t.Arch, &t.W
	if pos < 0 || pos >= t.seqLen {
		return nil, fmt.Errorf("ref: position %d outside [0,%d)", pos, t.seqLen)
	}
	if token < 0 || int(token) >= a.Vocab {
		return nil, fmt.Errorf("ref: token %d outside [0,%d)", token, a.Vocab)
	}
	dim, hd, qd, kvd := a.Dim, a.HeadDim, a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	copy(t.x, w.TokenEmbd[int(token)*dim:(int(token)+1)*dim])
	g := t.Gemma
	if g != nil {
		kref.Scale(t.x, g.EmbedScale)
	}
	for l := range a.Layers {
		// This layer's RoPE, window, query scale and score cap.
		base, factors, window := a.RopeBase, w.RopeFactors, a.SlidingWindow
		scale, softcap := float32(1/math.Sqrt(float64(hd))), float32(0)
		if g != nil {
			factors = g.GlobalFactors
			if g.Local[l] {
				base, factors, window = g.LocalRopeBase, g.LocalFactors, g.Window
			}
			scale, softcap = 1, g.AttnSoftcap
		}
		kref.RMSNorm(t.xb, t.x, w.AttnNorm[l], a.Eps)
		matmul(t.q, t.xb, w.Q[l], qd, dim)
		matmul(t.k, t.xb, w.K[l], kvd, dim)
		matmul(t.v, t.xb, w.V[l], kvd, dim)
		addOpt(t.q, w.QBias[l])
		addOpt(t.k, w.KBias[l])
		addOpt(t.v, w.VBias[l])
		if w.QNorm[l] != nil {
			for h := range a.Heads {
				kref.RMSNorm(t.q[h*hd:(h+1)*hd], t.q[h*hd:(h+1)*hd], w.QNorm[l], a.Eps)
			}
		}
		if w.KNorm[l] != nil {
			for h := range a.KVHeads {
				kref.RMSNorm(t.k[h*hd:(h+1)*hd], t.k[h*hd:(h+1)*hd], w.KNorm[l], a.Eps)
			}
		}
		if factors != nil {
			kref.RoPEScaled(t.q, int32(pos), a.Heads, hd, a.RopeDim, base, factors, a.RopeStyle)
			kref.RoPEScaled(t.k, int32(pos), a.KVHeads, hd, a.RopeDim, base, factors, a.RopeStyle)
		} else {
			kref.RoPE(t.q, int32(pos), a.Heads, hd, a.RopeDim, base, a.RopeStyle)
			kref.RoPE(t.k, int32(pos), a.KVHeads, hd, a.RopeDim, base, a.RopeStyle)
		}
		if g != nil {
			kref.Scale(t.q, g.AttnScale) // after RoPE, attending with scale 1 (llama.cpp)
		}
		copy(t.keyCache[l][pos*kvd:], t.k)
		copy(t.valueCache[l][pos*kvd:], t.v)
		if t.KVType == tensor.F16 {
			roundF16(t.keyCache[l][pos*kvd : (pos+1)*kvd])
			roundF16(t.valueCache[l][pos*kvd : (pos+1)*kvd])
		}
		// The cache as one page holding every position so far; causal mask.
		kv := kernels.KV{K: [][]float32{t.keyCache[l]}, V: [][]float32{t.valueCache[l]}, PageTokens: t.seqLen, Len: pos + 1}
		lo := int32(0)
		if window > 0 {
			lo = max(0, int32(pos-window+1))
		}
		mask := kernels.Mask{Lo: []int32{lo}, Hi: []int32{int32(pos + 1)}}
		kref.Attention(t.att, t.q, 1, kv, &mask, kernels.AttnShape{Heads: a.Heads, KVHeads: a.KVHeads, HeadDim: hd, Scale: scale, Softcap: softcap})
		matmul(t.xb2, t.att, w.O[l], dim, qd)
		addOpt(t.xb2, w.OBias[l])
		if g != nil {
			kref.RMSNorm(t.xb2, t.xb2, w.AttnPostNorm[l], a.Eps)
		}
		kref.Add(t.x, t.xb2)
		kref.RMSNorm(t.xb, t.x, w.FFNNorm[l], a.Eps)
		matmul(t.hb, t.xb, w.Gate[l], a.Hidden, dim)
		matmul(t.hb2, t.xb, w.Up[l], a.Hidden, dim)
		if g != nil {
			kref.GeGLU(t.hb, t.hb, t.hb2)
		} else {
			kref.SwiGLU(t.hb, t.hb, t.hb2)
		}
		matmul(t.xb, t.hb, w.Down[l], dim, a.Hidden)
		if g != nil {
			kref.RMSNorm(t.xb, t.xb, w.FFNPostNorm[l], a.Eps)
		}
		kref.Add(t.x, t.xb)
	}
	kref.RMSNorm(t.xb, t.x, w.OutputNorm, a.Eps)
	matmul(t.logits, t.xb, w.Output, a.Vocab, dim)
	if g != nil && g.FinalSoftcap > 0 {
		kref.Softcap(t.logits, g.FinalSoftcap)
	}
	return t.logits, nil
}
