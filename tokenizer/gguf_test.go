package tokenizer

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/format/gguf"
)

// ggufFixture writes kvs (in order) as a vocab-only GGUF and reads it back.
func ggufFixture(t *testing.T, kvs []gguf.KV) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b.Bytes()), int64(b.Len()), "fixture.gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// spmKVs is a small valid "llama" vocabulary; drop and replace edit it.
func spmKVs() []gguf.KV {
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "llama"},
		{Key: "tokenizer.ggml.tokens", Value: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a"}},
		{Key: "tokenizer.ggml.scores", Value: []float32{0, 0, 0, -1, -2, -3}},
		{Key: "tokenizer.ggml.token_type", Value: []int32{2, 3, 3, 1, 1, 1}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
	}
}

func bpeKVs() []gguf.KV {
	return []gguf.KV{
		{Key: "tokenizer.ggml.model", Value: "gpt2"},
		{Key: "tokenizer.ggml.pre", Value: "gpt-2"},
		{Key: "tokenizer.ggml.tokens", Value: []string{"a", "b", "Ġ", "ab", "Ġab", "<|endoftext|>"}},
		{Key: "tokenizer.ggml.token_type", Value: []int32{1, 1, 1, 1, 1, 3}},
		{Key: "tokenizer.ggml.merges", Value: []string{"a b", "Ġ ab"}},
		{Key: "tokenizer.ggml.bos_token_id", Value: uint32(5)},
		{Key: "tokenizer.ggml.eos_token_id", Value: uint32(5)},
	}
}

func edit(kvs []gguf.KV, key string, value any) []gguf.KV {
	out := slices.DeleteFunc(slices.Clone(kvs), func(kv gguf.KV) bool { return kv.Key == key })
	if value != nil {
		out = append(out, gguf.KV{Key: key, Value: value})
	}
	return out
}

func TestFromGGUFErrors(t *testing.T) {
	tests := []struct {
		name string
		kvs  []gguf.KV
		err  error
		want string // besides "fixture.gguf"
	}{
		{"no model", edit(spmKVs(), "tokenizer.ggml.model", nil), ErrMissingKey, "missing key tokenizer.ggml.model"},
		{"model of wrong type", edit(spmKVs(), "tokenizer.ggml.model", uint32(1)), ErrMissingKey, "tokenizer.ggml.model holds uint32, expected string"},
		{"unsupported model", edit(spmKVs(), "tokenizer.ggml.model", "bert"), ErrUnsupported, `tokenizer.ggml.model is "bert"`},
		{"no tokens", edit(spmKVs(), "tokenizer.ggml.tokens", nil), ErrMissingKey, "missing key tokenizer.ggml.tokens"},
		{"empty tokens", edit(spmKVs(), "tokenizer.ggml.tokens", []string{}), ErrFormat, "tokenizer.ggml.tokens is empty"},
		{"no scores", edit(spmKVs(), "tokenizer.ggml.scores", nil), ErrMissingKey, "missing key tokenizer.ggml.scores"},
		{"short scores", edit(spmKVs(), "tokenizer.ggml.scores", []float32{0}), ErrFormat, "tokenizer.ggml.scores has 1 entries but tokenizer.ggml.tokens has 6"},
		{"short types", edit(spmKVs(), "tokenizer.ggml.token_type", []int32{1}), ErrFormat, "tokenizer.ggml.token_type has 1 entries"},
		{"bad type", edit(spmKVs(), "tokenizer.ggml.token_type", []int32{2, 3, 3, 1, 9, 1}), ErrFormat, "tokenizer.ggml.token_type[4] is 9"},
		{"types of wrong type", edit(spmKVs(), "tokenizer.ggml.token_type", []string{"x"}), ErrMissingKey, "tokenizer.ggml.token_type holds []string"},
		{"bos out of range", edit(spmKVs(), "tokenizer.ggml.bos_token_id", uint32(6)), ErrFormat, "tokenizer.ggml.bos_token_id is 6, outside the 6-token vocabulary"},
		{"eos negative", edit(spmKVs(), "tokenizer.ggml.eos_token_id", int32(-7)), ErrMissingKey, "tokenizer.ggml.eos_token_id holds int32, expected non-negative integer"},
		{"add_bos not bool", edit(spmKVs(), "tokenizer.ggml.add_bos_token", uint8(1)), ErrMissingKey, "tokenizer.ggml.add_bos_token holds uint8, expected bool"},
		{"no merges", edit(bpeKVs(), "tokenizer.ggml.merges", nil), ErrMissingKey, "missing key tokenizer.ggml.merges"},
		{"bad merge", edit(bpeKVs(), "tokenizer.ggml.merges", []string{"ab"}), ErrFormat, `merge 0 "ab"`},
		{"unknown pre", edit(bpeKVs(), "tokenizer.ggml.pre", "no-such-pre"), ErrUnsupported, `pre-tokenizer "no-such-pre" (tokenizer.ggml.pre) is not one sluice knows; known: a.x-4.0, afmoe, `},
		{"pre not a string", edit(bpeKVs(), "tokenizer.ggml.pre", uint32(3)), ErrMissingKey, "tokenizer.ggml.pre holds uint32, expected string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromGGUF(ggufFixture(t, tc.kvs))
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "fixture.gguf") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %v naming fixture.gguf and containing %q", err, tc.err, tc.want)
			}
		})
	}
	if _, err := FromGGUF(nil); err == nil {
		t.Error("FromGGUF(nil): no error")
	}
}

