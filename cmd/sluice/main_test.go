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
	"github.com/sluicehq/sluice/tensor"
)

// cli runs the CLI in-process and returns stdout, stderr and the error.
func cli(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), err
}

func stories(t *testing.T) (bin, tok, ggufPath, dir string) {
	dir = testutil.Models(t)
	return filepath.Join(dir, "stories260K", "stories260K.bin"), filepath.Join(dir, "stories260K", "tok512.bin"),
		filepath.Join(dir, "stories260K-gguf", "stories260K.gguf"), dir
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Must show 1: llama2.c's greedy goldens, from the .bin and from the GGUF.
func TestGenerateGolden(t *testing.T) {
	bin, tok, gg, dir := stories(t)
	want256 := readFile(t, filepath.Join(dir, "stories260K", "expected-greedy-256.txt"))
	wantLily := readFile(t, filepath.Join(dir, "stories260K", "expected-greedy-prompt-lily-tom-64.txt"))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bin-256", []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "256"}, want256},
		{"gguf-256", []string{"generate", "-m", gg, "--temp", "0", "-n", "256"}, want256},
		{"bin-lily-tom", []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-p", "Lily and Tom", "-n", "60"}, wantLily},
		{"gguf-lily-tom", []string{"generate", "-m", gg, "--temp", "0", "-p", "Lily and Tom", "-n", "60"}, wantLily},
		{"ram-tier", []string{"generate", "-m", gg, "--temp", "0", "-n", "256", "--tier", "ram", "--threads", "1"}, want256},
		// 150 KiB of the 640 KiB the 512-token context needs: pages spill and come back.
		{"kv-budget", []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "-n", "256", "--kv-budget", "150KiB", "--spill-dir", t.TempDir()}, want256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, err := cli(t, "", tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if out != tc.want {
				t.Errorf("stdout differs from the golden:\n got %q\nwant %q", out, tc.want)
			}
		})
	}
}

// Must show 5: same seed, same text; another seed, other text.
func TestGenerateSeed(t *testing.T) {
	bin, tok, _, _ := stories(t)
	gen := func(seed string) string {
		out, stderr, err := cli(t, "", "generate", "-m", bin, "--tokenizer", tok, "--temp", "0.8", "--seed", seed, "-n", "64")
		if err != nil {
			t.Fatalf("%v\n%s", err, stderr)
		}
		return out
	}
	a, b, c := gen("7"), gen("7"), gen("8")
	if a != b {
		t.Errorf("seed 7 twice gave different text:\n%q\n%q", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same text %q", a)
	}
}

// Must show 4: llama.cpp's tokenizer test vectors through `sluice tokenize`.
func TestTokenizeVocabGoldens(t *testing.T) {
	testutil.SkipRace(t, "llama.cpp's tokenizer goldens case by case")
	dir := filepath.Dir(testutil.Model(t, "llama-cpp-vocab"))
	for _, name := range []string{"llama-spm", "phi-3", "gpt-2"} {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(dir, "llama-cpp-vocab", "ggml-vocab-"+name+".gguf")
			inp := strings.Split(readFile(t, base+".inp"), "\n__ggml_vocab_test__\n")
			inp = inp[:len(inp)-1] // the trailing separator starts no case
			outs := strings.Split(strings.TrimSuffix(readFile(t, base+".out"), "\n"), "\n")
			if len(inp) != len(outs) {
				t.Fatalf("%d inputs, %d outputs", len(inp), len(outs))
			}
			for i, in := range inp {
				got, stderr, err := cli(t, in, "tokenize", "-m", base)
				if err != nil {
					t.Fatalf("case %d: %v\n%s", i, err, stderr)
				}
				if strings.TrimSpace(got) != strings.TrimSpace(outs[i]) {
					t.Errorf("case %d %q:\n got %s\nwant %s", i, in, strings.TrimSpace(got), strings.TrimSpace(outs[i]))
				}
			}
		})
	}
}

func TestTokenizeLlama2C(t *testing.T) {
	bin, tok, _, _ := stories(t)
	out, stderr, err := cli(t, "Lily and Tom", "tokenize", "-m", bin, "--tokenizer", tok, "--bos")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if f := strings.Fields(out); len(f) != 5 || f[0] != "1" {
		t.Fatalf("got %q, want BOS and 4 tokens", out)
	}
}

