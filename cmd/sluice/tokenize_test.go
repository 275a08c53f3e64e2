package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
)

// Must show 3: every vocabulary in ../shared/models/llama-cpp-vocab that has
// llama.cpp's test vectors passes them through `sluice tokenize`: with
// --inp, its output is the .out file byte for byte.
func TestTokenizeLlamaCppVocabs(t *testing.T) {
	dir := testutil.Model(t, "llama-cpp-vocab")
	vocabs, err := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if err != nil || len(vocabs) == 0 {
		t.Fatalf("no vocabularies in %s (%v)", dir, err)
	}
	tested := 0
	for _, v := range vocabs {
		if _, err := os.Stat(v + ".inp"); err != nil {
			t.Logf("%s: no .inp/.out test vectors", filepath.Base(v))
			continue
		}
		tested++
		t.Run(filepath.Base(v), func(t *testing.T) {
			out, stderr, err := cli(t, "", "tokenize", "-m", v, "--inp", v+".inp")
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			want := readFile(t, v+".out")
			if out == want {
				return
			}
			got, exp := strings.Split(out, "\n"), strings.Split(want, "\n")
			if len(got) != len(exp) {
				t.Fatalf("%d lines, .out has %d", len(got), len(exp))
			}
			for i := range exp {
				if got[i] != exp[i] {
					t.Errorf("case %d: sluice %q, llama.cpp's .out %q", i, got[i], exp[i])
				}
			}
		})
	}
	if tested < 3 {
		t.Errorf("only %d vocabularies with test vectors", tested)
	}
}

// An unknown tokenizer.ggml.pre is an error that names it and lists the
// known ones; --tokenizer-pre forces a pre-tokenizer.
func TestTokenizePre(t *testing.T) {
	src := testutil.Model(t, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v := kv.Value
		if kv.Key == "tokenizer.ggml.pre" {
			v = "brand-new-pre"
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "odd.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(fh); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	_, _, err = cli(t, "12345 world", "tokenize", "-m", path)
	if err == nil || !strings.Contains(err.Error(), `"brand-new-pre"`) || !strings.Contains(err.Error(), "llama-bpe") || !strings.Contains(err.Error(), "--tokenizer-pre") {
		t.Fatalf("err = %v, want one naming the value, listing the known ones and the flag", err)
	}
	for pre, want := range map[string]string{"gpt-2": "10163 2231 995\n", "llama-bpe": "10163 2231 995\n", "qwen2": "16 17 18 19 20 995\n"} {
		out, stderr, err := cli(t, "12345 world", "tokenize", "-m", path, "--tokenizer-pre", pre)
		if err != nil {
			t.Fatalf("--tokenizer-pre %s: %v\n%s", pre, err, stderr)
		}
		if out != want {
			t.Errorf("--tokenizer-pre %s: %q, want %q", pre, out, want)
		}
	}
	if _, _, err := cli(t, "x", "tokenize", "-m", path, "--tokenizer-pre", "nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("--tokenizer-pre nope: err = %v", err)
	}
	out, _, err := cli(t, "a<|endoftext|>", "tokenize", "-m", src, "--parse-special")
	if err != nil || out != "64 50256\n" {
		t.Errorf("--parse-special: %q, %v", out, err)
	}
}

// generate's --tokenizer-pre reaches the loader: a name sluice does not know
// is refused there, naming it.
func TestGenerateTokenizerPre(t *testing.T) {
	_, _, gg, _ := stories(t)
	_, _, err := cli(t, "", "generate", "-m", gg, "-n", "1", "--tokenizer-pre", "nope")
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), "known: ") {
		t.Fatalf("err = %v, want the forced name refused", err)
	}
	if out, stderr, err := cli(t, "", "generate", "-m", gg, "-n", "4", "--temp", "0", "--tokenizer-pre", "llama-bpe"); err != nil || out == "" {
		t.Fatalf("a known name on a SentencePiece model: %q, %v\n%s", out, err, stderr)
	}
}