func TestFromGGUFDefaults(t *testing.T) {
	tests := []struct {
		name                  string
		kvs                   []gguf.KV
		kind                  Kind
		bos, eos, unk         int32
		addBOS, addEOS        bool
		text                  string
		wantIDs               []int32
		wantDecode, wantPiece string // wantPiece: Piece streamed over the ids
	}{
		{
			name: "spm defaults", kvs: edit(edit(spmKVs(), "tokenizer.ggml.bos_token_id", nil), "tokenizer.ggml.eos_token_id", nil),
			kind: KindSPM, bos: 1, eos: 2, unk: 0, addBOS: true,
			text: "a a", wantIDs: []int32{1, 5, 5}, wantDecode: "a a", wantPiece: "a a",
		},
		{
			name: "spm without space prefix", kvs: append(spmKVs(), gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: false}),
			kind: KindSPM, bos: 1, eos: 2, unk: 0, addBOS: true,
			text: "a a", wantIDs: []int32{1, 4, 5}, wantDecode: "a a", wantPiece: "a a",
		},
		{
			name: "spm none ids", kvs: edit(edit(spmKVs(), "tokenizer.ggml.bos_token_id", uint32(math.MaxUint32)), "tokenizer.ggml.unknown_token_id", int32(-1)),
			kind: KindSPM, bos: -1, eos: 2, unk: -1, addBOS: true,
			text: "a a", wantIDs: []int32{5, 5}, wantDecode: "a a", wantPiece: " a a", // no BOS: run.c would keep the space
		},
		{
			name: "bpe", kvs: append(bpeKVs(), gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: true}),
			kind: KindBPE, bos: 5, eos: 5, unk: -1, addEOS: true,
			text: "ab ab", wantIDs: []int32{5, 3, 4}, wantDecode: "ab ab", wantPiece: "ab ab",
		},
		{
			name: "llama 3 style bpe adds BOS by default", kvs: edit(bpeKVs(), "tokenizer.ggml.pre", "llama-bpe"),
			kind: KindBPE, bos: 5, eos: 5, unk: -1, addBOS: true,
			text: "ab ab", wantIDs: []int32{5, 3, 4}, wantDecode: "ab ab", wantPiece: "ab ab",
		},
		{
			name: "bpe without types or pre", kvs: edit(edit(bpeKVs(), "tokenizer.ggml.token_type", nil), "tokenizer.ggml.pre", nil),
			kind: KindBPE, bos: 5, eos: 5, unk: -1,
			text: "ab ab", wantIDs: []int32{5, 3, 4}, wantDecode: "ab ab", wantPiece: "ab ab",
		},
	}
	type props struct {
		Kind           Kind
		BOS, EOS, Unk  int32
		AddBOS, AddEOS bool
		IDs            []int32
		Decode, Piece  string
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := FromGGUF(ggufFixture(t, tc.kvs))
			if err != nil {
				t.Fatal(err)
			}
			ext := tok.(interface {
				Kind() Kind
				Unk() int32
				AddBOS() bool
				AddEOS() bool
			})
			ids := tok.Encode(tc.text, EncodeOptions{BOS: true})
			got := props{ext.Kind(), tok.BOS(), tok.EOS(), ext.Unk(), ext.AddBOS(), ext.AddEOS(), ids, tok.Decode(ids), stream(tok, ids)}
			want := props{tc.kind, tc.bos, tc.eos, tc.unk, tc.addBOS, tc.addEOS, tc.wantIDs, tc.wantDecode, tc.wantPiece}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestStoriesGGUFMatchesTok512: llama.cpp's converter embedded tok512 in
// stories260K.gguf (with "▁" for spaces and "<s>"/"</s>" spellings); both
// must tokenize and stream identically.
func TestStoriesGGUFMatchesTok512(t *testing.T) {
	bin := loadTok512(t)
	gg := loadGGUF(t, "stories260K-gguf/stories260K.gguf")
	if gg.VocabSize() != 512 || gg.BOS() != 1 || gg.EOS() != 2 {
		t.Fatalf("GGUF vocab %d BOS %d EOS %d", gg.VocabSize(), gg.BOS(), gg.EOS())
	}
	for _, text := range []string{"", "Lily and Tom", "Once upon a time,\nthere was a dog.", " x  y", "öé日\t!", "a\x80b"} {
		for _, o := range []EncodeOptions{{}, {BOS: true, EOS: true}} {
			want := bin.Encode(text, o)
			got := gg.Encode(text, o)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Encode(%q, %+v) (-tok512 +gguf):\n%s", text, o, diff)
			}
			if a, b := stream(bin, want), stream(gg, got); a != b {
				t.Errorf("Piece stream of %q: tok512 %q, gguf %q", text, a, b)
			}
			if d := gg.Decode(got); d != text {
				t.Errorf("gguf Decode(Encode(%q)) = %q", text, d)
			}
		}
	}
}

