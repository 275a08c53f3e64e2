package model

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/format/llama2c"
	"github.com/sluicehq/sluice/tensor"
)

// Format is a model file format.
type Format uint8

const (
	GGUF Format = iota + 1
	Llama2C
)

func (f Format) String() string {
	switch f {
	case GGUF:
		return "gguf"
	case Llama2C:
		return "llama2.c"
	}
	return "unknown"
}

// Source is an opened model file: its metadata and tensor index. The weight
// bytes are reached through an offload.Store built from Tensors.
type Source struct {
	Path    string
	Format  Format
	Config  Config
	Tensors []tensor.Info
	GGUF    *gguf.File // nil unless Format == GGUF (the tokenizer lives in it)
}

// OpenSource detects the format from the file's first bytes and reads its index.
func OpenSource(path string) (*Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	head := make([]byte, 64)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("model: %s: %w", path, err)
	}
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte("GGUF")):
		g, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		kv := make(map[string]any, len(g.KV))
		for _, e := range g.KV {
			kv[e.Key] = e.Value
		}
		return &Source{Path: path, Format: GGUF, Config: NewConfig(g.Arch(), kv), Tensors: g.Tensors, GGUF: g}, nil
	case llama2c.Sniff(head):
		l, err := llama2c.Open(path)
		if err != nil {
			return nil, err
		}
		arch, _ := l.Meta["general.architecture"].(string)
		return &Source{Path: path, Format: Llama2C, Config: NewConfig(arch, l.Meta), Tensors: l.Tensors}, nil
	}
	if n < 28 {
		return nil, fmt.Errorf("model: %s: file is %d bytes, too short to be a GGUF or llama2.c model", path, n)
	}
	return nil, fmt.Errorf("model: %s: not a GGUF file (no \"GGUF\" magic) nor a llama2.c checkpoint (header %x…)", path, head[:min(len(head), 8)])
}

// Tensor returns the index entry for name.
func (s *Source) Tensor(name string) (tensor.Info, bool) {
	for _, t := range s.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return tensor.Info{}, false
}
