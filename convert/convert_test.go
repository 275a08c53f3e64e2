package convert_test

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/convert"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama" // registers the llama architecture
	_ "github.com/sluicehq/sluice/model/qwen2" // and qwen2
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// tensors reads every tensor of a GGUF file as raw bytes, by name.
func tensors(t *testing.T, path string) (*gguf.File, map[string][]byte) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, ti := range f.Tensors {
		out[ti.Name] = raw[ti.Offset : ti.Offset+ti.Size]
	}
	return f, out
}

func f32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// unpermute is the inverse of lora.PermuteRows: GGML's adjacent-pair rows
// back to HF's rotate-half layout (row 2i+j of a head moves to j·d/2+i).
func unpermute(w []float32, rows, cols, heads int) []float32 {
	out := make([]float32, len(w))
	d := rows / heads
	for h := range heads {
		for j := range 2 {
			for i := range d / 2 {
				from, to := h*d+2*i+j, h*d+j*(d/2)+i
				copy(out[to*cols:(to+1)*cols], w[from*cols:(from+1)*cols])
			}
		}
	}
	return out
}

// hfConfig is what writeHF puts in config.json.
type hfConfig map[string]any

// writeHF writes a HF directory holding the weights of the GGUF at path, a
// llama (Q and K un-permuted back to HF's layout, LlamaForCausalLM) or a
// qwen2 (Qwen2ForCausalLM, biases as q/k/v_proj.bias), sharded into
// `shards` files (1: a single model.safetensors). edit may change the config
// and the tensor list before they are written.
func writeHF(t *testing.T, path string, shards int, edit func(hfConfig, map[string]safetensors.Tensor)) string {
	t.Helper()
	f, raw := tensors(t, path)
	arch, _ := f.String("general.architecture")
	u := func(k string) int {
		v, ok := f.Uint(arch + "." + k)
		if !ok {
			t.Fatalf("%s: no %s.%s", path, arch, k)
		}
		return int(v)
	}
	fl := func(k string) float64 {
		v, ok := f.Get(arch + "." + k)
		x, isF := v.(float32)
		if !ok || !isF {
			t.Fatalf("%s: no float32 %s.%s", path, arch, k)
		}
		return float64(x)
	}
	heads, kvHeads := u("attention.head_count"), u("attention.head_count_kv")
	emb, _ := f.Tensor("token_embd.weight")
	_, tied := f.Tensor("output.weight")
	tied = !tied
	hfArch := map[string]string{"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM"}[arch]
	if hfArch == "" {
		t.Fatalf("%s: writeHF does not know architecture %q", path, arch)
	}
	cfg := hfConfig{
		"architectures": []string{hfArch}, "model_type": arch,
		"hidden_size": u("embedding_length"), "intermediate_size": u("feed_forward_length"),
		"num_hidden_layers": u("block_count"), "num_attention_heads": heads, "num_key_value_heads": kvHeads,
		"rms_norm_eps": fl("attention.layer_norm_rms_epsilon"), "rope_theta": fl("rope.freq_base"), "max_position_embeddings": u("context_length"),
		"vocab_size": emb.Shape[0], "tie_word_embeddings": tied, "torch_dtype": "float32", "hidden_act": "silu",
	}
	if arch == "qwen2" {
		cfg["use_sliding_window"], cfg["sliding_window"] = false, 4096
	}
	hf := map[string]string{
		"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight", "output.weight": "lm_head.weight",
	}
	sub := map[string]string{
		"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
		"attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
		"ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
	}
	ts := map[string]safetensors.Tensor{}
	for _, ti := range f.Tensors {
		name, ok := hf[ti.Name]
		if !ok {
			suffix := ".weight"
			if strings.HasSuffix(ti.Name, ".bias") {
				suffix = ".bias"
			}
			parts := strings.SplitN(strings.TrimSuffix(ti.Name, suffix), ".", 3)
			if len(parts) != 3 || parts[0] != "blk" || sub[parts[2]] == "" {
				t.Fatalf("%s: unexpected tensor %s", path, ti.Name)
			}
			name = "model.layers." + parts[1] + "." + sub[parts[2]] + suffix
		}
		v := f32s(raw[ti.Name])
		switch {
		case arch != "llama":
		case strings.HasSuffix(ti.Name, "attn_q.weight"):
			v = unpermute(v, ti.Shape[0], ti.Shape[1], heads)
		case strings.HasSuffix(ti.Name, "attn_k.weight"):
			v = unpermute(v, ti.Shape[0], ti.Shape[1], kvHeads)
		}
		st, err := safetensors.NewTensor(name, tensor.F32, ti.Shape, v)
		if err != nil {
			t.Fatal(err)
		}
		ts[name] = st
	}
	if edit != nil {
		edit(cfg, ts)
	}
	dir := t.TempDir()
	js, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, convert.ConfigFile), js, 0o644); err != nil {
		t.Fatal(err)
	}
	names := slices.Sorted(maps.Keys(ts))
	if shards == 1 {
		var all []safetensors.Tensor
		for _, n := range names {
			all = append(all, ts[n])
		}
		if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), all, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	idx := safetensors.Index{WeightMap: map[string]string{}}
	for s := range shards {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", s+1, shards)
		var part []safetensors.Tensor
		for i, n := range names {
			if i%shards == s {
				part = append(part, ts[n])
				idx.WeightMap[n] = file
			}
		}
		if err := safetensors.WriteFile(filepath.Join(dir, file), part, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.WriteIndex(filepath.Join(dir, safetensors.IndexFile), idx); err != nil {
		t.Fatal(err)
	}
	return dir
}

func synthModel(t *testing.T) string {
	t.Helper()
	return synthfile.Path(t, synthfile.Options{DType: tensor.F32, Seed: 3})
}

func convertTo(t *testing.T, in string, o convert.Options) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.gguf")
	if err := convert.File(in, out, o); err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTensors checks that got holds exactly want's tensors, byte for byte.
func sameTensors(t *testing.T, wantPath, gotPath string, skip ...string) {
	t.Helper()
	wf, want := tensors(t, wantPath)
	gf, got := tensors(t, gotPath)
	for _, s := range skip {
		delete(want, s)
	}
	if d := cmp.Diff(slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got))); d != "" {
		t.Fatalf("tensor names differ (-want +got):\n%s", d)
	}
	for name := range want {
		wi, _ := wf.Tensor(name)
		gi, _ := gf.Tensor(name)
		if !slices.Equal(wi.Shape, gi.Shape) || gi.DType != tensor.F32 {
			t.Errorf("%s: %v %v, want %v f32", name, gi.DType, gi.Shape, wi.Shape)
		}
		if string(want[name]) != string(got[name]) {
			t.Errorf("%s: data differs", name)
		}
	}
}

