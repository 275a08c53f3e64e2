package llama2c

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// tiny is a valid config with GQA (2 heads sharing 1 KV head) small enough
// that every prefix of its file can be tried.
var tiny = Config{Dim: 8, HiddenDim: 12, Layers: 2, Heads: 2, KVHeads: 1, VocabSize: 5, SeqLen: 3}

// synth makes distinct data for every tensor of cfg: value = tensor index +
// element/1000, so a misplaced tensor or offset shows up in the comparison.
func synth(cfg Config) map[string][]float32 {
	specs, _ := Layout(cfg, 0)
	out := map[string][]float32{}
	for i, s := range specs {
		data := make([]float32, s.Elements())
		for j := range data {
			data[j] = float32(i) + float32(j)/1000
		}
		out[s.Name] = data
	}
	return out
}

func variants() []Config {
	var out []Config
	for _, version := range []int{0, 1} {
		for _, shared := range []bool{true, false} {
			c := tiny
			c.Version, c.SharedClassifier = version, shared
			out = append(out, c)
		}
	}
	return out
}

func name(c Config) string { return fmt.Sprintf("v%d shared=%v", c.Version, c.SharedClassifier) }

func writeBytes(t testing.TB, cfg Config) ([]byte, map[string][]float32) {
	t.Helper()
	data := synth(cfg)
	var buf bytes.Buffer
	if err := Write(&buf, cfg, data); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), data
}

func floatsAt(b []byte, ti tensor.Info) []float32 {
	out := make([]float32, ti.Elements())
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[ti.Offset+4*int64(i):]))
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, cfg := range variants() {
		t.Run(name(cfg), func(t *testing.T) {
			b, data := writeBytes(t, cfg)
			f, err := Read(bytes.NewReader(b), int64(len(b)), "dir/tiny.bin")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(cfg, f.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			wantMeta := map[string]any{
				"general.architecture": "llama", "general.name": "tiny",
				"llama.embedding_length": uint32(8), "llama.feed_forward_length": uint32(12), "llama.block_count": uint32(2),
				"llama.attention.head_count": uint32(2), "llama.attention.head_count_kv": uint32(1),
				"llama.context_length": uint32(3), "llama.rope.dimension_count": uint32(4),
				"llama.rope.freq_base": float32(10000), "llama.attention.layer_norm_rms_epsilon": float32(1e-5),
				"llama.vocab_size": uint32(5),
			}
			if diff := cmp.Diff(wantMeta, f.Meta); diff != "" {
				t.Errorf("meta (-want +got):\n%s", diff)
			}
			wantN := 2 + 9*cfg.Layers
			if !cfg.SharedClassifier {
				wantN++
			}
			if len(f.Tensors) != wantN || len(data) != wantN {
				t.Fatalf("%d tensors, want %d", len(f.Tensors), wantN)
			}
			for _, ti := range f.Tensors {
				if ti.DType != tensor.F32 || ti.Size != 4*ti.Elements() {
					t.Errorf("%+v: want F32 with Size 4*elements", ti)
				}
				if diff := cmp.Diff(data[ti.Name], floatsAt(b, ti)); diff != "" {
					t.Errorf("%s data (-want +got):\n%s", ti.Name, diff)
				}
			}
			k, _ := f.Tensor("blk.1.attn_k.weight")
			down, _ := f.Tensor("blk.0.ffn_down.weight")
			if !cmp.Equal(k.Shape, []int{4, 8}) || !cmp.Equal(down.Shape, []int{8, 12}) {
				t.Errorf("attn_k %v ffn_down %v, want [4 8] [8 12]", k.Shape, down.Shape)
			}
			_, hasOut := f.Tensor("output.weight")
			if hasOut == cfg.SharedClassifier {
				t.Errorf("output.weight present %v with shared classifier %v", hasOut, cfg.SharedClassifier)
			}
			if !Sniff(b) {
				t.Error("Sniff = false for a file we wrote")
			}
		})
	}
}

