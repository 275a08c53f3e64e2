package synth_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model/llama"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// Every architecture writes the same bytes whatever the number of workers,
// under llama.cpp's general.architecture and with the tensors it reads.
func TestArchFiles(t *testing.T) {
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range synth.Archs() {
		t.Run(a.Name, func(t *testing.T) {
			o := synth.Options{Preset: p, Arch: a.Name, DType: tensor.Q8_0, Seed: 5, Workers: 1}
			if a.Name == "qwen3" {
				o.HeadDim = 32
			}
			var one, four bytes.Buffer
			if err := synth.Write(&one, o); err != nil {
				t.Fatal(err)
			}
			o.Workers = 4
			if err := synth.Write(&four, o); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(one.Bytes(), four.Bytes()) {
				t.Fatal("1 and 4 workers wrote different bytes")
			}
			f, err := gguf.Read(bytes.NewReader(one.Bytes()), int64(one.Len()), "synth.gguf")
			if err != nil {
				t.Fatal(err)
			}
			if f.Arch() != a.GGUFArch {
				t.Errorf("general.architecture %q, want %q", f.Arch(), a.GGUFArch)
			}
			has := func(name string) bool { _, ok := f.Tensor(name); return ok }
			for name, want := range map[string]bool{
				"output.weight":            !a.Tied,
				"rope_freqs.weight":        a.RopeFreqs,
				"blk.1.attn_q.bias":        a.QKVBias,
				"blk.1.attn_v.bias":        a.QKVBias,
				"blk.0.attn_k_norm.weight": a.QKNorm,
				"blk.1.ffn_down.weight":    true,
				"blk.0.attn_qkv.weight":    a.Fused,
				"blk.0.attn_q.weight":      !a.Fused,
				"blk.1.ffn_gate.weight":    !a.Fused,
			} {
				if has(name) != want {
					t.Errorf("%s present: %v, want %v", name, has(name), want)
				}
			}
			if q, _ := f.Tensor("blk.0.attn_q.weight"); a.Name == "qwen3" && !slices.Equal(q.Shape, []int{4 * 32, 64}) {
				t.Errorf("qwen3 attn_q shape %v, want [128 64] (4 heads of 32)", q.Shape)
			}
			n, err := o.Weights()
			if err != nil {
				t.Fatal(err)
			}
			var sum int64
			for _, ti := range f.Tensors {
				sum += ti.Elements()
			}
			if n != sum {
				t.Errorf("Weights() = %d, the file holds %d", n, sum)
			}
		})
	}
	if _, err := synth.LookupArch("gemma9"); !errors.Is(err, synth.ErrInvalid) || !strings.Contains(err.Error(), "llama, llama3, qwen2, qwen3, phi3") {
		t.Errorf("LookupArch(gemma9) = %v, want ErrInvalid listing the names", err)
	}
}

// llama3's rope_freqs are the factors sluice computes from Llama 3.1's
// rope.scaling keys.
func TestLlama3RopeFreqs(t *testing.T) {
	p, _ := synth.LookupPreset("tiny")
	var buf bytes.Buffer
	if err := synth.Write(&buf, synth.Options{Preset: p, Arch: "llama3", DType: tensor.F32, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	f, err := gguf.Read(bytes.NewReader(b), int64(len(b)), "synth.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor("rope_freqs.weight")
	if !ok {
		t.Fatal("no rope_freqs.weight")
	}
	got := make([]float32, ti.Elements())
	tensor.DequantizeRow(got, b[ti.Offset:ti.Offset+ti.Size], tensor.F32, len(got))
	want := llama.Llama3Scaling{Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 8192}.Factors(500000, p.HeadDim())
	if !slices.Equal(got, want) {
		t.Errorf("rope_freqs %v, want %v", got, want)
	}
}
