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
	for _, args := range [][]string{{"--widen-ffn", "700", "-o", out}, {"--from", bin, "-o", out}, {"--widen-ffn", "100", "--from", bin, "--tokenizer", tok, "-o", out},
		{"--widen-ffn", "700", "--widen-to", "tinyllama", "--from", bin, "--tokenizer", tok, "-o", out}, {"--widen-to", "gpt5", "--from", bin, "--tokenizer", tok, "-o", out}} {
		if _, _, err := cli(t, "", append([]string{"gen-model"}, args...)...); err == nil {
			t.Errorf("gen-model %q: no error", args)
		}
	}
}