// TestVersion1Order pins the export.py version1_export order, which differs
// from the legacy one (norms first, embedding after them).
func TestVersion1Order(t *testing.T) {
	c := tiny
	c.Version, c.Layers, c.SharedClassifier = 1, 1, true
	specs, end := Layout(c, 256)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	want := []string{"blk.0.attn_norm.weight", "blk.0.ffn_norm.weight", "output_norm.weight", "token_embd.weight",
		"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
		"blk.0.ffn_gate.weight", "blk.0.ffn_down.weight", "blk.0.ffn_up.weight"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if wantEnd := int64(256 + 4*(8+8+8+5*8+64+32+32+64+3*96)); end != wantEnd {
		t.Errorf("end %d, want %d", end, wantEnd)
	}
	c.Version = 0
	specs, end = Layout(c, 28)
	// Legacy: the freq_cis tables (2 × seq_len × head_size/2 floats) follow output_norm.
	if specs[len(specs)-1].Name != "output_norm.weight" || end != specs[len(specs)-1].Offset+32+4*2*3*2 {
		t.Errorf("legacy layout ends with %s at %d", specs[len(specs)-1].Name, end)
	}
}

func TestEveryPrefix(t *testing.T) {
	for _, cfg := range variants() {
		t.Run(name(cfg), func(t *testing.T) {
			b, _ := writeBytes(t, cfg)
			for n := range len(b) {
				_, err := Read(bytes.NewReader(b[:n]), int64(n), "x.bin")
				if err == nil {
					t.Fatalf("prefix %d of %d parsed", n, len(b))
				}
				e, ok := errors.AsType[*Error](err)
				if !ok || !errors.Is(err, ErrTruncated) || e.Path != "x.bin" || e.Offset > int64(n) {
					t.Fatalf("prefix %d: %T %v: want a truncation *Error inside the file", n, err, err)
				}
				if !strings.HasPrefix(err.Error(), "llama2c: x.bin: offset ") || !strings.Contains(err.Error(), "want") {
					t.Fatalf("prefix %d: %q does not say where and what was expected", n, err)
				}
			}
			// One byte too many is an error too.
			long := append(bytes.Clone(b), 0)
			_, err := Read(bytes.NewReader(long), int64(len(long)), "x.bin")
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1 unexpected trailing bytes") {
				t.Errorf("one extra byte: %v", err)
			}
		})
	}
}

func TestTruncatedMessage(t *testing.T) {
	cfg := tiny
	cfg.SharedClassifier = true
	b, _ := writeBytes(t, cfg)
	f, err := Read(bytes.NewReader(b), int64(len(b)), "x.bin")
	if err != nil {
		t.Fatal(err)
	}
	up, _ := f.Tensor("blk.1.ffn_up.weight")
	cut := up.Offset + 5
	_, err = Read(bytes.NewReader(b[:cut]), cut, "x.bin")
	want := fmt.Sprintf("llama2c: x.bin: offset %d: file is %d bytes, want %d for version 0 dim 8 hidden 12 layers 2 heads 2/1 vocab 5 seq_len 3, shared classifier: tensor \"blk.1.ffn_up.weight\" [%d,+%d) is cut",
		up.Offset, cut, len(b), up.Offset, up.Size)
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestHeaderErrors(t *testing.T) {
	legacy := func(v ...int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return append(b, make([]byte, 64)...)
	}
	ak42 := func(version int32, flag byte) []byte {
		b := binary.LittleEndian.AppendUint32(nil, Magic)
		for _, x := range []int32{version, 8, 12, 2, 2, 1, 5, 3} {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		b = append(b, flag)
		return append(b, make([]byte, 256-len(b)+64)...)
	}
	tests := []struct {
		name     string
		file     []byte
		sentinel error
		msg      string
	}{
		{"dim zero", legacy(0, 12, 2, 2, 1, 5, 3), ErrCorrupt, "header: dim = 0, want 1..65536"},
		{"hidden negative", legacy(8, -12, 2, 2, 1, 5, 3), ErrCorrupt, "hidden_dim = -12"},
		{"layers huge", legacy(8, 12, 1<<20, 2, 1, 5, 3), ErrCorrupt, "n_layers = 1048576, want 1..1024"},
		{"vocab min int", legacy(8, 12, 2, 2, 1, math.MinInt32, 3), ErrCorrupt, "vocab_size = 2147483648"},
		{"dim not multiple of heads", legacy(8, 12, 2, 3, 1, 5, 3), ErrCorrupt, "dim 8 is not a multiple of n_heads 3"},
		{"heads not multiple of kv", legacy(12, 12, 2, 3, 2, 5, 3), ErrCorrupt, "n_heads 3 is not a multiple of n_kv_heads 2"},
		{"odd head size", legacy(6, 12, 2, 2, 1, 5, 3), ErrCorrupt, "head size 3 (dim 6 / n_heads 2) is odd"},
		{"kv heads zero", legacy(8, 12, 2, 2, 0, 5, 3), ErrCorrupt, "n_kv_heads = 0"},
		{"gguf file", append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, 64)...), ErrCorrupt, "dim = 1179993927"},
		{"version 2", ak42(2, 1), ErrUnsupported, "version 2 (int8) checkpoints are not supported"},
		{"version 7", ak42(7, 1), ErrUnsupported, "version 7 is unsupported"},
		{"bad flag", ak42(1, 3), ErrCorrupt, "offset 36: shared_classifier flag 3, want 0 or 1"},
		{"short ak42", ak42(1, 1)[:100], ErrTruncated, "header: want 256 bytes, but the file ends at 100"},
		{"empty", nil, ErrTruncated, "offset 0: header: want 4 bytes, but the file ends at 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.file), int64(len(tc.file)), "bad.bin")
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.msg) || !strings.HasPrefix(err.Error(), "llama2c: bad.bin: offset ") {
				t.Errorf("got %v\nwant %v ...%s...", err, tc.sentinel, tc.msg)
			}
		})
	}
}

