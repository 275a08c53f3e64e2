package main

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// writeStoriesAdapter writes a seeded random PEFT adapter for stories260K
// adapting q_proj, v_proj and down_proj in every layer. outQ overrides the
// q_proj output size (64) to make an adapter that does not fit.
func writeStoriesAdapter(t *testing.T, dir string, seed uint64, outQ int) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	randn := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.05)
		}
		return v
	}
	const r = 4
	cfg := lora.Config{R: r, Alpha: 8, TargetModules: lora.Targets{Names: []string{"q_proj", "v_proj", "down_proj"}}}
	var ts []safetensors.Tensor
	for l := range 5 {
		for _, m := range []struct {
			name    string
			in, out int
		}{{"self_attn.q_proj", 64, outQ}, {"self_attn.v_proj", 64, 32}, {"mlp.down_proj", 172, 64}} {
			an, bn := lora.PEFTNames("model.layers."+strconv.Itoa(l)+"."+m.name, false)
			a, err := safetensors.NewTensor(an, tensor.F32, []int{r, m.in}, randn(r*m.in))
			if err != nil {
				t.Fatal(err)
			}
			b, err := safetensors.NewTensor(bn, tensor.F32, []int{m.out, r}, randn(m.out*r))
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, a, b)
		}
	}
	if err := lora.WriteAdapter(dir, cfg, ts); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustSluice(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := cli(t, "", args...)
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// A merged model generates what the base generates with the adapter served
// unmerged (greedy), for both the adapter's own scale and a --scale.
func TestLoraMergeEqualsUnmerged(t *testing.T) {
	bin, tok, ggufPath, _ := stories(t)
	tmp := t.TempDir()
	ad := writeStoriesAdapter(t, filepath.Join(tmp, "tales"), 1, 64)
	gen := []string{"generate", "--tokenizer", tok, "--temp", "0", "-n", "48", "-p", "Lily"}
	base := mustSluice(t, append(gen, "-m", bin)...)
	// A grouped layout restarts its groups on every row: merging must decode row by row.
	q := filepath.Join(tmp, "int4.gguf")
	mustSluice(t, "quantize", "-m", ggufPath, "-o", q, "--type", "int4-g32")
	for _, tc := range []struct {
		name, base, tok, out, scale string
	}{
		{"llama2c", bin, tok, "merged.bin", ""},
		{"llama2c-scaled", bin, tok, "merged-half.bin", "0.5"},
		{"gguf", ggufPath, "", "merged.gguf", ""},
		{"int4-g32 gguf", q, "", "merged-int4.gguf", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(tmp, tc.out)
			args := []string{"lora", "merge", "-m", tc.base, "--adapter", ad, "-o", out}
			spec := ad
			if tc.scale != "" {
				args = append(args, "--scale", tc.scale)
				spec += ":" + tc.scale
			}
			if tc.tok != "" {
				args = append(args, "--tokenizer", tc.tok)
			}
			if msg := mustSluice(t, args...); !strings.Contains(msg, "15 module(s)") {
				t.Errorf("merge printed %q, want 15 modules", msg)
			}
			merged := mustSluice(t, append(gen, "-m", out)...)
			unmerged := mustSluice(t, append(gen, "-m", tc.base, "--lora", spec)...)
			if diff := cmp.Diff(merged, unmerged); diff != "" {
				t.Errorf("merged vs unmerged (-merged +unmerged):\n%s", diff)
			}
			if merged == base {
				t.Errorf("the adapter did not change the text: %q", merged)
			}
		})
	}
}

// run serves several adapters over one base; each JSONL line picks one by
// name, and a line naming an unknown adapter fails alone.
func TestRunWithAdapters(t *testing.T) {
	bin, tok, _, _ := stories(t)
	tmp := t.TempDir()
	a := writeStoriesAdapter(t, filepath.Join(tmp, "a"), 1, 64)
	b := writeStoriesAdapter(t, filepath.Join(tmp, "b"), 2, 64)
	in, out := filepath.Join(tmp, "in.jsonl"), filepath.Join(tmp, "out.jsonl")
	os.WriteFile(in, []byte(`{"custom_id":"base","prompt":"Lily"}
{"custom_id":"a","prompt":"Lily","adapter":"a"}
{"custom_id":"b","method":"POST","url":"/v1/completions","body":{"prompt":"Lily","adapter":"b"}}
{"custom_id":"zzz","prompt":"Lily","adapter":"zzz"}
{"custom_id":"num","prompt":"Lily","adapter":7}
`), 0o644)
	pfile := filepath.Join(tmp, "p.toml")
	os.WriteFile(pfile, []byte(strings.Replace(readFile(t, filepath.Join(testutil.Root(), "pipelines", "greedy.toml")), "max_new_tokens = 256", "max_new_tokens = 24", 1)), 0o644)
	// The two bad adapter lines fail alone; the run says so in its exit.
	if _, stderr, err := cli(t, "", "run", pfile, "--prompts", in, "--out", out, "--model", bin, "--tokenizer", tok, "--lora", a, "--lora", b); err == nil || !strings.Contains(err.Error(), "2 line(s) failed") {
		t.Fatalf("run: %v\n%s", err, stderr)
	}
	texts := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, out)), "\n") {
		id := line[strings.Index(line, `"custom_id":"`)+13:]
		id = id[:strings.IndexByte(id, '"')]
		texts[id] = line
	}
	for _, want := range []struct{ id, has string }{
		{"zzz", `adapter: \"zzz\" is not loaded (loaded: [a b])`},
		{"num", `\"adapter\" must be a non-empty string`},
		{"a", `"text":`}, {"b", `"text":`}, {"base", `"text":`},
	} {
		if !strings.Contains(texts[want.id], want.has) {
			t.Errorf("result %s = %s, want it to contain %s", want.id, texts[want.id], want.has)
		}
	}
	textOf := func(l string) string { return l[strings.Index(l, `"text":`):strings.Index(l, `,"prompt_tokens"`)] }
	if textOf(texts["a"]) == textOf(texts["base"]) || textOf(texts["a"]) == textOf(texts["b"]) {
		t.Errorf("adapters did not change the text:\nbase %s\na    %s\nb    %s", texts["base"], texts["a"], texts["b"])
	}
}

