// Package testutil holds what tests across packages share: finding the real
// test models beside the clone, and golden files.
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

// HaveModels reports whether ../shared/models is beside the clone.
func HaveModels() bool {
	_, err := os.Stat(filepath.Join(Root(), "..", "shared", "models", "stories260K", "stories260K.bin"))
	return err == nil
}

// Models returns ../shared/models beside the clone, or skips the test with a
// clear message when it is absent (a fresh clone still passes).
func Models(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(Root(), "..", "shared", "models")
	if _, err := os.Stat(filepath.Join(dir, "stories260K", "stories260K.bin")); err != nil {
		t.Skip("../shared/models absent: skipping real-model test")
	}
	return dir
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
