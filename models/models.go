// Package models carries the smallest of the repository's models inside the
// binary: stories260K (about 1 MB with its vocabulary), which sluice generate
// runs when no model is named, so a fresh build can generate text with
// nothing beside it. The other models in this folder are files for tests and
// examples; see README.md for their sources and licences.
package models

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// Stories260K is stories260K.bin, a llama2.c checkpoint, and Tok512 its
// tokenizer.bin (MIT; stories260K/SOURCE.md).
var (
	//go:embed stories260K/stories260K.bin
	Stories260K []byte
	//go:embed stories260K/tok512.bin
	Tok512 []byte
)

// WriteStories260K writes the embedded stories260K and its tokenizer under a
// new directory in dir ("" is the system's temp directory), for a loader that
// reads files, and returns their paths and a function that removes them.
func WriteStories260K(dir string) (model, tokenizer string, remove func() error, err error) {
	d, err := os.MkdirTemp(dir, "sluice-stories260K-")
	if err != nil {
		return "", "", nil, fmt.Errorf("models: %w", err)
	}
	remove = func() error { return os.RemoveAll(d) }
	model, tokenizer = filepath.Join(d, "stories260K.bin"), filepath.Join(d, "tok512.bin")
	for _, f := range []struct {
		path string
		data []byte
	}{{model, Stories260K}, {tokenizer, Tok512}} {
		if err := os.WriteFile(f.path, f.data, 0o444); err != nil {
			remove()
			return "", "", nil, fmt.Errorf("models: %w", err)
		}
	}
	return model, tokenizer, remove, nil
}