func TestLoraBadInput(t *testing.T) {
	bin, tok, _, _ := stories(t)
	tmp := t.TempDir()
	good := writeStoriesAdapter(t, filepath.Join(tmp, "good"), 1, 64)
	bad := writeStoriesAdapter(t, filepath.Join(tmp, "bad"), 1, 48)
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no subcommand", []string{"lora"}, true, ""},
		{"unknown subcommand", []string{"lora", "split"}, true, `"split"`},
		{"missing -o", []string{"lora", "merge", "-m", bin, "--tokenizer", tok, "--adapter", good}, true, "required"},
		{"zero scale", []string{"lora", "merge", "-m", bin, "--tokenizer", tok, "--adapter", good, "-o", filepath.Join(tmp, "x.bin"), "--scale", "0"}, true, "non-zero"},
		{"output is the base", []string{"lora", "merge", "-m", bin, "--tokenizer", tok, "--adapter", good, "-o", bin}, false, "is the base model itself"},
		{"shape mismatch", []string{"lora", "merge", "-m", bin, "--tokenizer", tok, "--adapter", bad, "-o", filepath.Join(tmp, "y.bin")}, false,
			"module model.layers.0.self_attn.q_proj: B·A is [48 64] (A [4 64], B [48 4]) but base tensor blk.0.attn_q.weight is [64 64]"},
		{"generate shape mismatch", []string{"generate", "-m", bin, "--tokenizer", tok, "-n", "4", "--lora", bad}, false, "blk.3.attn_q.weight is [64 64]"},
		{"missing adapter dir", []string{"generate", "-m", bin, "--tokenizer", tok, "-n", "4", "--lora", filepath.Join(tmp, "nope")}, false, "adapter_config.json"},
		{"zero lora scale", []string{"generate", "-m", bin, "--tokenizer", tok, "--lora", good + ":0"}, true, ""},
		{"duplicate names", []string{"run", "p.toml", "--prompts", "x", "--out", "y", "--lora", good, "--lora", good + ":2"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := cli(t, "", tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.usage != errors.Is(err, errUsage) {
				t.Errorf("err %v: usage error %v, want %v", err, errors.Is(err, errUsage), tc.usage)
			}
			if !strings.Contains(err.Error()+stderr, tc.want) {
				t.Errorf("err %v (stderr %q) does not mention %q", err, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(tmp, "y.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed merge left its output behind: %v", err)
	}
}

func TestParseLoraSpec(t *testing.T) {
	for _, tc := range []struct {
		in, dir, name string
		scale         float32
		err           bool
	}{
		{"/a/pirate", "/a/pirate", "pirate", 0, false},
		{"/a/pirate/:0.5", "/a/pirate/", "pirate", 0.5, false},
		{"c:/x:odd", "c:/x:odd", "x:odd", 0, false},
		{"dir:-1", "dir", "dir", -1, false},
		{"dir:0", "", "", 0, true},
		{"dir:NaN", "", "", 0, true},
		{":2", "", "", 0, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			s, err := parseLoraSpec(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && (s.Dir != tc.dir || s.Name != tc.name || s.Opt.Scale != tc.scale) {
				t.Errorf("got %+v, want dir %q name %q scale %v", s, tc.dir, tc.name, tc.scale)
			}
		})
	}
}

func FuzzParseLoraSpec(f *testing.F) {
	for _, s := range []string{"dir", "dir:0.5", "a:b:2", ":", "x:1e39", "d:-0", "/p/:inf"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parseLoraSpec(in)
		if err != nil {
			return
		}
		if s.Dir == "" || !strings.HasPrefix(in, s.Dir) {
			t.Fatalf("%q: dir %q is not a non-empty prefix of the input", in, s.Dir)
		}
		if v := float64(s.Opt.Scale); v != v || v > 3.5e38 || v < -3.5e38 {
			t.Fatalf("%q: scale %v is not finite", in, s.Opt.Scale)
		}
	})
}
