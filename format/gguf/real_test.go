package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

func needModel(t testing.TB, rel string) string {
	t.Helper()
	return testutil.Model(t, rel)
}

func TestRealStories260K(t *testing.T) {
	path := needModel(t, "stories260K-gguf/stories260K.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 3 || f.Alignment != 32 || f.DataOffset != 14176 || len(f.KV) != 19 || len(f.Tensors) != 48 {
		t.Errorf("version %d alignment %d data %d, %d KVs, %d tensors; want 3 32 14176 19 48",
			f.Version, f.Alignment, f.DataOffset, len(f.KV), len(f.Tensors))
	}
	q, ok := f.Tensor("blk.0.attn_q.weight")
	if !ok || q.DType != tensor.F32 || !cmp.Equal(q.Shape, []int{64, 64}) || q.Size != 64*64*4 {
		t.Errorf("blk.0.attn_q.weight = %+v, %v", q, ok)
	}
	k, _ := f.Tensor("blk.0.attn_k.weight")
	if !cmp.Equal(k.Shape, []int{32, 64}) { // ggml ne [64,32]: 32 output rows of 64
		t.Errorf("attn_k shape %v, want [32 64]", k.Shape)
	}
	emb, _ := f.Tensor("token_embd.weight")
	if emb.Offset != 14176 || !cmp.Equal(emb.Shape, []int{512, 64}) {
		t.Errorf("token_embd.weight = %+v", emb)
	}
	var end int64
	for _, ti := range f.Tensors {
		if ti.DType != tensor.F32 {
			t.Errorf("%s is %v, want f32", ti.Name, ti.DType)
		}
		end = max(end, ti.Offset+ti.Size)
	}
	st, _ := os.Stat(path)
	if end != st.Size() {
		t.Errorf("tensors end at %d, file is %d bytes", end, st.Size())
	}
	if f.Arch() != "llama" {
		t.Errorf("Arch %q", f.Arch())
	}
	for key, want := range map[string]uint64{
		"llama.embedding_length": 64, "llama.feed_forward_length": 172, "llama.block_count": 5,
		"llama.attention.head_count": 8, "llama.attention.head_count_kv": 4, "llama.context_length": 2048,
		"tokenizer.ggml.padding_token_id": 4294967295,
	} {
		if got, ok := f.Uint(key); !ok || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, ok, want)
		}
	}
	if eps, ok := f.Float("llama.attention.layer_norm_rms_epsilon"); !ok || float32(eps) != 1e-5 {
		t.Errorf("rms eps %v %v", eps, ok)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	scores, _ := f.Float32s("tokenizer.ggml.scores")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if len(toks) != 512 || len(scores) != 512 || len(types) != 512 || toks[1] != "<s>" || types[3] != 6 {
		t.Errorf("vocab: %d tokens, %d scores, %d types", len(toks), len(scores), len(types))
	}
}

func TestRealVocabs(t *testing.T) {
	dir := needModel(t, "llama-cpp-vocab")
	paths, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	if len(paths) == 0 {
		t.Skip("../shared/models/llama-cpp-vocab has no .gguf: skipping real-model test")
	}
	want := map[string]struct {
		arch   string
		tokens int
	}{
		"ggml-vocab-gpt-2.gguf":     {"gpt2", 50257},
		"ggml-vocab-llama-spm.gguf": {"llama", 32000},
		"ggml-vocab-phi-3.gguf":     {"phi3", 32064},
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			// Parsing a 50k vocabulary must not cost an allocation per element
			// beyond the strings themselves.
			var f *File
			allocs := testing.AllocsPerRun(1, func() {
				f, err = Read(bytes.NewReader(b), int64(len(b)), p)
			})
			if err != nil {
				t.Fatal(err)
			}
			toks, ok := f.Strings("tokenizer.ggml.tokens")
			if !ok {
				t.Fatal("no tokenizer.ggml.tokens")
			}
			if w, ok := want[filepath.Base(p)]; ok && (w.arch != f.Arch() || w.tokens != len(toks)) {
				t.Errorf("arch %q, %d tokens; want %q, %d", f.Arch(), len(toks), w.arch, w.tokens)
			}
			merges, _ := f.Strings("tokenizer.ggml.merges")
			if limit := float64(len(toks)+len(merges)) + 500; allocs > limit {
				t.Errorf("%v allocations for %d strings: want at most %v", allocs, len(toks)+len(merges), limit)
			}
			if _, ok := f.Int32s("tokenizer.ggml.token_type"); !ok {
				t.Error("no tokenizer.ggml.token_type")
			}
		})
	}
}

func BenchmarkReadVocab(b *testing.B) {
	path := needModel(b, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), int64(len(data)), path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkWrite(b *testing.B) {
	toks := make([]string, 32000)
	scores := make([]float32, len(toks))
	for i := range toks {
		toks[i] = "▁token" + string(rune('a'+i%26))
		scores[i] = float32(-i)
	}
	w := NewWriter()
	w.AddKV("tokenizer.ggml.tokens", toks)
	w.AddKV("tokenizer.ggml.scores", scores)
	data := make([]byte, 4<<20)
	w.AddTensor("w", tensor.F32, []int{1024, 1024}, data)
	var buf bytes.Buffer
	for b.Loop() {
		buf.Reset()
		n, err := w.WriteTo(&buf)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(n)
	}
}
