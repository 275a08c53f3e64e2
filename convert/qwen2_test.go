package convert_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/convert"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

var qwenPrompt = []int32{1, 45, 300, 17, 222, 9, 130}

const qwenGenLen = 64

// A Hugging Face Qwen2 directory (Qwen2ForCausalLM config.json, safetensors
// with the Q/K/V biases, a Qwen2-style byte-level tokenizer.json), built here
// from a synthetic qwen2 GGUF, converts back to exactly that GGUF's tensors
// (nothing permuted: llama.cpp's qwen2 uses NEOX RoPE on HF's layout) under
// qwen2.* keys; sluice's greedy ids on the converted file equal those on the
// original, and llama.cpp's (testutil.LlamaCppIDs, committed as
// testdata/qwen2-hf-ids.json and checked live when bench/node_modules is
// there); llama.cpp tokenizes text with the converted vocabulary as sluice
// does.
func TestHFQwen2(t *testing.T) {
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "qwen2.gguf")
	if err := synth.WriteFile(src, synth.Options{Preset: p, Arch: "qwen2", DType: tensor.F32, Seed: 3, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	dir := writeHF(t, src, 1, nil)
	writeByteLevelTokenizer(t, dir, 120)
	out := convertTo(t, dir, convert.Options{})
	sameTensors(t, src, out)

	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.String("general.architecture"); a != "qwen2" {
		t.Fatalf("general.architecture %q, want qwen2", a)
	}
	sf, _ := gguf.Open(src)
	for _, k := range []string{"qwen2.embedding_length", "qwen2.block_count", "qwen2.feed_forward_length", "qwen2.attention.head_count",
		"qwen2.attention.head_count_kv", "qwen2.context_length", "qwen2.rope.freq_base", "qwen2.attention.layer_norm_rms_epsilon"} {
		w, _ := sf.Get(k)
		g, ok := f.Get(k)
		if !ok || fmt.Sprint(w) != fmt.Sprint(g) {
			t.Errorf("%s = %v (%v), the source has %v", k, g, ok, w)
		}
	}
	if pre, _ := f.String("tokenizer.ggml.pre"); pre != "qwen2" {
		t.Errorf("tokenizer.ggml.pre %q, want qwen2", pre)
	}

	ids := func(path string) []int32 {
		l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		r := complete(t, l, sluice.Request{Tokens: qwenPrompt}, func(sc *pipelines.SchedulerParams) { sc.MaxNewTokens, sc.StopAtEOS = qwenGenLen, false })
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		return r.Tokens[len(qwenPrompt):]
	}
	got := ids(out)
	if want := ids(src); !slices.Equal(got, want) {
		t.Fatalf("greedy ids on the converted file differ from the source's:\nconverted %v\nsource    %v", got, want)
	}
	if d := len(slices.Compact(slices.Sorted(slices.Values(got)))); d < 16 {
		t.Errorf("%d distinct tokens in %d: too repetitive to compare (%v)", d, qwenGenLen, got)
	}
	js, _ := json.Marshal(got)
	if cpp, err := testutil.LlamaCppIDs(t, out, qwenPrompt, qwenGenLen); err != nil {
		t.Logf("llama.cpp not run: %v", err)
	} else if !slices.Equal(cpp, got) {
		t.Fatalf("llama.cpp's greedy ids on the converted file differ from sluice's:\nllama.cpp %v\nsluice    %v", cpp, got)
	}
	testutil.Golden(t, "qwen2-hf-ids.json", append(js, '\n'))

	l, err := model.Load(t.Context(), model.LoadOptions{Path: out, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	texts := []string{tokText, "Qwen2's pre-tokenizer: 12345 digits one by one, \"quotes\"\n\n  spaces<|im_end|>"}
	var sluiceIDs [][]int32
	for _, s := range texts {
		sluiceIDs = append(sluiceIDs, l.Tokenizer.Encode(s, tokenizer.EncodeOptions{}))
	}
	plain, _, err := llamaCppTokenize(t, out, texts)
	if err != nil {
		t.Logf("llama.cpp not run: %v", err)
		return
	}
	for i := range texts {
		if !slices.Equal(plain[i], sluiceIDs[i]) {
			t.Errorf("%q:\nllama.cpp %v\nsluice    %v", texts[i], plain[i], sluiceIDs[i])
		}
	}
}

// llamaCppTokenize runs bench/pretok.mjs on the GGUF at path: llama.cpp's
// ids for each text (add_special and parse_special false) and its
// end-of-generation ids, or why it cannot run here.
func llamaCppTokenize(t *testing.T, path string, texts []string) (plain [][]int32, eog []int32, err error) {
	t.Helper()
	node, err := exec.LookPath("node")
	if _, serr := os.Stat("../bench/node_modules"); serr != nil || err != nil || testing.Short() {
		return nil, nil, fmt.Errorf("needs node and bench/node_modules, not -short")
	}
	cases, _ := json.Marshal(texts)
	casesPath := filepath.Join(t.TempDir(), "cases.json")
	if err := os.WriteFile(casesPath, cases, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), node, "../bench/pretok.mjs", "--cases", casesPath, path)
	cmd.Stderr = os.Stderr
	js, err := cmd.Output()
	if err != nil {
		t.Fatalf("pretok.mjs: %v", err)
	}
	var r struct {
		Models map[string]struct {
			Plain [][]int32 `json:"plain"`
			EOG   []int32   `json:"eog"`
		} `json:"models"`
	}
	if err := json.Unmarshal(js, &r); err != nil {
		t.Fatal(err)
	}
	m, ok := r.Models[path]
	if !ok || len(m.Plain) != len(texts) {
		t.Fatalf("pretok.mjs gave no ids for %s", path)
	}
	return m.Plain, m.EOG, nil
}
