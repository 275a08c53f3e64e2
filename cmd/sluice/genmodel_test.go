package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

func TestGenModel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	out, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q4_0", "--seed", "3", "--std", "0.03", "-o", path)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.HasPrefix(out, "wrote "+path+": preset tiny, q4_0, 158016 weights, ") {
		t.Errorf("stdout %q", out)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := synth.LookupPreset("tiny")
	var want bytes.Buffer
	if err := synth.Write(&want, synth.Options{Preset: p, DType: tensor.Q4_0, Seed: 3, Std: 0.03}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("gen-model's file differs from synth.Write with the same options")
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if ft, _ := f.Uint("general.file_type"); ft != 2 {
		t.Errorf("general.file_type %d, want 2 (q4_0)", ft)
	}

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown preset", []string{"--preset", "3b", "-o", path}, "tiny, tiny-k, 15m, 110m, 1b"},
		{"bad dtype", []string{"--dtype", "q5_k", "-o", path}, "--dtype"},
		{"no output", []string{"--preset", "tiny"}, "-o FILE is required"},
		{"bad std", []string{"--std", "-1", "-o", path}, "--std -1"},
		{"bad layers", []string{"--layers", "-2", "-o", path}, "--layers -2"},
		{"missing tokenizer", []string{"--tokenizer", filepath.Join(dir, "none.bin"), "-o", path}, "none.bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "", append([]string{"gen-model"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	_, _, err = cli(t, "", "gen-model", "--preset", "tiny")
	if !errors.Is(err, errUsage) {
		t.Errorf("missing -o: %v, want a usage error", err)
	}
}

// gen-model --widen-ffn from the llama2.c checkpoint: the widened GGUF
// generates the checkpoint's greedy text.
func TestGenModelWiden(t *testing.T) {
	dir := testutil.Models(t)
	bin, tok := filepath.Join(dir, "stories260K", "stories260K.bin"), filepath.Join(dir, "stories260K", "tok512.bin")
	out := filepath.Join(t.TempDir(), "wide.gguf")
	msg, stderr, err := cli(t, "", "gen-model", "--widen-ffn", "700", "--from", bin, "--tokenizer", tok, "-o", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(msg, "widened to 700") {
		t.Errorf("stdout %q", msg)
	}
	want, _, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "64", "-p", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := cli(t, "", "generate", "-m", out, "--temp", "0", "-n", "64", "-p", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("widened model generated %q, want %q", got, want)
	}
	wide := filepath.Join(t.TempDir(), "wider.gguf")
	msg, stderr, err = cli(t, "", "gen-model", "--widen-to", "dim=128,hidden=256,layers=6,heads=16,kv-heads=4,head-dim=16", "--from", bin, "--tokenizer", tok, "-o", wide)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(msg, "widened to dim 128, hidden 256, 6 layers, 16 heads, 4 kv heads, head dim 16") {
		t.Errorf("stdout %q", msg)
	}
	got, _, err = cli(t, "", "generate", "-m", wide, "--temp", "0", "-n", "64", "-p", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("model widened to a shape generated %q, want %q", got, want)
	}
	// Quantized to Q8_0 it still generates the same text, and what the
	// widening made zero (the residual stream's new dims, the appended
	// layer's output projections) is still exactly zero.
	q8 := filepath.Join(t.TempDir(), "wider-q8_0.gguf")
	if _, stderr, err := cli(t, "", "quantize", "-m", wide, "-o", q8, "--type", "q8_0"); err != nil {
		t.Fatalf("quantize: %v\n%s", err, stderr)
	}
	got, _, err = cli(t, "", "generate", "-m", q8, "--temp", "0", "-n", "64", "-p", "Once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the Q8_0 widened model generated %q, want %q", got, want)
	}
	qf, err := gguf.Open(q8)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(q8)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		zero func(r, c int) bool
	}{
		{"token_embd.weight", func(_, c int) bool { return c >= 64 }},
		{"blk.0.attn_output.weight", func(r, _ int) bool { return r >= 64 }},
		{"blk.2.ffn_down.weight", func(r, c int) bool { return r >= 64 || c >= 172 }},
		{"blk.5.attn_output.weight", func(int, int) bool { return true }},
		{"blk.5.ffn_down.weight", func(int, int) bool { return true }},
	} {
		ti, ok := qf.Tensor(c.name)
		if !ok {
			t.Fatalf("%s missing", c.name)
		}
		if ti.DType != tensor.Q8_0 {
			t.Fatalf("%s is %v, want q8_0", c.name, ti.DType)
		}
		rows, cols := ti.Shape[0], ti.Shape[1]
		rb, _ := ti.DType.RowBytes(cols)
		x := make([]float32, cols)
		nonzero := 0
		for r := range rows {
			tensor.DequantizeRow(x, raw[ti.Offset+int64(r)*rb:], ti.DType, cols)
			for j, v := range x {
				if c.zero(r, j) && v != 0 {
					t.Fatalf("%s[%d,%d] = %v after q8_0, want 0", c.name, r, j, v)
				}
				if v != 0 {
					nonzero++
				}
			}
		}
		if strings.HasPrefix(c.name, "blk.5") != (nonzero == 0) {
			t.Errorf("%s: %d nonzero weights", c.name, nonzero)
		}
	}
	for _, args := range [][]string{{"--widen-ffn", "700", "-o", out}, {"--from", bin, "-o", out}, {"--widen-ffn", "100", "--from", bin, "--tokenizer", tok, "-o", out},
		{"--widen-ffn", "700", "--widen-to", "tinyllama", "--from", bin, "--tokenizer", tok, "-o", out}, {"--widen-to", "gpt5", "--from", bin, "--tokenizer", tok, "-o", out}} {
		if _, _, err := cli(t, "", append([]string{"gen-model"}, args...)...); err == nil {
			t.Errorf("gen-model %q: no error", args)
		}
	}
}
