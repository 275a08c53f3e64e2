// Package synthfile is the tests' synthetic-model fixture: a seeded
// synthetic llama GGUF (model/synth: random weights in a real layout),
// written once per test binary for each distinct set of options and shared
// by every test that asks for the same one. It is a package of its own, not
// part of internal/testutil, because model/synth imports the tokenizer and
// format packages, whose own tests use testutil.
package synthfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// Options pick the file. The zero value is the "tiny" preset in F32, seed 0.
type Options struct {
	Preset  string // a synth preset name; "" = "tiny"
	Custom  *synth.Preset
	Arch    string
	DType   tensor.DType
	Seed    uint64
	Context int // > 0 overrides the preset's context
}

var (
	mu    sync.Mutex
	dir   string
	files = map[Options]string{}
)

// Path returns the file for o, writing it the first time. The files live in
// one temporary directory per test binary, which outlives any one test
// (t.TempDir cannot), so a package that uses Path removes it from its
// TestMain through Main or RemoveAll.
func Path(t testing.TB, o Options) string {
	t.Helper()
	key := o
	if o.Custom != nil {
		c := *o.Custom
		key.Custom = nil
		key.Preset = fmt.Sprintf("%+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	if p, ok := files[key]; ok {
		return p
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-synth")
		if err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	var p synth.Preset
	if o.Custom != nil {
		p = *o.Custom
	} else {
		name := o.Preset
		if name == "" {
			name = "tiny"
		}
		var err error
		if p, err = synth.LookupPreset(name); err != nil {
			t.Fatal(err)
		}
	}
	if o.Context > 0 {
		p.Context = o.Context
	}
	// A directory per file keeps the preset's name as the file's, as the
	// tests' own copies had it (errors name the file).
	sub := filepath.Join(dir, fmt.Sprint(len(files)))
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, p.Name+".gguf")
	if err := synth.WriteFile(path, synth.Options{Preset: p, Arch: o.Arch, DType: o.DType, Seed: o.Seed, Workers: 1}); err != nil {
		t.Fatalf("synthetic model %+v: %v", o, err)
	}
	files[key] = path
	return path
}

// Main runs the package's tests and then removes the files Path wrote, and
// returns m.Run's exit code: `func TestMain(m *testing.M) { os.Exit(synthfile.Main(m)) }`.
// Without it every test binary would leave its directory in the system's
// temporary directory.
func Main(m *testing.M) int {
	code := m.Run()
	RemoveAll()
	return code
}

// RemoveAll deletes the directory of the files Path wrote, for a TestMain
// that ends its tests some other way (goleak.VerifyTestMain's Cleanup).
func RemoveAll() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		os.RemoveAll(dir)
		dir, files = "", map[Options]string{}
	}
}
