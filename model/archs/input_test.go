package archs_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/model/ref"
)

// rewrite copies the GGUF at src to dst through edit, which may change the
// metadata (set a value, or delete with nil) and drop tensors (return false).
func rewrite(t *testing.T, src, dst string, kv map[string]any, keep func(name string) bool) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	seen := map[string]bool{}
	for _, e := range f.KV {
		v := e.Value
		if nv, ok := kv[e.Key]; ok {
			seen[e.Key] = true
			if nv == nil {
				continue
			}
			v = nv
		}
		if err := w.AddKV(e.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range kv {
			if !yield(k) {
				return
			}
		}
	}) {
		if !seen[k] && kv[k] != nil {
			if err := w.AddKV(k, kv[k]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range f.Tensors {
		if keep != nil && !keep(ti.Name) {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.DType, ti.Shape, raw[ti.Offset:ti.Offset+ti.Size]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

func loadErr(t *testing.T, path string) error {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path})
	if err == nil {
		l.Close()
	}
	return err
}

// An architecture sluice does not know is named with the known ones listed;
// a known one missing a key or a tensor names it.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{}
	for _, c := range cases {
		files[c.arch] = c.write(t, dir, f32col)
	}
	for _, tc := range []struct {
		name, src string
		kv        map[string]any
		drop      string
		want      []string
	}{
		{"unknown architecture", "qwen2", map[string]any{"general.architecture": "gemma7"}, "",
			[]string{`unknown architecture "gemma7"`, "llama", "qwen2", "qwen3"}},
		{"qwen2 without block_count", "qwen2", map[string]any{"qwen2.block_count": nil}, "",
			[]string{"missing key qwen2.block_count"}},
		{"qwen3 without embedding_length", "qwen3", map[string]any{"qwen3.embedding_length": nil}, "",
			[]string{"missing key qwen3.embedding_length"}},
		{"qwen2 without a K bias", "qwen2", nil, "blk.1.attn_k.bias",
			[]string{"missing tensor(s) blk.1.attn_k.bias"}},
		{"qwen3 without a Q norm", "qwen3", nil, "blk.0.attn_q_norm.weight",
			[]string{"missing tensor(s) blk.0.attn_q_norm.weight"}},
		{"llama3 without attn_v", "llama3", nil, "blk.0.attn_v.weight",
			[]string{"missing tensor(s) blk.0.attn_v.weight"}},
		{"phi3 without attn_qkv", "phi3", nil, "blk.1.attn_qkv.weight",
			[]string{"missing tensor(s) blk.1.attn_q.weight, blk.1.attn_k.weight, blk.1.attn_v.weight"}},
		{"unsupported rope scaling", "qwen2", map[string]any{"qwen2.rope.scaling.type": "yarn"}, "",
			[]string{`rope.scaling.type "yarn"`, "llama3"}},
		{"gemma2 without the rms epsilon", "gemma2", map[string]any{"gemma2.attention.layer_norm_rms_epsilon": nil}, "",
			[]string{"missing key gemma2.attention.layer_norm_rms_epsilon"}},
		{"gemma3 without block_count", "gemma3", map[string]any{"gemma3.block_count": nil}, "",
			[]string{"missing key gemma3.block_count"}},
		{"gemma2 without an ffn post-norm", "gemma2", nil, "blk.1.post_ffw_norm.weight",
			[]string{"missing tensor(s) blk.1.post_ffw_norm.weight"}},
		{"gemma2 without an attention post-norm", "gemma2", nil, "blk.0.post_attention_norm.weight",
			[]string{"missing tensor(s) blk.0.post_attention_norm.weight"}},
		{"gemma3 without a K norm", "gemma3", nil, "blk.4.attn_k_norm.weight",
			[]string{"missing tensor(s) blk.4.attn_k_norm.weight"}},
		{"gemma3 yarn", "gemma3", map[string]any{"gemma3.rope.scaling.type": "yarn"}, "",
			[]string{`rope.scaling.type "yarn"`, "none, linear"}},
		{"gemma2 zero cap", "gemma2", map[string]any{"gemma2.attn_logit_softcapping": float32(0)}, "",
			[]string{"gemma2.attn_logit_softcapping is 0, want a positive cap"}},
		{"gemma3 short pattern", "gemma3", map[string]any{"gemma3.attention.sliding_window_pattern": []bool{true, false}}, "",
			[]string{"sliding_window_pattern has 2 entries, want one per layer (6)"}},
		{"gemma3 pattern of strings", "gemma3", map[string]any{"gemma3.attention.sliding_window_pattern": "every sixth"}, "",
			[]string{"sliding_window_pattern is every sixth (string), want a period or an array of bools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".gguf")
			rewrite(t, files[tc.src], dst, tc.kv, func(n string) bool { return n != tc.drop })
			err := loadErr(t, dst)
			if err == nil {
				t.Fatal("loaded")
			}
			if testing.Verbose() {
				t.Log(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Each feature of an architecture changes its greedy ids within the 64
// tokens, so ids that match llama.cpp's check it: pairing RoPE the other way,
// and dropping llama3's frequency factors, qwen2's biases or qwen3's Q/K norms
// (phi3's fused matrices are split at load; a wrong split fails the ids).
func TestFeaturesDecide(t *testing.T) {
	dir := t.TempDir()
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			path := c.write(t, dir, f32col)
			l, err := model.Load(t.Context(), model.LoadOptions{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			run := func(edit func(*ref.Transformer)) []int32 {
				tr, err := ref.New(t.Context(), l.Source, l.Store, 0)
				if err != nil {
					t.Fatal(err)
				}
				edit(tr)
				var ids []int32
				var lg []float32
				for pos, tok := range prompt {
					if lg, err = tr.Forward(tok, pos); err != nil {
						t.Fatal(err)
					}
				}
				for len(ids) < genLen {
					ids = append(ids, argmax(lg))
					if lg, err = tr.Forward(ids[len(ids)-1], len(prompt)+len(ids)-1); err != nil {
						t.Fatal(err)
					}
				}
				return ids
			}
			base := run(func(*ref.Transformer) {})
			edits := map[string]func(*ref.Transformer){
				"rope pairing": func(tr *ref.Transformer) { tr.Arch.RopeStyle ^= 1 },
			}
			switch c.arch {
			case "llama3":
				edits["no rope_freqs"] = func(tr *ref.Transformer) { tr.W.RopeFactors = nil }
			case "qwen2":
				edits["no biases"] = func(tr *ref.Transformer) {
					for i := range tr.W.QBias {
						tr.W.QBias[i], tr.W.KBias[i], tr.W.VBias[i] = nil, nil, nil
					}
				}
			case "qwen3":
				edits["no Q/K norms"] = func(tr *ref.Transformer) {
					for i := range tr.W.QNorm {
						tr.W.QNorm[i], tr.W.KNorm[i] = nil, nil
					}
				}
			case "gemma2", "gemma3":
				ones := func(v [][]float32) {
					for _, w := range v {
						for j := range w {
							w[j] = 1
						}
					}
				}
				edits["no sliding window"] = func(tr *ref.Transformer) { tr.Gemma.Window = 0 }
				edits["unit post-norms"] = func(tr *ref.Transformer) { ones(tr.W.AttnPostNorm); ones(tr.W.FFNPostNorm) }
				edits["unscaled embedding"] = func(tr *ref.Transformer) { tr.Gemma.EmbedScale = 1 }
				edits["query scale 1/√dim"] = func(tr *ref.Transformer) { tr.Gemma.AttnScale = 0.125 }
				if c.arch == "gemma2" {
					edits["no attention cap"] = func(tr *ref.Transformer) { tr.Gemma.AttnSoftcap = 0 }
				} else {
					edits["no Q/K norms"] = func(tr *ref.Transformer) {
						for i := range tr.W.QNorm {
							tr.W.QNorm[i], tr.W.KNorm[i] = nil, nil
						}
					}
					edits["local layers at the global base"] = func(tr *ref.Transformer) { tr.Gemma.LocalRopeBase = tr.Gemma.RopeBase }
					edits["no linear scaling"] = func(tr *ref.Transformer) { tr.Gemma.GlobalFactors = nil }
				}
			}
			for name, e := range edits {
				if got := run(e); slices.Equal(got, base) {
					t.Errorf("%s: the same 64 greedy ids", name)
				}
			}
		})
	}
}

// A llama file that gives Llama 3.1's scaling as rope.scaling.* keys instead
// of a rope_freqs tensor computes the converter's factors: the logits equal
// the tensor file's bit for bit.
func TestLlama3ScalingKeys(t *testing.T) {
	dir := t.TempDir()
	withTensor := cases[0].write(t, dir, f32col)
	withKeys := filepath.Join(dir, "keys.gguf")
	rewrite(t, withTensor, withKeys, map[string]any{
		"llama.rope.scaling.type":                    "llama3",
		"llama.rope.scaling.factor":                  float32(8),
		"llama.rope.scaling.low_freq_factor":         float32(1),
		"llama.rope.scaling.high_freq_factor":        float32(4),
		"llama.rope.scaling.original_context_length": uint32(8192),
	}, func(n string) bool { return n != "rope_freqs.weight" })
	var got [][]float32
	for _, path := range []string{withTensor, withKeys} {
		l, err := model.Load(t.Context(), model.LoadOptions{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		_, lg := engineGreedy(t, l, 16)
		l.Close()
		got = append(got, slices.Concat(lg...))
	}
	for i := range got[0] {
		if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
			t.Fatalf("logit %d: %v with rope_freqs, %v with rope.scaling keys", i, got[0][i], got[1][i])
		}
	}
	f := llama.Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}.Factors(500000, 128)
	if f[0] != 1 || f[len(f)-1] != 8 {
		t.Errorf("Llama 3.1 factors for a 128-wide head run %v … %v, want 1 … 8", f[0], f[len(f)-1])
	}
}

// attention.sliding_window in a llama file (Mistral's converter writes it)
// changes nothing: llama.cpp applies no window to the llama architecture, and
// the greedy ids stay llama.cpp's.
func TestLlamaIgnoresSlidingWindow(t *testing.T) {
	dir := t.TempDir()
	src := cases[0].write(t, dir, f32col)
	dst := filepath.Join(dir, "swa.gguf")
	rewrite(t, src, dst, map[string]any{"llama.attention.sliding_window": uint32(4)}, nil)
	l, err := model.Load(t.Context(), model.LoadOptions{Path: dst})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if w := l.Model.Arch().SlidingWindow; w != 0 {
		t.Fatalf("sliding window %d, want 0 (none)", w)
	}
	ids, _ := engineGreedy(t, l, genLen)
	if want := readGolden(t)[cases[0].key(f32col)]; !slices.Equal(ids, want) {
		t.Errorf("with a sliding window of 4 in the file: %v, llama.cpp without it %v", ids, want)
	}
}
