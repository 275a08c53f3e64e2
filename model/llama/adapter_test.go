package llama_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/modelfile"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// stories260K shapes: dim 64, kv dim 32, hidden 172, vocab 512.
var storiesShapes = map[string][2]int{ // module suffix → (in, out)
	"self_attn.q_proj":   {64, 64},
	"self_attn.k_proj":   {64, 32},
	"self_attn.v_proj":   {64, 32},
	"self_attn.o_proj":   {64, 64},
	"mlp.gate_proj":      {64, 172},
	"mlp.up_proj":        {64, 172},
	"mlp.down_proj":      {172, 64},
	"lm_head":            {64, 512},
	"model.embed_tokens": {512, 64}, // embedding: A (r, vocab), B (dim, r)
}

// modSpec is one module of a test adapter.
type modSpec struct {
	module  string // HF path
	in, out int
	emb     bool
}

// writeAdapter writes a PEFT adapter with seeded random A and B (as
// compress/lora.WriteAdapter stores it) and returns its directory.
func writeAdapter(t *testing.T, dir string, cfg lora.Config, mods []modSpec, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	randn := func(n int, sd float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * sd)
		}
		return v
	}
	var ts []safetensors.Tensor
	for _, m := range mods {
		an, bn := lora.PEFTNames(m.module, m.emb)
		ta, err := safetensors.NewTensor(an, tensor.F32, []int{cfg.R, m.in}, randn(cfg.R*m.in, 0.05))
		if err != nil {
			t.Fatal(err)
		}
		tb, err := safetensors.NewTensor(bn, tensor.F32, []int{m.out, cfg.R}, randn(m.out*cfg.R, 0.05))
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, ta, tb)
	}
	if err := lora.WriteAdapter(dir, cfg, ts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// storiesAdapter adapts every listed module suffix in every layer.
func storiesAdapter(t *testing.T, name string, cfg lora.Config, suffixes []string, seed uint64) string {
	var mods []modSpec
	for _, s := range suffixes {
		sh := storiesShapes[s]
		switch s {
		case "lm_head", "model.embed_tokens":
			mods = append(mods, modSpec{module: s, in: sh[0], out: sh[1], emb: s == "model.embed_tokens"})
			continue
		}
		for l := range 5 {
			mods = append(mods, modSpec{module: "model.layers." + string(rune('0'+l)) + "." + s, in: sh[0], out: sh[1]})
		}
	}
	return writeAdapter(t, filepath.Join(t.TempDir(), name), cfg, mods, seed)
}

func loadModel(t *testing.T, path, tok string) *model.Loaded {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Tokenizer: tok, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// logitsAt runs tokens through l (prefill in chunks of chunk) under adapter
// and returns the logits of every position.
func logitsAt(t *testing.T, l *model.Loaded, tokens []int32, chunk int, adapter string) [][]float32 {
	t.Helper()
	var out [][]float32
	s := complete(t, l, sluice.Request{Tokens: tokens, Adapter: adapter, AllLogits: true,
		OnLogits: func(_ int32, lg []float32) { out = append(out, slices.Clone(lg)) }},
		func(sc *pipelines.SchedulerParams) { sc.PrefillChunk, sc.MaxNewTokens = chunk, 1 })
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	if len(out) != len(tokens) { // the last row's logits also pick the one new token
		t.Fatalf("%d rows of logits for %d tokens", len(out), len(tokens))
	}
	return out
}

func maxAbsDiff(a, b [][]float32) (d float64, pos int) {
	for i := range a {
		for j := range a[i] {
			if x := math.Abs(float64(a[i][j] - b[i][j])); x > d {
				d, pos = x, i
			}
		}
	}
	return d, pos
}

// storyTokens is BOS and 63 greedy tokens of the base model: a real text.
func storyTokens(t *testing.T, l *model.Loaded) []int32 {
	s := complete(t, l, sluice.Request{}, func(sc *pipelines.SchedulerParams) { sc.MaxNewTokens, sc.StopAtEOS = 63, false })
	if s.Err != nil || len(s.Tokens) != 64 {
		t.Fatalf("base run: %d tokens, err %v", len(s.Tokens), s.Err)
	}
	return s.Tokens
}

var allModules = []string{"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
	"mlp.gate_proj", "mlp.up_proj", "mlp.down_proj", "lm_head", "model.embed_tokens"}

// The merged model and the base served with the adapter unmerged give the
// same logits at every position of a 64-token run, for both file formats.
func TestMergedEqualsUnmerged(t *testing.T) {
	dir := filepath.Join(testutil.Models(t), "stories260K")
	tok := filepath.Join(dir, "tok512.bin")
	cfg := lora.Config{R: 4, Alpha: 8}
	rs := lora.Config{R: 8, Alpha: 4, UseRSLoRA: true}
	// stories260K.bin ties its output to the embedding (no lm_head to adapt,
	// and an embed_tokens adapter changes the head too); the GGUF does not.
	tied := allModules[:len(allModules)-2]
	tied = append(tied[:len(tied):len(tied)], "model.embed_tokens")
	for _, tc := range []struct {
		name, base, tok, out string
		cfg                  lora.Config
		mods                 []string
		scale                float32
	}{
		{"llama2c-tied", filepath.Join(dir, "stories260K.bin"), tok, "merged.bin", cfg, tied, 0},
		{"llama2c-qvdown-rslora-scaled", filepath.Join(dir, "stories260K.bin"), tok, "merged.bin", rs,
			[]string{"self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"}, 0.5},
		{"gguf-all", filepath.Join(testutil.Models(t), "stories260K-gguf", "stories260K.gguf"), "", "merged.gguf", cfg, allModules, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range tc.mods {
				tc.cfg.TargetModules.Names = append(tc.cfg.TargetModules.Names, m[strings.LastIndex(m, ".")+1:])
			}
			adDir := storiesAdapter(t, "story", tc.cfg, tc.mods, 1)
			base := loadModel(t, tc.base, tc.tok)
			tokens := storyTokens(t, base)
			plain := logitsAt(t, base, tokens, 64, "")

			ad, err := model.LoadAdapter(adDir, base.Source, base.Model.Arch(), model.AdapterOptions{Scale: tc.scale})
			if err != nil {
				t.Fatal(err)
			}
			if err := base.Model.(model.Adaptable).AddAdapter("story", ad); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), tc.out)
			if err := modelfile.WriteMerged(t.Context(), base, out, ad); err != nil {
				t.Fatal(err)
			}
			merged := logitsAt(t, loadModel(t, out, tc.tok), tokens, 64, "")
			// Unmerged in chunks of 1 (decode steps) and 7 (odd prefill chunks).
			for _, chunk := range []int{1, 7} {
				unmerged := logitsAt(t, base, tokens, chunk, "story")
				d, pos := maxAbsDiff(merged, unmerged)
				moved, _ := maxAbsDiff(plain, unmerged)
				t.Logf("chunk %d: merged vs unmerged max |Δ| %.3g; adapter moves logits by up to %.3g", chunk, d, moved)
				if d >= 1e-4 {
					t.Errorf("chunk %d: merged and unmerged logits differ by %g at position %d, want < 1e-4", chunk, d, pos)
				}
				if moved < 0.01 {
					t.Errorf("chunk %d: the adapter changes the logits by at most %g: it is not applied", chunk, moved)
				}
			}
			// The base path on the same model is untouched: bit-identical.
			if d, pos := maxAbsDiff(plain, logitsAt(t, base, tokens, 64, "")); d != 0 {
				t.Errorf("base logits changed by %g at position %d after adding an adapter", d, pos)
			}
		})
	}
}

