package synth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

func TestLookupPreset(t *testing.T) {
	tests := []struct {
		name string
		want Preset
	}{
		{"tiny", Preset{Name: "tiny", Dim: 64, Hidden: 176, Layers: 2, Heads: 4, KVHeads: 2, Context: 256, Vocab: 512}},
		{"tiny-k", Preset{Name: "tiny-k", Dim: 256, Hidden: 512, Layers: 4, Heads: 4, KVHeads: 2, Context: 256, Vocab: 512}},
		{"15m", Preset{Name: "15m", Dim: 288, Hidden: 768, Layers: 6, Heads: 6, KVHeads: 6, Context: 256, Vocab: 32000}},
		{"110m", Preset{Name: "110m", Dim: 768, Hidden: 2048, Layers: 12, Heads: 12, KVHeads: 12, Context: 1024, Vocab: 32000}},
		{"1b", Preset{Name: "1b", Dim: 2048, Hidden: 5632, Layers: 16, Heads: 32, KVHeads: 8, Context: 2048, Vocab: 32000}},
		{"7b", Preset{Name: "7b", Dim: 4096, Hidden: 11008, Layers: 32, Heads: 32, KVHeads: 32, Context: 4096, Vocab: 32000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LookupPreset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err := got.validate(); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
	if n := len(Presets()); n != len(tests) {
		t.Errorf("Presets() has %d entries, the table %d", n, len(tests))
	}
	_, err := LookupPreset("3b")
	if !errors.Is(err, ErrUnknownPreset) || !strings.Contains(err.Error(), "tiny, tiny-k, 15m, 110m, 1b, 7b") {
		t.Errorf("LookupPreset(3b) = %v, want ErrUnknownPreset listing the names", err)
	}
	ps := Presets()
	ps[0].Dim = 1
	if p := mustPreset(t, "tiny"); p.Dim != 64 {
		t.Error("Presets() shares its slice with the package")
	}
}

// TestParams checks Preset.Params against counts worked out by hand (output
// separate from the embedding, norms included).
func TestParams(t *testing.T) {
	tests := []struct {
		name string
		want int64
	}{
		// 2·512·64 + 64 + 2·(2·64 + 64·64·2 + 64·32·2 + 3·64·176)
		{"tiny", 158_016},
		// 2·32000·288 + 288 + 6·(576 + 2·288² + 2·288² + 3·288·768)
		{"15m", 24_407_712},
		// 2·32000·2048 + 2048 + 16·(4096 + 2·2048² + 2·2048·512 + 3·2048·5632)
		{"1b", 852_559_872},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustPreset(t, tc.name).Params(); got != tc.want {
				t.Errorf("Params = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestInvalidOptions(t *testing.T) {
	tiny := mustPreset(t, "tiny")
	with := func(f func(*Preset)) Preset { p := tiny; f(&p); return p }
	tests := []struct {
		name string
		o    Options
		want error
		msg  string
	}{
		{"zero preset", Options{}, ErrInvalid, "Dim = 0"},
		{"dtype", Options{Preset: tiny, DType: 99}, ErrInvalid, "dtype ggml_type(99)"},
		{"negative std", Options{Preset: tiny, Std: -1}, ErrInvalid, "Std -1"},
		{"NaN std", Options{Preset: tiny, Std: float32(math.NaN())}, ErrInvalid, "Std NaN"},
		{"Inf embed std", Options{Preset: tiny, EmbedStd: float32(math.Inf(1))}, ErrInvalid, "EmbedStd +Inf"},
		{"heads", Options{Preset: with(func(p *Preset) { p.Heads = 3 })}, ErrInvalid, "not a multiple of Heads 3"},
		{"kv heads", Options{Preset: with(func(p *Preset) { p.KVHeads = 3 })}, ErrInvalid, "not a multiple of KVHeads 3"},
		{"odd head dim", Options{Preset: with(func(p *Preset) { p.Heads = 64; p.KVHeads = 64 })}, ErrInvalid, "head size 1 is odd"},
		{"small vocab", Options{Preset: with(func(p *Preset) { p.Vocab = 100 })}, ErrInvalid, "Vocab 100 is below 259"},
		{"huge vocab", Options{Preset: with(func(p *Preset) { p.Vocab = 1 << 21 })}, ErrInvalid, "Vocab = 2097152"},
		{"vocab beyond generated", Options{Preset: with(func(p *Preset) { p.Vocab = MaxGeneratedVocab() + 1 })}, ErrInvalid, "generated vocabulary"},
		{"workers", Options{Preset: tiny, Workers: -1}, ErrInvalid, "Workers -1"},
		{"missing tokenizer", Options{Preset: tiny, TokenizerPath: filepath.Join(t.TempDir(), "none.bin")}, os.ErrNotExist, "none.bin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w countWriter
			err := Write(&w, tc.o)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Write = %v, want %v containing %q", err, tc.want, tc.msg)
			}
			if w.n != 0 {
				t.Errorf("%d bytes written before the error", w.n)
			}
		})
	}
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// tinyTensors is the tiny preset's tensor index, written out by hand:
// shapes outermost first, ffn_down (176 wide) falls back to f16 when the
// dtype is quantized.
func tinyTensors(dt tensor.DType) []tensor.Info {
	down := dt
	if dt == tensor.Q8_0 || dt == tensor.Q4_0 {
		down = tensor.F16
	}
	ts := []tensor.Info{
		{Name: "token_embd.weight", DType: dt, Shape: []int{512, 64}},
		{Name: "output_norm.weight", DType: tensor.F32, Shape: []int{64}},
		{Name: "output.weight", DType: dt, Shape: []int{512, 64}},
	}
	for l := range 2 {
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s.weight", l, s) }
		ts = append(ts,
			tensor.Info{Name: n("attn_norm"), DType: tensor.F32, Shape: []int{64}},
			tensor.Info{Name: n("attn_q"), DType: dt, Shape: []int{64, 64}},
			tensor.Info{Name: n("attn_k"), DType: dt, Shape: []int{32, 64}},
			tensor.Info{Name: n("attn_v"), DType: dt, Shape: []int{32, 64}},
			tensor.Info{Name: n("attn_output"), DType: dt, Shape: []int{64, 64}},
			tensor.Info{Name: n("ffn_norm"), DType: tensor.F32, Shape: []int{64}},
			tensor.Info{Name: n("ffn_gate"), DType: dt, Shape: []int{176, 64}},
			tensor.Info{Name: n("ffn_up"), DType: dt, Shape: []int{176, 64}},
			tensor.Info{Name: n("ffn_down"), DType: down, Shape: []int{64, 176}},
		)
	}
	return ts
}

// bytesOf is the stored size of n elements of dt, from the block layouts.
func bytesOf(dt tensor.DType, n int64) int64 {
	switch dt {
	case tensor.F32:
		return 4 * n
	case tensor.F16, tensor.BF16:
		return 2 * n
	case tensor.Q8_0:
		return n / 32 * 34
	case tensor.Q4_0:
		return n / 32 * 18
	}
	panic("bytesOf " + dt.String())
}

func TestTinyRoundTrip(t *testing.T) {
	tests := []struct {
		dt       tensor.DType
		fileType uint64
	}{
		{tensor.F32, 0}, {tensor.F16, 1}, {tensor.Q4_0, 2}, {tensor.Q8_0, 7}, {tensor.BF16, 32},
	}
	for _, tc := range tests {
		t.Run(tc.dt.String(), func(t *testing.T) {
			b := writeBytes(t, Options{Preset: mustPreset(t, "tiny"), DType: tc.dt, Seed: 7})
			f := readGGUF(t, b)
			want := map[string]any{
				"general.architecture":                   "llama",
				"general.name":                           "sluice-synth-tiny",
				"general.file_type":                      tc.fileType,
				"general.quantization_version":           uint64(2),
				"llama.context_length":                   uint64(256),
				"llama.embedding_length":                 uint64(64),
				"llama.block_count":                      uint64(2),
				"llama.feed_forward_length":              uint64(176),
				"llama.rope.dimension_count":             uint64(16),
				"llama.attention.head_count":             uint64(4),
				"llama.attention.head_count_kv":          uint64(2),
				"llama.attention.layer_norm_rms_epsilon": float64(float32(1e-5)),
				"llama.rope.freq_base":                   float64(10000),
				"llama.vocab_size":                       uint64(512),
				"tokenizer.ggml.model":                   "llama",
				"tokenizer.ggml.bos_token_id":            uint64(1),
				"tokenizer.ggml.eos_token_id":            uint64(2),
				"tokenizer.ggml.unknown_token_id":        uint64(0),
				"tokenizer.ggml.add_bos_token":           true,
				"tokenizer.ggml.add_eos_token":           false,
			}
			got := map[string]any{}
			for k, v := range want {
				switch v.(type) {
				case string:
					got[k], _ = f.String(k)
				case uint64:
					got[k], _ = f.Uint(k)
				case float64:
					got[k], _ = f.Float(k)
				case bool:
					got[k], _ = f.Bool(k)
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("metadata (-want +got):\n%s", diff)
			}
			toks, _ := f.Strings("tokenizer.ggml.tokens")
			scores, _ := f.Float32s("tokenizer.ggml.scores")
			types, _ := f.Int32s("tokenizer.ggml.token_type")
			if len(toks) != 512 || len(scores) != 512 || len(types) != 512 {
				t.Errorf("vocabulary arrays have %d/%d/%d entries, want 512", len(toks), len(scores), len(types))
			}

			wantTs := tinyTensors(tc.dt)
			gotTs := make([]tensor.Info, len(f.Tensors))
			for i, ti := range f.Tensors {
				gotTs[i] = tensor.Info{Name: ti.Name, DType: ti.DType, Shape: ti.Shape}
				if want := bytesOf(ti.DType, ti.Elements()); ti.Size != want {
					t.Errorf("%s: %d bytes, want %d", ti.Name, ti.Size, want)
				}
			}
			if diff := cmp.Diff(wantTs, gotTs); diff != "" {
				t.Errorf("tensors (-want +got):\n%s", diff)
			}
			last := f.Tensors[len(f.Tensors)-1]
			if end := last.Offset + last.Size; end != int64(len(b)) {
				t.Errorf("last tensor ends at %d, file has %d bytes", end, len(b))
			}
		})
	}
}

// TestSameBytesAsGGUFWriter re-encodes a file through format/gguf's Writer
// (metadata and tensors as read back, tensors given whole to AddTensor): the
// bytes must be identical to synth's streamed AddTensorFunc output.
func TestSameBytesAsGGUFWriter(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.Q4_0} {
		t.Run(dt.String(), func(t *testing.T) {
			b := writeBytes(t, Options{Preset: mustPreset(t, "tiny"), DType: dt, Seed: 3})
			f := readGGUF(t, b)
			w := gguf.NewWriter()
			for _, kv := range f.KV {
				if err := w.AddKV(kv.Key, kv.Value); err != nil {
					t.Fatal(err)
				}
			}
			for _, ti := range f.Tensors {
				if err := w.AddTensor(ti.Name, ti.DType, ti.Shape, b[ti.Offset:ti.Offset+ti.Size]); err != nil {
					t.Fatal(err)
				}
			}
			var again bytes.Buffer
			if _, err := w.WriteTo(&again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b, again.Bytes()) {
				t.Errorf("synth wrote %d bytes, gguf.Writer %d for the same content; first difference at %d", len(b), again.Len(), firstDiff(b, again.Bytes()))
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// widePreset has tensors of several chunks, unlike tiny, whose tensors fit
// in one chunk each: token_embd 2 chunks of 1024 rows, ffn_gate 1024 + 64
// rows, ffn_down (1088 wide) 60 + 4 rows.
func widePreset(t testing.TB) Preset {
	p := mustPreset(t, "tiny")
	p.Name, p.Hidden, p.Vocab = "wide", 1088, 2048
	return p
}

func TestDeterministic(t *testing.T) {
	tiny := widePreset(t)
	hash := func(o Options) [32]byte {
		h := sha256.New()
		if err := Write(h, o); err != nil {
			t.Fatal(err)
		}
		return [32]byte(h.Sum(nil))
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) {
			base := hash(Options{Preset: tiny, DType: dt, Seed: 42, Workers: 1})
			for _, w := range []int{0, 3} {
				if got := hash(Options{Preset: tiny, DType: dt, Seed: 42, Workers: w}); got != base {
					t.Errorf("Workers %d: hash %x, Workers 1: %x", w, got[:8], base[:8])
				}
			}
			if got := hash(Options{Preset: tiny, DType: dt, Seed: 43}); got == base {
				t.Error("seeds 42 and 43 give identical files")
			}
		})
	}
	// Different seeds must change the weights themselves, not only the
	// description that names the seed.
	a := writeBytes(t, Options{Preset: tiny, Seed: 1, Workers: 3})
	b := writeBytes(t, Options{Preset: tiny, Seed: 2})
	fa, fb := readGGUF(t, a), readGGUF(t, b)
	for _, ti := range fa.Tensors {
		tb, _ := fb.Tensor(ti.Name)
		if bytes.Equal(a[ti.Offset:ti.Offset+ti.Size], b[tb.Offset:tb.Offset+tb.Size]) {
			t.Errorf("%s: identical for seeds 1 and 2", ti.Name)
		}
	}
	// Every chunk has its own stream: no row may repeat anywhere in the file.
	seen := map[string]string{}
	for _, ti := range fa.Tensors {
		rb := ti.Size / int64(ti.Rows())
		for r := range int64(ti.Rows()) {
			row := string(a[ti.Offset+r*rb : ti.Offset+(r+1)*rb])
			where := fmt.Sprintf("%s row %d", ti.Name, r)
			if prev, dup := seen[row]; dup {
				t.Fatalf("%s repeats %s", where, prev)
			}
			seen[row] = where
		}
	}
}

// moments returns the mean, the standard deviation and the fraction of
// values within one standard deviation of the mean.
func moments(xs []float32, center float64) (mean, std, within1 float64) {
	for _, x := range xs {
		mean += float64(x)
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		d := float64(x) - mean
		std += d * d
	}
	std = math.Sqrt(std / float64(len(xs)))
	n := 0
	for _, x := range xs {
		if math.Abs(float64(x)-center) <= std {
			n++
		}
	}
	return mean, std, float64(n) / float64(len(xs))
}

func TestWeightStatistics(t *testing.T) {
	tests := []struct {
		name   string
		o      Options
		tensor string
		want   float64
	}{
		{"embedding default", Options{}, "token_embd.weight", DefaultEmbedStd},
		{"embedding 0.3", Options{EmbedStd: 0.3}, "token_embd.weight", 0.3},
		{"output default", Options{}, "output.weight", DefaultStd},
		{"attention default", Options{EmbedStd: 0.3}, "blk.0.attn_q.weight", DefaultStd},
		{"ffn 0.05", Options{Std: 0.05}, "blk.1.ffn_up.weight", 0.05},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			o.Preset, o.Seed = mustPreset(t, "tiny"), 11
			b := writeBytes(t, o)
			xs := weights(t, b, readGGUF(t, b), tc.tensor)
			// 4096..32768 samples: the standard error of the std is
			// want/sqrt(2n) < 1.2%, of the mean want/sqrt(n) < 1.6%.
			mean, std, within := moments(xs, 0)
			if math.Abs(mean) > 0.06*tc.want {
				t.Errorf("mean %.6f, want ≈ 0", mean)
			}
			if math.Abs(std-tc.want) > 0.04*tc.want {
				t.Errorf("std %.6f, want %.4f", std, tc.want)
			}
			if math.Abs(within-0.6827) > 0.025 { // a normal distribution's mass within 1σ
				t.Errorf("%.4f of the weights within 1σ, want 0.6827", within)
			}
		})
	}
	b := writeBytes(t, Options{Preset: mustPreset(t, "tiny"), Seed: 11})
	f := readGGUF(t, b)
	var norms []float32
	for _, ti := range f.Tensors {
		if strings.HasSuffix(ti.Name, "norm.weight") {
			norms = append(norms, weights(t, b, f, ti.Name)...)
		}
	}
	if mean, std, _ := moments(norms, 1); math.Abs(mean-1) > 0.005 || math.Abs(std-DefaultStd) > 0.005 {
		t.Errorf("norm weights: mean %.4f std %.4f, want ≈ 1 and ≈ %v", mean, std, DefaultStd)
	}
	if bytes.Equal(tensorBytes(t, b, f, "token_embd.weight"), tensorBytes(t, b, f, "output.weight")) {
		t.Error("output.weight equals token_embd.weight; the output matrix must be separate")
	}
}

func tensorBytes(t testing.TB, b []byte, f *gguf.File, name string) []byte {
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("tensor %q missing", name)
	}
	return b[ti.Offset : ti.Offset+ti.Size]
}

// TestDTypesShareWeights: every dtype stores the same underlying draws, so a
// quantized file is the f32 file quantized (parity tests across dtypes rely
// on it).
func TestDTypesShareWeights(t *testing.T) {
	tiny := mustPreset(t, "tiny")
	ref := writeBytes(t, Options{Preset: tiny, DType: tensor.F32, Seed: 5})
	rf := readGGUF(t, ref)
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0} {
		t.Run(dt.String(), func(t *testing.T) {
			b := writeBytes(t, Options{Preset: tiny, DType: dt, Seed: 5})
			f := readGGUF(t, b)
			for _, ti := range rf.Tensors {
				want := weights(t, ref, rf, ti.Name)
				got := weights(t, b, f, ti.Name)
				// Reference encoding of the f32 weights in the dtype the file uses.
				gi, _ := f.Tensor(ti.Name)
				enc := make([]byte, bytesOf(gi.DType, int64(len(want))))
				encode(enc, want, gi.DType)
				exp := make([]float32, len(want))
				tensor.DequantizeRow(exp, enc, gi.DType, len(want))
				for i := range exp {
					if math.Float32bits(exp[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%s (%v): weight %d is %v, the f32 file's weight encoded gives %v", ti.Name, gi.DType, i, got[i], exp[i])
					}
				}
			}
		})
	}
}

// encode is a plain, whole-tensor encoding used as the test's reference.
func encode(dst []byte, x []float32, dt tensor.DType) {
	switch dt {
	case tensor.F32:
		for i, v := range x {
			u := math.Float32bits(v)
			dst[4*i], dst[4*i+1], dst[4*i+2], dst[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
		}
	case tensor.F16:
		for i, v := range x {
			h := tensor.F32ToF16(v)
			dst[2*i], dst[2*i+1] = byte(h), byte(h>>8)
		}
	case tensor.BF16:
		for i, v := range x {
			h := tensor.F32ToBF16(v)
			dst[2*i], dst[2*i+1] = byte(h), byte(h>>8)
		}
	case tensor.Q8_0:
		tensor.QuantizeRowQ8_0(dst, x)
	case tensor.Q4_0:
		tensor.QuantizeRowQ4_0(dst, x)
	}
}

func TestProgress(t *testing.T) {
	tiny := mustPreset(t, "tiny")
	var calls int
	var last, total int64
	o := Options{Preset: tiny, DType: tensor.Q4_0, Progress: func(done, tot int64) {
		if done <= last || (total != 0 && tot != total) {
			t.Errorf("Progress(%d, %d) after (%d, %d)", done, tot, last, total)
		}
		calls++
		last, total = done, tot
	}}
	b := writeBytes(t, o)
	f := readGGUF(t, b)
	var sum int64
	for _, ti := range f.Tensors {
		sum += ti.Size
	}
	if last != sum || total != sum || calls < len(f.Tensors) {
		t.Errorf("%d calls ending at (%d, %d), want ≥ %d calls ending at (%d, %d)", calls, last, total, len(f.Tensors), sum, sum)
	}
}

// failWriter accepts n bytes, then fails.
type failWriter struct{ n int }

var errDiskFull = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		k := w.n
		w.n = 0
		return k, errDiskFull
	}
	w.n -= len(p)
	return len(p), nil
}

func TestWriteErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	size := len(writeBytes(t, Options{Preset: mustPreset(t, "tiny")}))
	for _, n := range []int{0, 100, 20_000, size / 2, size - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			err := Write(&failWriter{n: n}, Options{Preset: mustPreset(t, "tiny"), Workers: 3})
			if !errors.Is(err, errDiskFull) || !strings.HasPrefix(err.Error(), "synth: write: ") {
				t.Errorf("Write = %v, want the writer's error wrapped", err)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	o := Options{Preset: mustPreset(t, "tiny"), DType: tensor.Q8_0, Seed: 9}
	if err := WriteFile(path, o); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, writeBytes(t, o)) {
		t.Error("WriteFile and Write differ")
	}
	if _, err := gguf.Open(path); err != nil {
		t.Errorf("gguf.Open: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only tiny.gguf", len(entries))
	}

	bad := Options{Preset: mustPreset(t, "tiny"), DType: 99}
	if err := WriteFile(filepath.Join(dir, "bad.gguf"), bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("WriteFile(bad dtype) = %v, want ErrInvalid", err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "x.gguf"), o); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("WriteFile into a missing directory = %v, want an error naming it", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed writes left %d entries behind", len(entries)-1)
	}
}

// TestTinyIsFast: the tiny preset backs `make demo` and fast tests; it must
// take well under a second (it takes milliseconds; the bound only catches a
// pathological slowdown, even under -race on a loaded machine).
func TestTinyIsFast(t *testing.T) {
	start := time.Now()
	if err := Write(io.Discard, Options{Preset: mustPreset(t, "tiny"), DType: tensor.Q4_0}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("tiny preset took %v, want < 1s", d)
	}
}

// Test15m writes the 15m preset (q4_0 to keep it at 14 MB) and checks its
// index against the shapes the issue gives.
func Test15m(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the 15m preset")
	}
	p := mustPreset(t, "15m")
	path := filepath.Join(t.TempDir(), "15m.gguf")
	if err := WriteFile(path, Options{Preset: p, DType: tensor.Q4_0, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3+9*6 {
		t.Errorf("%d tensors, want %d", len(f.Tensors), 3+9*6)
	}
	var params int64
	shapes := map[string][]int{}
	for _, ti := range f.Tensors {
		params += ti.Elements()
		shapes[ti.Name] = ti.Shape
		if want := tensor.Q4_0; !strings.HasSuffix(ti.Name, "norm.weight") && ti.DType != want {
			t.Errorf("%s is %v, want %v", ti.Name, ti.DType, want)
		}
	}
	if params != 24_407_712 {
		t.Errorf("%d parameters, want 24407712", params)
	}
	wantShapes := map[string][]int{
		"token_embd.weight": {32000, 288}, "output.weight": {32000, 288}, "output_norm.weight": {288},
		"blk.5.attn_q.weight": {288, 288}, "blk.5.attn_k.weight": {288, 288}, "blk.5.ffn_gate.weight": {768, 288},
		"blk.5.ffn_down.weight": {288, 768}, "blk.5.ffn_norm.weight": {288},
	}
	for name, want := range wantShapes {
		if diff := cmp.Diff(want, shapes[name]); diff != "" {
			t.Errorf("%s shape (-want +got):\n%s", name, diff)
		}
	}
	if n, _ := f.Uint("llama.vocab_size"); n != 32000 {
		t.Errorf("llama.vocab_size %d", n)
	}
}

func BenchmarkWrite(b *testing.B) {
	for _, name := range []string{"tiny", "15m"} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.Q8_0, tensor.Q4_0} {
			b.Run(name+"/"+dt.String(), func(b *testing.B) {
				o := Options{Preset: mustPreset(b, name), DType: dt}
				var w countWriter
				for b.Loop() {
					w.n = 0
					if err := Write(&w, o); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(w.n)
				b.ReportMetric(float64(o.Preset.Params())*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mweights/s")
			})
		}
	}
}

func TestWriteCancelled(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(t.Context())
	o := Options{Preset: widePreset(t), Workers: 2}
	calls := 0
	o.Progress = func(done, total int64) {
		calls++
		if calls == 2 {
			cancel()
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "wide.gguf")
	err := WriteFileContext(ctx, path, o)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
		t.Errorf("WriteFileContext = %v, want context.Canceled naming %s", err, path)
	}
	if calls != 2 {
		t.Errorf("%d chunks written after the cancel, want 0", calls-2)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a cancelled write left %d files", len(entries))
	}
	if err := WriteContext(ctx, io.Discard, o); !errors.Is(err, context.Canceled) {
		t.Errorf("WriteContext(cancelled) = %v", err)
	}
}
