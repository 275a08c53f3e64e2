package models

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The embedded bytes are the repository's files, and WriteStories260K puts
// them back as files a loader can open, removed by the function it returns.
func TestWriteStories260K(t *testing.T) {
	for _, f := range []struct {
		rel  string
		data []byte
	}{{"stories260K/stories260K.bin", Stories260K}, {"stories260K/tok512.bin", Tok512}} {
		b, err := os.ReadFile(filepath.FromSlash(f.rel))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, f.data) {
			t.Fatalf("embedded %s differs from the file", f.rel)
		}
	}
	m, tok, remove, err := WriteStories260K(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][]byte{m: Stories260K, tok: Tok512} {
		if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s: %v, or not the embedded bytes", path, err)
		}
	}
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(m)); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", filepath.Dir(m), err)
	}
}
