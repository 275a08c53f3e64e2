// Package testutil holds what tests across packages share: finding the real
// test models (in the repository's models/ or beside the clone), and golden
// files.
package testutil

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the repository root: the nearest directory above the test's
// working directory (its package directory) that holds go.mod. It does not
// use runtime.Caller, whose paths -trimpath rewrites.
func Root() string {
	dir, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			panic("testutil: no go.mod above " + dir)
		}
	}
}

// sharedModels is the fuller set of test models kept beside a clone
// (../shared/models): it also holds vocab-only GGUFs and the Llama 2
// tokenizer, which the repository does not carry.
func sharedModels() string { return filepath.Join(Root(), "..", "shared", "models") }

// repoModels is the repository's own models/ folder: stories260K (llama2.c
// and GGUF) and the llama2xs-260k draft, laid out as ../shared/models is, so
// a fresh clone runs the real-model tests with nothing beside it.
func repoModels() string { return filepath.Join(Root(), "models") }

// ModelsDir returns the directory the real-model tests read: ../shared/models
// when it is beside the clone, else the repository's models/; "" when neither
// holds stories260K.
func ModelsDir() string {
	for _, d := range []string{sharedModels(), repoModels()} {
		if _, err := os.Stat(filepath.Join(d, "stories260K", "stories260K.bin")); err == nil {
			return d
		}
	}
	return ""
}

// HaveModels reports whether stories260K can be found (see ModelsDir).
func HaveModels() bool { return ModelsDir() != "" }

// Models returns ModelsDir, or skips the test with a clear message when
// neither ../shared/models nor the repository's models/ holds stories260K.
// Files that only ../shared/models has (llama-cpp-vocab, llama2-tokenizer)
// are reached through Model, which skips without them.
func Models(t testing.TB) string {
	t.Helper()
	dir := ModelsDir()
	if dir == "" {
		t.Skip("no test models (../shared/models and models/ both lack stories260K): skipping real-model test")
	}
	return dir
}

// Model returns the path of rel (a file or folder, slash-separated, as laid
// out under ../shared/models) from ModelsDir or, failing that, from the other
// of the two places; it skips the test naming rel when neither has it.
func Model(t testing.TB, rel string) string {
	t.Helper()
	if p := modelPath(rel); p != "" {
		return p
	}
	t.Skipf("../shared/models/%s absent (the repository's models/ does not carry it): skipping real-model test", rel)
	return ""
}

func modelPath(rel string) string {
	for _, d := range []string{ModelsDir(), sharedModels(), repoModels()} {
		if d == "" {
			continue
		}
		p := filepath.Join(d, filepath.FromSlash(rel))
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// Golden compares got with testdata/name, rewriting the file when
// UPDATE_GOLDEN=1 is set.
func Golden(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with UPDATE_GOLDEN=1 to create it)", path, err)
	}
	if string(want) != string(got) {
		t.Errorf("golden %s differs:\nwant %q\ngot  %q", path, want, got)
	}
}

// HaveModel reports whether Model would find rel, for tests and fuzz seeds
// that use a real file when there is one and go on without it.
func HaveModel(rel string) bool { return modelPath(rel) != "" }

// SkipRace skips a test in the -race build. It is for tests that spend
// their time in one goroutine's arithmetic (statistics over many draws,
// golden files run case by case, whole-model rewrites): the race detector
// can find nothing in them that the concurrent tests do not cover, it only
// makes them slow, and the default build runs them whole. why says what the
// test checks, for the skip message.
func SkipRace(t testing.TB, why string) {
	t.Helper()
	if Race {
		t.Skipf("-race build: %s runs in one goroutine; the default build checks it", why)
	}
}