// Two adapters over one base, chosen per request: each request gets its own
// adapter's logits, bit-identical to a model serving that adapter alone.
func TestAdaptersPerRequest(t *testing.T) {
	dir := filepath.Join(testutil.Models(t), "stories260K")
	path, tok := filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin")
	cfg := lora.Config{R: 2, Alpha: 4, TargetModules: lora.Targets{Names: []string{"q_proj", "v_proj", "down_proj"}}}
	mods := []string{"self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"}
	dirA, dirB := storiesAdapter(t, "a", cfg, mods, 1), storiesAdapter(t, "b", cfg, mods, 2)

	shared := loadModel(t, path, tok)
	tokens := storyTokens(t, shared)
	want := map[string][][]float32{}
	for _, d := range []string{dirA, dirB} {
		alone := loadModel(t, path, tok)
		for _, m := range []*model.Loaded{shared, alone} {
			ad, err := model.LoadAdapter(d, m.Source, m.Model.Arch(), model.AdapterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Model.(model.Adaptable).AddAdapter(model.AdapterName(d), ad); err != nil {
				t.Fatal(err)
			}
		}
		want[model.AdapterName(d)] = logitsAt(t, alone, tokens, 64, model.AdapterName(d))
	}
	if got := shared.Model.(model.Adaptable).Adapters(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Adapters() = %v, want [a b]", got)
	}
	for _, name := range []string{"b", "a", "b"} {
		if d, pos := maxAbsDiff(want[name], logitsAt(t, shared, tokens, 16, name)); d != 0 {
			t.Errorf("adapter %s on a shared base differs by %g at position %d", name, d, pos)
		}
	}
	if d, _ := maxAbsDiff(want["a"], want["b"]); d < 0.01 {
		t.Errorf("adapters a and b give the same logits (max diff %g)", d)
	}

	// An unknown adapter fails its request, naming what is loaded.
	s := complete(t, shared, sluice.Request{ID: "r1", Tokens: tokens[:4], Adapter: "pirate"}, nil)
	if !errors.Is(s.Err, model.ErrAdapter) || !strings.Contains(s.Err.Error(), `"pirate"`) || !strings.Contains(s.Err.Error(), "[a b]") {
		t.Errorf("unknown adapter: err = %v, want ErrAdapter naming pirate and the loaded [a b]", s.Err)
	}
	if err := shared.Model.(model.Adaptable).AddAdapter("a"); err == nil {
		t.Error("adding adapter name a twice: no error")
	}
}

// Adapters that do not fit the base are rejected with the module, the
// tensor and both shapes.
func TestAdapterDoesNotFit(t *testing.T) {
	dir := filepath.Join(testutil.Models(t), "stories260K")
	base := loadModel(t, filepath.Join(dir, "stories260K.bin"), filepath.Join(dir, "tok512.bin"))
	cfg := func(names ...string) lora.Config {
		return lora.Config{R: 2, Alpha: 2, TargetModules: lora.Targets{Names: names}}
	}
	for _, tc := range []struct {
		name string
		cfg  lora.Config
		mods []modSpec
		want []string
	}{
		{"q_proj too narrow", cfg("q_proj"), []modSpec{{module: "model.layers.1.self_attn.q_proj", in: 64, out: 32}},
			[]string{"model.layers.1.self_attn.q_proj", "blk.1.attn_q.weight", "[32 64]", "[64 64]"}},
		{"down_proj transposed", cfg("down_proj"), []modSpec{{module: "model.layers.0.mlp.down_proj", in: 64, out: 172}},
			[]string{"model.layers.0.mlp.down_proj", "blk.0.ffn_down.weight", "[172 64]", "[64 172]"}},
		{"layer out of range", cfg("q_proj"), []modSpec{{module: "model.layers.7.self_attn.q_proj", in: 64, out: 64}},
			[]string{"model.layers.7.self_attn.q_proj", "blk.7.attn_q.weight"}},
		{"unknown module", cfg("fc1"), []modSpec{{module: "model.layers.0.mlp.fc1", in: 64, out: 172}},
			[]string{"model.layers.0.mlp.fc1", "no GGUF counterpart", `"fc1" selects no weight`}},
		{"target selects nothing", cfg("q_proj", "c_attn"), []modSpec{{module: "model.layers.0.self_attn.q_proj", in: 64, out: 64}},
			[]string{`"c_attn" selects no weight`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := writeAdapter(t, filepath.Join(t.TempDir(), "bad"), tc.cfg, tc.mods, 3)
			_, err := model.LoadAdapter(d, base.Source, base.Model.Arch(), model.AdapterOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, model.ErrAdapter) {
				t.Errorf("error %v is not ErrAdapter", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			// AddAdapter checks shapes itself, for adapters that skipped LoadAdapter.
			ad, lerr := lora.Load(d)
			if lerr != nil {
				return
			}
			if err := base.Model.(model.Adaptable).AddAdapter("bad", ad); err == nil && tc.name != "target selects nothing" {
				t.Errorf("AddAdapter accepted an adapter that does not fit")
			}
		})
	}
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
