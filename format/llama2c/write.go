package llama2c

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/sluicehq/sluice/tensor"
)

// Write writes a checkpoint in the layout of cfg.Version (0: legacy, 1: "ak42"
// version 1), as llama2.c's export.py would. tensors maps GGUF names (those
// File.Tensors lists for cfg) to row-major float32 data of exactly the listed
// shape; output.weight is required only when the classifier is not shared.
// The legacy format's freq_cis tables are computed (theta 10000) since old
// readers still expect them.
func Write(w io.Writer, cfg Config, tensors map[string][]float32) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("llama2c: write: %w", err)
	}
	specs, _ := Layout(cfg, 0)
	for _, s := range specs {
		data, ok := tensors[s.Name]
		if !ok {
			return fmt.Errorf("llama2c: write: tensor %q missing", s.Name)
		}
		if int64(len(data)) != s.Elements() {
			return fmt.Errorf("llama2c: write: tensor %q has %d floats, want %d for shape %v", s.Name, len(data), s.Elements(), s.Shape)
		}
	}
	if len(tensors) != len(specs) {
		for name := range tensors {
			if !hasName(specs, name) {
				return fmt.Errorf("llama2c: write: unexpected tensor %q for %s", name, describe(cfg))
			}
		}
	}

	bw := bufio.NewWriter(w)
	var hdr []byte
	if cfg.Version == 0 {
		vocab := cfg.VocabSize
		if !cfg.SharedClassifier {
			vocab = -vocab
		}
		for _, v := range []int{cfg.Dim, cfg.HiddenDim, cfg.Layers, cfg.Heads, cfg.KVHeads, vocab, cfg.SeqLen} {
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(int32(v)))
		}
	} else {
		hdr = binary.LittleEndian.AppendUint32(hdr, Magic)
		for _, v := range []int{cfg.Version, cfg.Dim, cfg.HiddenDim, cfg.Layers, cfg.Heads, cfg.KVHeads, cfg.VocabSize, cfg.SeqLen} {
			hdr = binary.LittleEndian.AppendUint32(hdr, uint32(int32(v)))
		}
		if cfg.SharedClassifier {
			hdr = append(hdr, 1)
		} else {
			hdr = append(hdr, 0)
		}
		hdr = append(hdr, make([]byte, headerBytes-len(hdr))...)
	}
	bw.Write(hdr)

	_, freqsAfter, _ := order(cfg)
	for _, s := range specs {
		writeFloats(bw, tensors[s.Name])
		if s.Name == freqsAfter {
			cos, sin := freqCis(cfg)
			writeFloats(bw, cos)
			writeFloats(bw, sin)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("llama2c: write: %w", err)
	}
	return nil
}

func hasName(specs []tensor.Info, name string) bool {
	for _, s := range specs {
		if s.Name == name {
			return true
		}
	}
	return false
}

func writeFloats(w *bufio.Writer, xs []float32) {
	var b [4]byte
	for _, x := range xs {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		w.Write(b[:])
	}
}

// freqCis computes the legacy RoPE tables: for position t and pair i of a
// head, cos and sin of t / 10000^(2i/head_size).
func freqCis(c Config) (cos, sin []float32) {
	half := c.HeadSize() / 2
	cos = make([]float32, c.SeqLen*half)
	sin = make([]float32, c.SeqLen*half)
	for t := range c.SeqLen {
		for i := range half {
			freq := 1 / math.Pow(10000, float64(2*i)/float64(c.HeadSize()))
			a := float64(float32(float64(t) * float64(float32(freq))))
			cos[t*half+i] = float32(math.Cos(a))
			sin[t*half+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}