func TestSniff(t *testing.T) {
	le := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	}
	tests := []struct {
		name   string
		header []byte
		want   bool
	}{
		{"legacy shared", le(64, 172, 5, 8, 4, 512, 512), true},
		{"legacy separate classifier", le(288, 768, 6, 6, 6, uint32(0xFFFF8300), 256), true}, // vocab -32000
		{"ak42", []byte("24ka\x01\x00\x00\x00"), true},
		{"ak42 bare magic", []byte("24ka"), true},
		{"gguf", append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, 40)...), false},
		{"zeros", make([]byte, 28), false},
		{"short legacy", le(64, 172, 5, 8, 4, 512), false},
		{"empty", nil, false},
		{"text", []byte("Once upon a time, there was a little girl"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Sniff(tc.header); got != tc.want {
				t.Errorf("Sniff = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWriteErrors(t *testing.T) {
	data := synth(tiny)
	tests := []struct {
		name string
		cfg  Config
		edit func(m map[string][]float32)
		msg  string
	}{
		{"missing", tiny, func(m map[string][]float32) { delete(m, "blk.1.ffn_up.weight") }, `tensor "blk.1.ffn_up.weight" missing`},
		{"short", tiny, func(m map[string][]float32) { m["output_norm.weight"] = m["output_norm.weight"][:7] }, `tensor "output_norm.weight" has 7 floats, want 8 for shape [8]`},
		{"extra", tiny, func(m map[string][]float32) { m["blk.9.attn_q.weight"] = nil }, `unexpected tensor "blk.9.attn_q.weight"`},
		{"bad config", Config{Dim: 8}, func(map[string][]float32) {}, "hidden_dim = 0"},
		{"version 2", Config{Dim: 8, HiddenDim: 12, Layers: 2, Heads: 2, KVHeads: 1, VocabSize: 5, SeqLen: 3, Version: 2}, func(map[string][]float32) {}, "version 2, want 0 or 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := map[string][]float32{}
			for k, v := range data {
				m[k] = v
			}
			tc.edit(m)
			err := Write(&bytes.Buffer{}, tc.cfg, m)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want ...%s...", err, tc.msg)
			}
		})
	}
}

// TestLegacyFreqCis checks the tables Write emits against llama2.c's
// definition at a point where they are easy to compute by hand.
func TestLegacyFreqCis(t *testing.T) {
	cfg := Config{Dim: 8, HiddenDim: 4, Layers: 1, Heads: 2, KVHeads: 2, VocabSize: 2, SeqLen: 3}
	cos, sin := freqCis(cfg)
	// head size 4: pairs i=0,1 have frequencies 1 and 1/100.
	want := []float32{1, 1, float32(math.Cos(1)), float32(math.Cos(0.01)), float32(math.Cos(2)), float32(math.Cos(0.02))}
	if diff := cmp.Diff(want, cos); diff != "" {
		t.Errorf("cos (-want +got):\n%s", diff)
	}
	if sin[2] != float32(math.Sin(1)) || sin[0] != 0 {
		t.Errorf("sin %v", sin)
	}
}

func needModel(t testing.TB, rel string) string {
	t.Helper()
	return testutil.Model(t, rel)
}

func TestRealModels(t *testing.T) {
	tests := []struct {
		path string
		cfg  Config
	}{
		// The header's vocab_size is +512 and the file has no room for a
		// separate classifier: the classifier is shared (the models README
		// says otherwise, but the file is authoritative).
		{"stories260K/stories260K.bin", Config{Dim: 64, HiddenDim: 172, Layers: 5, Heads: 8, KVHeads: 4, VocabSize: 512, SeqLen: 512, SharedClassifier: true}},
		{"llama2xs-260k/llama2xs_model.bin", Config{Dim: 64, HiddenDim: 192, Layers: 5, Heads: 8, KVHeads: 4, VocabSize: 512, SeqLen: 256, SharedClassifier: true}},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			f, err := Open(needModel(t, tc.path))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.cfg, f.Config); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
			if len(f.Tensors) != 2+9*5 {
				t.Errorf("%d tensors, want 47", len(f.Tensors))
			}
			if f.Meta["llama.rope.dimension_count"] != uint32(8) {
				t.Errorf("rope dims %v", f.Meta["llama.rope.dimension_count"])
			}
		})
	}
}

