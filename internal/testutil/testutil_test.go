package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The models the repository carries are the files their SOURCE.md names,
// byte for byte: each row "| file | bytes | sha256 |" is checked against the
// file beside it, and every model file is listed. This is what lets CI run
// the real-model tests without ../shared/models and trust their goldens.
func TestRepoModelsMatchSource(t *testing.T) {
	row := regexp.MustCompile(`(?m)^\| ([\w.-]+) \| ([\d,]+) \| ([0-9a-f]{64}) \|$`)
	dirs, err := filepath.Glob(filepath.Join(repoModels(), "*", "SOURCE.md"))
	if err != nil || len(dirs) != 3 {
		t.Fatalf("models/*/SOURCE.md: %d files (%v), want 3", len(dirs), err)
	}
	for _, src := range dirs {
		dir := filepath.Dir(src)
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, m := range row.FindAllStringSubmatch(string(b), -1) {
			name, size, sum := m[1], strings.ReplaceAll(m[2], ",", ""), m[3]
			listed[name] = true
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Errorf("%s lists %s: %v", src, name, err)
				continue
			}
			h := sha256.Sum256(data)
			if got := hex.EncodeToString(h[:]); got != sum {
				t.Errorf("%s: sha256 %s, %s says %s", filepath.Join(dir, name), got, src, sum)
			}
			if got := strconv.Itoa(len(data)); got != size {
				t.Errorf("%s: %s bytes, %s says %s", filepath.Join(dir, name), got, src, size)
			}
		}
		models, _ := filepath.Glob(filepath.Join(dir, "*.[bg]*")) // .bin, .gguf
		for _, p := range models {
			if !listed[filepath.Base(p)] {
				t.Errorf("%s is not listed with its checksum in %s", p, src)
			}
		}
		if len(listed) == 0 {
			t.Errorf("%s lists no file with its checksum", src)
		}
	}
}

// Model finds every file the repository carries under the names the tests
// use, wherever ModelsDir points, and skips (not fails) for a file neither
// place has.
func TestModelFindsRepoFiles(t *testing.T) {
	for _, rel := range []string{"stories260K/stories260K.bin", "stories260K/tok512.bin", "stories260K/expected-greedy-256.txt",
		"stories260K-gguf/stories260K.gguf", "llama2xs-260k/llama2xs_model.bin"} {
		if p := Model(t, rel); !strings.HasSuffix(filepath.ToSlash(p), rel) {
			t.Errorf("Model(%q) = %q", rel, p)
		}
	}
	if HaveModel("no-such-folder/x.bin") {
		t.Error("HaveModel reports a file that does not exist")
	}
	skipped := t.Run("absent", func(t *testing.T) { Model(t, "no-such-folder/x.bin"); t.Error("Model did not skip") })
	if !skipped {
		t.Error("the subtest of an absent file failed")
	}
}
