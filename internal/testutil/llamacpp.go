package testutil

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// amxVariants are the CPU variants of node-llama-cpp's prebuilt binary that
// are compiled with AMX, whose K-quant and Q8_0 matrix products do not
// reproduce ggml's other CPU kernels (see LlamaCppIDs).
var amxVariants = []string{"libggml-cpu-sapphirerapids.so"}

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

// llamaCppBench returns a directory holding bench/ids.mjs and a
// node_modules that node can run, or why there is none. When the prebuilt
// binary ships an AMX variant, the directory is a copy of bench/ made once
// per process under the system temp dir without that variant, so ggml's
// loader picks the best of the others.
func llamaCppBench() (string, error) {
	benchOnce.Do(func() {
		bench := filepath.Join(Root(), "bench")
		nm := filepath.Join(bench, "node_modules")
		if _, err := os.Stat(nm); err != nil {
			benchErr = fmt.Errorf("no %s (cd bench && npm install)", nm)
			return
		}
		if _, err := exec.LookPath("node"); err != nil {
			benchErr = errors.New("no node on PATH")
			return
		}
		bins := filepath.Join(nm, "@node-llama-cpp", "linux-x64", "bins", "linux-x64")
		amx := false
		for _, v := range amxVariants {
			if _, err := os.Stat(filepath.Join(bins, v)); err == nil {
				amx = true
			}
		}
		if !amx {
			benchDir = bench
			return
		}
		benchDir, benchErr = copyWithoutAMX(bench)
	})
	return benchDir, benchErr
}

// copyWithoutAMX copies bench's scripts and node_modules (following the
// symlink node_modules may be, skipping symlinks inside it) to a directory
// under the system temp dir, leaving out the AMX variants. The copy is
// named after the size and time of the addon it holds and reused by later
// runs; it is built under a temporary name and renamed into place.
func copyWithoutAMX(bench string) (string, error) {
	src, err := filepath.EvalSymlinks(filepath.Join(bench, "node_modules"))
	if err != nil {
		return "", err
	}
	addon, err := os.Stat(filepath.Join(src, "@node-llama-cpp", "linux-x64", "bins", "linux-x64", "llama-addon.node"))
	if err != nil {
		return "", err
	}
	final := filepath.Join(os.TempDir(), fmt.Sprintf("sluice-llamacpp-noamx-%d-%d", addon.Size(), addon.ModTime().Unix()))
	if _, err := os.Stat(filepath.Join(final, "node_modules")); err == nil {
		return final, copyScripts(bench, final) // the scripts may have changed since
	}
	dst, err := os.MkdirTemp("", "sluice-llamacpp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dst) // a no-op once renamed
	if err := copyScripts(bench, dst); err != nil {
		return "", err
	}
	skip := map[string]bool{}
	for _, v := range amxVariants {
		skip[v] = true
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, "node_modules", rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case !d.Type().IsRegular() || skip[d.Name()]:
			return nil
		}
		return copyFile(p, out)
	})
	if err != nil {
		return "", err
	}
	if err := os.Rename(dst, final); err != nil {
		if _, serr := os.Stat(filepath.Join(final, "node_modules")); serr == nil {
			return final, copyScripts(bench, final) // another test process made it first
		}
		return "", err
	}
	return final, nil
}

// copyScripts copies bench's .mjs scripts and package.json into dir, each
// through a temporary name so a concurrent reader never sees half a file.
func copyScripts(bench, dir string) error {
	ents, err := os.ReadDir(bench)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Type().IsRegular() && (strings.HasSuffix(e.Name(), ".mjs") || e.Name() == "package.json") {
			tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d", e.Name(), os.Getpid()))
			if err := copyFile(filepath.Join(bench, e.Name()), tmp); err != nil {
				return err
			}
			if err := os.Rename(tmp, filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, st.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// LlamaCppIDs runs bench/ids.mjs: llama.cpp's n greedy token ids after
// prompt on the GGUF at path (node-llama-cpp's prebuilt CPU binary, F32 KV
// cache, flash attention off). It returns an error saying why llama.cpp
// cannot run here (no bench/node_modules, no node), so callers fall back to
// a committed golden; a run that starts and fails fails the test.
//
// On a CPU with AMX (Sapphire Rapids and later) ggml's loader would pick
// the variant that sends Q4_K, Q6_K and Q8_0 products to its AMX kernels;
// on two of three tiny-k Q4_K_M files measured, their logits differ from
// those of the variant picked without it (and from sluice's, which agree
// with that one to ~1e-6) by 0.9% and 3.1% relative RMS from the first
// token (bench/RESULTS.md, "K-quant parity per architecture"). The goldens
// are llama.cpp's CPU path without AMX, the one every other x86 and ARM
// machine runs, so that variant is left out.
func LlamaCppIDs(t testing.TB, path string, prompt []int32, n int) ([]int32, error) {
	t.Helper()
	dir, err := llamaCppBench()
	if err != nil {
		return nil, err
	}
	ps := make([]string, len(prompt))
	for i, tok := range prompt {
		ps[i] = fmt.Sprint(tok)
	}
	args := []string{filepath.Join(dir, "ids.mjs"), "-m", path, "--n", fmt.Sprint(n), "--prompt", strings.Join(ps, ",")}
	cmd := exec.Command("node", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %v: %v", args, err)
	}
	var r struct {
		IDs []int32 `json:"ids"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ids.mjs output %q: %v", out, err)
	}
	if len(r.IDs) != n {
		t.Fatalf("ids.mjs gave %d ids, want %d", len(r.IDs), n)
	}
	return r.IDs, nil
}

// ReadIDs reads a golden file of llama.cpp's greedy ids (WriteIDs' format:
// the prompt they continue and the ids per key) and checks its prompt is
// prompt. A missing file is an empty golden when update is set (the run
// will write one), else a failure.
func ReadIDs(t testing.TB, path string, prompt []int32, update bool) map[string][]int32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		if update && os.IsNotExist(err) {
			return map[string][]int32{}
		}
		t.Fatal(err)
	}
	var g struct {
		Prompt []int32            `json:"prompt"`
		IDs    map[string][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !slices.Equal(g.Prompt, prompt) {
		t.Fatalf("%s: prompt %v, the test's is %v", path, g.Prompt, prompt)
	}
	return g.IDs
}

// WriteIDs writes ids as a golden file ReadIDs reads: a note saying where
// they came from and how to regenerate them, the prompt, and one line per
// key, keys sorted, so that a regeneration diffs line by line.
func WriteIDs(t testing.TB, path, note string, prompt []int32, ids map[string][]int32) {
	t.Helper()
	nb, _ := json.Marshal(note)
	pr, _ := json.Marshal(prompt)
	b := fmt.Appendf(nil, "{\n \"note\": %s,\n \"prompt\": %s,\n \"ids\": {\n", nb, pr)
	keys := slices.Sorted(maps.Keys(ids))
	for i, k := range keys {
		v, _ := json.Marshal(ids[k])
		b = fmt.Appendf(b, "  %q: %s", k, v)
		if i < len(keys)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	b = append(b, " }\n}\n"...)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
