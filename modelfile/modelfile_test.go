package modelfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		x, y string
		want bool
	}{
		{a, a, true},
		{a, filepath.Join(dir, ".", "a.gguf"), true},
		{a, link, true},
		{a, b, false},
		{a, filepath.Join(dir, "missing.gguf"), false},
	} {
		got, err := SameFile(tc.x, tc.y)
		if err != nil || got != tc.want {
			t.Errorf("SameFile(%s, %s) = %v, %v; want %v", tc.x, tc.y, got, err, tc.want)
		}
	}
	if _, err := SameFile(filepath.Join(dir, "missing.gguf"), a); err == nil {
		t.Error("SameFile of a missing input: no error")
	}
}
