package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// llama2.c .bin → GGUF → greedy generation prints llama2.c's golden.
func TestConvertLlama2CGolden(t *testing.T) {
	bin, tok, _, dir := stories(t)
	out := filepath.Join(t.TempDir(), "stories260K.gguf")
	if _, stderr, err := cli(t, "", "convert", bin, "--tokenizer", tok, "-o", out); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	got, stderr, err := cli(t, "", "generate", "-m", out, "--temp", "0", "-n", "256")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if want := readFile(t, filepath.Join(dir, "stories260K", "expected-greedy-256.txt")); got != want {
		t.Errorf("greedy output of the converted GGUF differs from the golden:\n got %q\nwant %q", got, want)
	}
}

func TestConvertErrors(t *testing.T) {
	bin, tok, _, dir := stories(t)
	tmp := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want []string
		need string // a file only ../shared/models has: skip the case without it
	}{
		{"no output", []string{bin, "--tokenizer", tok}, []string{"-o OUT.gguf"}, ""},
		{"no input", []string{"-o", filepath.Join(tmp, "x.gguf")}, []string{"want exactly one IN"}, ""},
		{"missing input", []string{filepath.Join(tmp, "nope.bin"), "-o", filepath.Join(tmp, "x.gguf")}, []string{"nope.bin"}, ""},
		{"tokenizer of another size", []string{bin, "--tokenizer", filepath.Join(dir, "llama2-tokenizer", "tokenizer.bin"), "-o", filepath.Join(tmp, "x.gguf")}, []string{"tokenizer.bin", "32000", "512"}, "llama2-tokenizer/tokenizer.bin"},
		{"directory without config.json", []string{tmp, "-o", filepath.Join(tmp, "x.gguf")}, []string{"config.json"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.need != "" {
				testutil.Model(t, tc.need)
			}
			_, _, err := cli(t, "", append([]string{"convert"}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}