// Must show 6: bad input is a clear error naming the file, never a panic.
func TestBadInput(t *testing.T) {
	bin, tok, gg, dir := stories(t)
	tmp := t.TempDir()
	cut := func(src string, n int) string {
		b := []byte(readFile(t, src))
		p := filepath.Join(tmp, filepath.Base(src)+".cut")
		if err := os.WriteFile(p, b[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknownArch := filepath.Join(tmp, "mamba.gguf")
	w := gguf.NewWriter()
	w.AddKV("general.architecture", "mamba")
	w.AddTensor("token_embd.weight", tensor.F32, []int{2, 4}, make([]byte, 32))
	if err := w.WriteFile(unknownArch); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string // substrings of the error
		need string   // a file only ../shared/models has: skip the case without it
	}{
		{"missing file", []string{"generate", "-m", filepath.Join(tmp, "nope.gguf"), "--temp", "0"}, []string{"nope.gguf", "no such file"}, ""},
		{"gguf cut in header", []string{"generate", "-m", cut(gg, 100), "--temp", "0"}, []string{"stories260K.gguf.cut", "offset"}, ""},
		{"gguf cut in data", []string{"generate", "-m", cut(gg, 1_000_000), "--temp", "0"}, []string{"stories260K.gguf.cut", "past end"}, ""},
		{"bin cut", []string{"generate", "-m", cut(bin, 5000), "--tokenizer", tok, "--temp", "0"}, []string{"stories260K.bin.cut"}, ""},
		{"bin without tokenizer", []string{"generate", "-m", bin, "--temp", "0"}, []string{"--tokenizer"}, ""},
		{"tokenizer does not fit", []string{"generate", "-m", bin, "--tokenizer", filepath.Join(dir, "llama2-tokenizer", "tokenizer.bin"), "--temp", "0"}, []string{"tokenizer.bin", "512"}, "llama2-tokenizer/tokenizer.bin"},
		{"unknown architecture", []string{"generate", "-m", unknownArch, "--temp", "0"}, []string{"mamba.gguf", `unknown architecture "mamba"`}, ""},
		{"kv budget below one step", []string{"generate", "-m", bin, "--tokenizer", tok, "--temp", "0", "--kv-budget", "64KiB"}, []string{"kv_budget = 65536 bytes", "the minimum is 139264 bytes"}, ""},
		{"vocab-only gguf", []string{"generate", "-m", filepath.Join(dir, "llama-cpp-vocab", "ggml-vocab-llama-spm.gguf"), "--temp", "0"}, []string{"ggml-vocab-llama-spm.gguf"}, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.need != "" {
				testutil.Model(t, tc.need)
			}
			_, _, err := cli(t, "", tc.args...)
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

// A --kv-budget with a unit typo is a usage error that names the flag and
// the unit.
func TestKVBudgetTypo(t *testing.T) {
	_, stderr, err := cli(t, "", "generate", "-m", "x.gguf", "--kv-budget", "150KIB_")
	if err == nil {
		t.Fatal("no error")
	}
	for _, w := range []string{"-kv-budget", `unknown unit "KIB_"`} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not mention %q", stderr, w)
		}
	}
}

func TestInspect(t *testing.T) {
	_, _, gg, _ := stories(t)
	out, stderr, err := cli(t, "", "inspect", gg)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, s := range []string{"dim 64, hidden 172, layers 5, heads 8, kv heads 4", "blk.0.attn_q.weight", "1280 bytes per token", "parameters:"} {
		if !strings.Contains(out, s) {
			t.Errorf("inspect output lacks %q:\n%s", s, out)
		}
	}
	out, _, err = cli(t, "", "inspect", "--json", gg)
	if err != nil || !strings.Contains(out, `"kv_bytes_per_token": 1280`) {
		t.Fatalf("inspect --json: %v\n%s", err, out)
	}
}

func TestUsage(t *testing.T) {
	if _, _, err := cli(t, "", "frobnicate"); err != errUsage {
		t.Fatalf("unknown command: err %v, want usage", err)
	}
	out, _, err := cli(t, "", "help")
	if err != nil || !strings.Contains(out, "generate") {
		t.Fatalf("help: %v %q", err, out)
	}
}

// Every command's -h, -help and --help print its usage and succeed, as do
// "help CMD" (on stdout) and the global -h.
func TestHelp(t *testing.T) {
	for _, c := range commands {
		for _, h := range []string{"-h", "-help", "--help"} {
			args := []string{c.name, h}
			if c.name == "lora" && h == "--help" {
				args = []string{"lora", "merge", h} // the subcommand's flags too
			}
			t.Run(c.name+h, func(t *testing.T) {
				out, stderr, err := cli(t, "", args...)
				if err != nil {
					t.Fatalf("%q: err %v, want nil\n%s", args, err, stderr)
				}
				if all := out + stderr; !strings.Contains(all, "Usage: sluice "+c.name) {
					t.Fatalf("%q printed no usage of %s:\n%s", args, c.name, all)
				}
			})
		}
		t.Run("help-"+c.name, func(t *testing.T) {
			out, stderr, err := cli(t, "", "help", c.name)
			if err != nil {
				t.Fatalf("help %s: err %v\n%s", c.name, err, stderr)
			}
			if !strings.Contains(out, "Usage: sluice "+c.usage) {
				t.Fatalf("help %s: stdout lacks the usage line:\n%s", c.name, out)
			}
		})
	}
	out, stderr, err := cli(t, "", "help", "generate")
	if err != nil || !strings.Contains(out, "-temp") || stderr != "" {
		t.Errorf("help generate: err %v, want its flags on stdout:\nstdout %q\nstderr %q", err, out, stderr)
	}
	for _, h := range []string{"-h", "--help"} {
		if out, stderr, err := cli(t, "", h); err != nil || !strings.Contains(out+stderr, "Commands:") {
			t.Errorf("sluice %s: err %v\n%s%s", h, err, out, stderr)
		}
	}
	if _, _, err := cli(t, "", "help", "frobnicate"); err != errUsage {
		t.Errorf("help of an unknown command: err %v, want usage", err)
	}
	if _, _, err := cli(t, "", "generate", "--no-such-flag"); err != errUsage {
		t.Errorf("a bad flag: err %v, want usage", err)
	}
	if _, _, err := cli(t, "", "lora"); err != errUsage {
		t.Errorf("lora without a subcommand: err %v, want usage", err)
	}
}

func TestVersion(t *testing.T) {
	out, stderr, err := cli(t, "", "version")
	if err != nil || !strings.HasPrefix(out, "sluice ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: err %v, stdout %q\n%s", err, out, stderr)
	}
	if _, _, err := cli(t, "", "version", "extra"); !errors.Is(err, errUsage) {
		t.Errorf("version with an argument: err %v, want usage", err)
	}
}

// Must show 6 (JSONL): a line that is not JSON is recorded in OUT and the
// rest run; a second run resumes and duplicates nothing.
func TestRunBatch(t *testing.T) {
	bin, tok, _, _ := stories(t)
	tmp := t.TempDir()
	in := filepath.Join(tmp, "prompts.jsonl")
	out := filepath.Join(tmp, "out.jsonl")
	os.WriteFile(in, []byte(`{"custom_id":"a","prompt":"Lily"}
this is not json
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"The dog","max_tokens":5}}
{"custom_id":"c","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"Hi"}]}}
`), 0o644)
	pfile := filepath.Join(tmp, "p.toml")
	os.WriteFile(pfile, []byte(strings.Replace(readFile(t, filepath.Join(testutil.Root(), "pipelines", "greedy.toml")), "max_new_tokens = 256", "max_new_tokens = 8", 1)), 0o644)
	args := []string{"run", pfile, "--prompts", in, "--out", out, "--model", bin, "--tokenizer", tok}
	_, stderr, err := cli(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "1 line(s) failed") {
		t.Fatalf("a batch with a bad line: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(readFile(t, out)), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 result lines, got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	all := strings.Join(lines, "\n")
	for _, s := range []string{`"custom_id":"prompts.jsonl:line-2"`, `prompts.jsonl:2`, `"custom_id":"a","text":`, `"custom_id":"b"`, `"completion_tokens":5`, `"custom_id":"c"`} {
		if !strings.Contains(all, s) {
			t.Errorf("results lack %s:\n%s", s, all)
		}
	}
	if _, stderr, err = cli(t, "", args...); err == nil || !strings.Contains(err.Error(), "0 in this run, 1 in an earlier one") {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	if again := strings.Split(strings.TrimSpace(readFile(t, out)), "\n"); len(again) != 4 {
		t.Fatalf("resume duplicated results: %d lines", len(again))
	}
}

func TestValidate(t *testing.T) {
	p := filepath.Join(testutil.Root(), "pipelines", "sample.toml")
	out, stderr, err := cli(t, "", "validate", p)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"sample", "*session.Session → *sched.Step", "closes", "decode loop: scheduler opens it; sample closes it"} {
		if !strings.Contains(out, want) {
			t.Fatalf("validate output lacks %q: %s", want, out)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte(strings.Replace(readFile(t, p), "top_k", "top_kk", 1)), 0o644)
	_, _, err = cli(t, "", "validate", bad)
	if err == nil || !strings.Contains(err.Error(), "top_kk") {
		t.Fatalf("unknown key: err %v", err)
	}
}