// TestSpecialTokens: control tokens are text unless ParseSpecial; user-defined
// tokens (phi-3 marks "</s>" so) always match; after a special token
// SentencePiece adds the dummy prefix again, as llama.cpp does.
// TestEOGLlamaCpp: the end-of-generation sets of the shared vocabularies are
// llama.cpp's (llama_vocab_is_eog over every id, via bench/pretok.mjs).
func TestEOGLlamaCpp(t *testing.T) {
	for name, want := range map[string][]int32{"gpt-2": {50256}, "phi-3": {2, 32000, 32007}, "llama-spm": {2}} {
		tok := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-"+name+".gguf")
		if got := tok.(EOGer).EOG(); !slices.Equal(got, want) {
			t.Errorf("%s: EOG %v, llama.cpp %v", name, got, want)
		}
	}
}

func TestSpecialTokens(t *testing.T) {
	spm := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf")
	phi := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-phi-3.gguf")
	gpt := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf")
	parse := EncodeOptions{ParseSpecial: true}
	tests := []struct {
		name string
		tok  Tokenizer
		text string
		o    EncodeOptions
		want []int32
	}{
		{"spm <s> parsed", spm, "<s>Hello", parse, []int32{1, 15043}},
		{"spm <s> as text", spm, "<s>Hello", EncodeOptions{}, spm.Encode(" <s>Hello"[1:], EncodeOptions{})},
		{"spm </s> mid text", spm, "Hello</s> world", parse, []int32{15043, 2, 29871, 3186}},
		// Phi-3's </s> is user-defined, but llama.cpp makes every token with
		// an end-of-generation text a control token: text without
		// ParseSpecial (ids from llama.cpp).
		{"phi-3 </s> as text", phi, "Hello</s>", EncodeOptions{}, []int32{15043, 829, 29879, 29958}},
		{"phi-3 </s> parsed", phi, "Hello</s>", parse, []int32{15043, 2}},
		{"phi-3 control as text", phi, "<|end|>", EncodeOptions{}, phi.Encode("<|end|>", EncodeOptions{})},
		{"phi-3 control parsed", phi, "<|user|>\nHi<|end|>", parse, []int32{32010, 29871, 13, 18567, 32007}},
		{"gpt-2 endoftext parsed", gpt, "Hello<|endoftext|>", parse, []int32{15496, 50256}},
		{"gpt-2 BOS and EOS", gpt, "Hello", EncodeOptions{BOS: true, EOS: true}, []int32{50256, 15496, 50256}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.tok.Encode(tc.text, tc.o)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !tc.o.ParseSpecial && slices.ContainsFunc(got, func(id int32) bool { return id == tc.tok.BOS() || id == tc.tok.EOS() }) && !tc.o.BOS {
				t.Errorf("special token produced without ParseSpecial: %v", got)
			}
		})
	}
	if got := gpt.Encode("<|endoftext|>", EncodeOptions{}); slices.Contains(got, 50256) || gpt.Decode(got) != "<|endoftext|>" {
		t.Errorf("gpt-2 <|endoftext|> as text: %v (%q)", got, gpt.Decode(got))
	}
}

// Kimi K2 files may carry no merges (llama.cpp reads them so); any other
// byte-level name without merges names the missing key.
func TestFromGGUFKimiNoMerges(t *testing.T) {
	kvs := edit(edit(bpeKVs(), "tokenizer.ggml.merges", nil), "tokenizer.ggml.pre", "kimi-k2")
	tok, err := FromGGUF(ggufFixture(t, kvs))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab a", EncodeOptions{}); !slices.Equal(got, []int32{0, 1, 2, 0}) {
		t.Errorf("Encode(\"ab a\") = %v, want [0 1 2 0] (no merges)", got)
	}
	_, err = FromGGUF(ggufFixture(t, edit(kvs, "tokenizer.ggml.pre", "qwen2")))
	if !errors.Is(err, ErrMissingKey) || !strings.Contains(err.Error(), "tokenizer.ggml.merges") {
		t.Errorf("qwen2 without merges: %v, want ErrMissingKey naming tokenizer.ggml.merges", err)
	}
}