// A synthetic GGUF written out as an HF directory converts back to the same
// tensors: names mapped, Q and K permuted back exactly. Needs no ../shared.
func TestHFRoundTripSynthetic(t *testing.T) {
	src := synthModel(t)
	for _, shards := range []int{1, 3} {
		t.Run(map[int]string{1: "single file", 3: "three shards"}[shards], func(t *testing.T) {
			out := convertTo(t, writeHF(t, src, shards, nil), convert.Options{})
			sameTensors(t, src, out)
			f, err := gguf.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			for k, want := range map[string]uint64{"llama.embedding_length": 64, "llama.block_count": 2, "llama.attention.head_count_kv": 2, "llama.context_length": 256, "llama.rope.dimension_count": 16} {
				if got, ok := f.Uint(k); !ok || got != want {
					t.Errorf("%s = %d (%v), want %d", k, got, ok, want)
				}
			}
			if _, ok := f.Get("tokenizer.ggml.tokens"); ok {
				t.Errorf("no --tokenizer, yet a vocabulary was written")
			}
		})
	}
}

// llama2.c → GGUF gives the tensors llama.cpp's converter wrote (except its
// untied copy of the classifier) and the same vocabulary.
func TestLlama2CMatchesLlamaCpp(t *testing.T) {
	dir := testutil.Models(t)
	ref := filepath.Join(dir, "stories260K-gguf", "stories260K.gguf")
	out := convertTo(t, filepath.Join(dir, "stories260K", "stories260K.bin"), convert.Options{Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")})
	sameTensors(t, ref, out, "output.weight")
	rf, _ := gguf.Open(ref)
	of, _ := gguf.Open(out)
	for _, k := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.model",
		"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
		"general.architecture", "llama.embedding_length", "llama.block_count", "llama.attention.head_count_kv", "llama.rope.dimension_count"} {
		w, _ := rf.Get(k)
		g, ok := of.Get(k)
		if !ok {
			t.Errorf("%s missing", k)
			continue
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("%s differs from llama.cpp's file (-want +got):\n%s", k, d)
		}
	}
	if c, _ := of.Uint("llama.context_length"); c != 512 {
		t.Errorf("context %d, want the checkpoint's 512", c)
	}
	// HF round trip of the real model: the same tensors again.
	hf := convertTo(t, writeHF(t, out, 1, nil), convert.Options{Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")})
	sameTensors(t, out, hf)
	want, err := os.ReadFile(filepath.Join(dir, "stories260K", "expected-greedy-256.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{out, hf} {
		if got := greedy(t, path, 256); got != string(want) {
			t.Errorf("%s: greedy text differs from llama2.c's:\n got %q\nwant %q", filepath.Base(path), got, want)
		}
	}
}

// greedy is `sluice generate -m path --temp 0 -n n` through the library.
func greedy(t *testing.T, path string, n int) string {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := complete(t, l, sluice.Request{}, func(sc *pipelines.SchedulerParams) { sc.MaxNewTokens = n })
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	return s.Text + "\n"
}

func TestErrors(t *testing.T) {
	src := synthModel(t)
	tok := ""
	if d := modelsDir(); d != "" {
		tok = filepath.Join(d, "llama2-tokenizer", "tokenizer.bin")
	}
	tests := []struct {
		name string
		edit func(hfConfig, map[string]safetensors.Tensor)
		o    convert.Options
		is   error
		want []string
	}{
		{"unknown architecture", func(c hfConfig, _ map[string]safetensors.Tensor) {
			c["architectures"] = []string{"MambaForCausalLM"}
			c["model_type"] = "mamba"
		}, convert.Options{}, convert.ErrUnsupported, []string{"config.json", "MambaForCausalLM"}},
		{"model_type only, unknown", func(c hfConfig, _ map[string]safetensors.Tensor) {
			delete(c, "architectures")
			c["model_type"] = "gpt2"
		}, convert.Options{}, convert.ErrUnsupported, []string{"config.json", "gpt2"}},
		{"missing tensor", func(_ hfConfig, ts map[string]safetensors.Tensor) {
			delete(ts, "model.layers.1.mlp.up_proj.weight")
		}, convert.Options{}, convert.ErrMissing, []string{"model.layers.1.mlp.up_proj.weight", "blk.1.ffn_up.weight"}},
		{"shape mismatch", func(c hfConfig, _ map[string]safetensors.Tensor) {
			c["intermediate_size"] = 200
		}, convert.Options{}, convert.ErrShape, []string{"model.safetensors", "model.layers.0.mlp.gate_proj.weight", "[176 64]", "[200 64]"}},
		{"unknown tensor", func(_ hfConfig, ts map[string]safetensors.Tensor) {
			x, _ := safetensors.NewTensor("model.layers.0.self_attn.q_proj.bias", tensor.F32, []int{64}, make([]float32, 64))
			ts[x.Name] = x
		}, convert.Options{}, convert.ErrUnsupported, []string{"model.safetensors", "q_proj.bias"}},
		{"missing required key", func(c hfConfig, _ map[string]safetensors.Tensor) {
			delete(c, "vocab_size")
		}, convert.Options{}, convert.ErrConfig, []string{"config.json", "vocab_size"}},
		{"rope scaling", func(c hfConfig, _ map[string]safetensors.Tensor) {
			c["rope_scaling"] = map[string]any{"type": "linear", "factor": 2}
		}, convert.Options{}, convert.ErrUnsupported, []string{"config.json", "rope_scaling"}},
	}
	if tok != "" {
		tests = append(tests, struct {
			name string
			edit func(hfConfig, map[string]safetensors.Tensor)
			o    convert.Options
			is   error
			want []string
		}{"tokenizer of another size", nil, convert.Options{Tokenizer: tok}, convert.ErrVocab, []string{"tokenizer.bin", "32000", "512"}})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := writeHF(t, src, 1, tc.edit)
			err := convert.File(in, filepath.Join(t.TempDir(), "x.gguf"), tc.o)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	t.Run("not a checkpoint", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "junk.bin")
		os.WriteFile(bad, []byte("hello, not a model at all, really not"), 0o644)
		err := convert.File(bad, filepath.Join(t.TempDir(), "x.gguf"), convert.Options{})
		if err == nil || !strings.Contains(err.Error(), "junk.bin") {
			t.Fatalf("err = %v, want one naming junk.bin", err)
		}
	})
	t.Run("no config.json", func(t *testing.T) {
		err := convert.File(t.TempDir(), filepath.Join(t.TempDir(), "x.gguf"), convert.Options{})
		if err == nil || !strings.Contains(err.Error(), "config.json") {
			t.Fatalf("err = %v, want one naming config.json", err)
		}
	})
}

func modelsDir() string {
	if !testutil.HaveModel("llama2-tokenizer/tokenizer.bin") {
		return ""
	}
	return testutil.ModelsDir()
}

func FuzzHFConfig(f *testing.F) {
	for _, s := range []string{
		`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":172,"num_hidden_layers":5,"num_attention_heads":8,"num_key_value_heads":4,"vocab_size":512}`,
		`{"model_type":"llama","hidden_size":4096,"intermediate_size":11008,"num_hidden_layers":32,"num_attention_heads":32,"vocab_size":32000,"rope_scaling":null,"rms_norm_eps":1e-5,"rope_theta":500000.0,"tie_word_embeddings":true}`,
		`{"architectures":["MistralForCausalLM"]}`,
		`{"model_type":"llama","hidden_size":0}`,
		`{"model_type":"llama","hidden_size":-1e99}`,
		`[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := convert.ParseHFConfig(data, "config.json")
		if err != nil {
			if !strings.Contains(err.Error(), "config.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if c.HiddenSize <= 0 || c.NumAttentionHeads <= 0 || c.HiddenSize%c.NumAttentionHeads != 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0 || c.VocabSize <= 0 {
			t.Fatalf("accepted an impossible config %+v", c)
		}
	})
}

// complete runs one request through an engine on l over the greedy preset,
// changed by tune.
func complete(t *testing.T, l *model.Loaded, req sluice.Request, tune func(*pipelines.SchedulerParams)) sluice.Result {
	t.Helper()
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight = 1
	if tune != nil {
		tune(p.Scheduler())
	}
	eng, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	r, _ := eng.Complete(t.Context(), req)
	return r
}
