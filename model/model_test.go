package model

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
)

type bindLayer struct {
	Norm offload.Ref  `gguf:"attn_norm.weight"`
	Bias *offload.Ref `gguf:"attn_q.bias"`
	Gate offload.Ref  `gguf:"ffn_gate.weight,opt"`
}

type bindModel struct {
	Embd   offload.Ref `gguf:"token_embd.weight"`
	Layers []bindLayer `gguf:"blk"`
	Output offload.Ref `gguf:"output.weight,alt:token_embd.weight"`
}

func store(t *testing.T, names ...string) offload.Store {
	p := filepath.Join(t.TempDir(), "f")
	os.WriteFile(p, make([]byte, 64), 0o644)
	var infos []tensor.Info
	for _, n := range names {
		infos = append(infos, tensor.Info{Name: n, DType: tensor.F32, Shape: []int{1}, Size: 4})
	}
	s, err := offload.Open(context.Background(), offload.Options{Files: []offload.File{{Path: p, Tensors: infos}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestBind(t *testing.T) {
	s := store(t, "token_embd.weight", "blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "blk.1.attn_q.bias")
	var m bindModel
	if err := Bind(&m, s, 2, "f.gguf"); err != nil {
		t.Fatal(err)
	}
	got := []string{m.Embd.Name, m.Layers[0].Norm.Name, m.Layers[1].Norm.Name, m.Output.Name}
	want := []string{"token_embd.weight", "blk.0.attn_norm.weight", "blk.1.attn_norm.weight", "token_embd.weight"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
	if m.Layers[0].Bias != nil || m.Layers[1].Bias == nil || m.Layers[1].Bias.Name != "blk.1.attn_q.bias" {
		t.Errorf("optional fields: %+v %+v", m.Layers[0].Bias, m.Layers[1].Bias)
	}
	// An opt Ref that is absent stays the zero Ref and is not reported.
	if m.Layers[0].Gate.Valid() {
		t.Errorf("absent opt field bound to %+v", m.Layers[0].Gate)
	}
	var g bindModel
	if err := Bind(&g, store(t, "token_embd.weight", "blk.0.attn_norm.weight", "blk.0.ffn_gate.weight"), 1, "f.gguf"); err != nil || g.Layers[0].Gate.Name != "blk.0.ffn_gate.weight" {
		t.Errorf("opt field present: %+v, err %v", g.Layers[0].Gate, err)
	}
	// Every missing tensor is named, with the file.
	err := Bind(&m, store(t, "blk.0.attn_norm.weight"), 2, "f.gguf")
	if err == nil || !strings.Contains(err.Error(), "f.gguf") || !strings.Contains(err.Error(), "token_embd.weight") || !strings.Contains(err.Error(), "blk.1.attn_norm.weight") {
		t.Fatalf("err %v", err)
	}
}

func TestConfig(t *testing.T) {
	c := NewConfig("llama", map[string]any{
		"llama.block_count": uint32(5), "llama.rope.freq_base": float32(10000), "general.name": "x",
		"tokenizer.ggml.tokens": []string{"a"}, "llama.neg": int32(-1), "llama.flag": true,
	})
	if c.Uint("block_count") != 5 || c.Float("rope.freq_base") != 10000 || c.String("general.name") != "x" ||
		len(c.Strings("tokenizer.ggml.tokens")) != 1 || !c.Bool("flag") {
		t.Error("typed access")
	}
	if c.Uint("neg", 7) != 7 || c.Uint("absent", 3) != 3 || c.Float("absent", 1e-5) != 1e-5 || c.String("absent", "d") != "d" {
		t.Error("defaults")
	}
	if c.Float("block_count") != 5 {
		t.Error("integers read as floats")
	}
}

func TestRegistry(t *testing.T) {
	var r Registry
	c := func(*Source, offload.Store, Options) (Model, error) { return nil, nil }
	if err := r.Register("a", c); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("a", c); err == nil {
		t.Error("duplicate accepted")
	}
	_, err := r.Build(&Source{Path: "m.gguf", Config: NewConfig("mamba", nil)}, nil, Options{})
	if err == nil || !strings.Contains(err.Error(), `unknown architecture "mamba" (known: a)`) {
		t.Errorf("err %v", err)
	}
}

func TestOpenSourceErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", []byte("GG"), "too short"},
		{"garbage", []byte(strings.Repeat("z", 100)), "not a GGUF file"},
	} {
		p := filepath.Join(dir, tc.name)
		os.WriteFile(p, tc.data, 0o644)
		if _, err := OpenSource(p); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: err %v", tc.name, err)
		}
	}
}