// TestRealMatchesGGUF compares every weight of stories260K.bin with the
// same-named tensor of the GGUF conversion, byte for byte; the GGUF's untied
// output.weight must equal the checkpoint's shared token_embd.weight.
func TestRealMatchesGGUF(t *testing.T) {
	binPath := needModel(t, "stories260K/stories260K.bin")
	ggPath := needModel(t, "stories260K-gguf/stories260K.gguf")
	bf, err := Open(binPath)
	if err != nil {
		t.Fatal(err)
	}
	gf, err := gguf.Open(ggPath)
	if err != nil {
		t.Fatal(err)
	}
	binBytes, _ := os.ReadFile(binPath)
	ggBytes, _ := os.ReadFile(ggPath)
	pairs := map[string]string{"output.weight": "token_embd.weight"}
	for _, ti := range bf.Tensors {
		pairs[ti.Name] = ti.Name
	}
	if len(pairs) != len(gf.Tensors) {
		t.Errorf("%d tensors to compare, the GGUF has %d", len(pairs), len(gf.Tensors))
	}
	for ggName, binName := range pairs {
		g, ok := gf.Tensor(ggName)
		b, ok2 := bf.Tensor(binName)
		if !ok || !ok2 {
			t.Errorf("%s: in gguf %v, in bin %v", ggName, ok, ok2)
			continue
		}
		if !cmp.Equal(g.Shape, b.Shape) || g.Size != b.Size {
			t.Errorf("%s: gguf %v %d bytes, bin %v %d bytes", ggName, g.Shape, g.Size, b.Shape, b.Size)
			continue
		}
		if !bytes.Equal(ggBytes[g.Offset:g.Offset+g.Size], binBytes[b.Offset:b.Offset+b.Size]) {
			t.Errorf("%s: bytes differ", ggName)
		}
	}
}

// FuzzLlama2cHeader: any input gives an *Error naming the file and an offset
// inside it, or a File whose tensors tile the file within its size.
func FuzzLlama2cHeader(f *testing.F) {
	for _, cfg := range variants() {
		b, _ := writeBytes(f, cfg)
		f.Add(b)
	}
	f.Add([]byte("24ka\x01\x00\x00\x00"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Read(bytes.NewReader(b), int64(len(b)), "fuzz.bin")
		if err != nil {
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Path != "fuzz.bin" || e.Offset < 0 || e.Offset > int64(len(b)) {
				t.Fatalf("%T %v: want an *Error inside the file", err, err)
			}
			return
		}
		if !Sniff(b) {
			t.Fatal("Read accepted a file Sniff rejects")
		}
		for _, ti := range file.Tensors {
			if ti.Offset < 28 || ti.Offset+ti.Size > int64(len(b)) || ti.Size != 4*ti.Elements() {
				t.Fatalf("%+v outside a %d-byte file", ti, len(b))
			}
		}
	})
}
