package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/format/gguf"
)

// hfJSON writes a tokenizer.json for a BPE model.
type hfJSON struct {
	vocab        map[string]int
	merges       []string
	added        []hfAdded
	preTokenizer any
	normalizer   any
	decoder      any
	byteFallback bool
	unk          string
	pairMerges   bool // write merges as [a, b] pairs (tokenizers ≥ 0.20)
}

func (h hfJSON) bytes(t testing.TB) []byte {
	model := map[string]any{"type": "BPE", "vocab": h.vocab, "byte_fallback": h.byteFallback}
	if h.pairMerges {
		var pairs [][2]string
		for _, m := range h.merges {
			a, b, _ := strings.Cut(m, " ")
			pairs = append(pairs, [2]string{a, b})
		}
		model["merges"] = pairs
	} else {
		model["merges"] = h.merges
	}
	if h.unk != "" {
		model["unk_token"] = h.unk
	}
	added := []map[string]any{}
	for _, a := range h.added {
		added = append(added, map[string]any{"id": a.ID, "content": a.Content, "special": a.Special})
	}
	b, err := json.Marshal(map[string]any{"version": "1.0", "added_tokens": added, "normalizer": h.normalizer,
		"pre_tokenizer": h.preTokenizer, "decoder": h.decoder, "model": model})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// byteLevelJSON is the test vocabulary of pretok_llamacpp_test.go as a
// tokenizer.json with the given pre-tokenizer.
func byteLevelJSON(pre any) hfJSON {
	pieces, types, merges, _ := pretokVocab()
	h := hfJSON{vocab: map[string]int{}, merges: merges, preTokenizer: pre, decoder: map[string]any{"type": "ByteLevel"}}
	for id, p := range pieces {
		if TokenType(types[id]) == TypeNormal {
			h.vocab[p] = id
		} else {
			h.added = append(h.added, hfAdded{ID: id, Content: p, Special: TokenType(types[id]) == TypeControl})
		}
	}
	return h
}

func splitThenByteLevel(pattern string) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": pattern}, "behavior": "Isolated", "invert": false},
		map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
	}}
}

// hfToGGUF parses a tokenizer.json (and config) and loads the result as a
// GGUF vocabulary.
func hfToGGUF(t testing.TB, data, cfg []byte, o HFOptions) (HFVocab, Tokenizer) {
	v, tok, _ := hfToGGUFBytes(t, data, cfg, o)
	return v, tok
}

func hfToGGUFBytes(t testing.TB, data, cfg []byte, o HFOptions) (HFVocab, Tokenizer, []byte) {
	t.Helper()
	v, err := ParseHFTokenizer(data, "tokenizer.json", cfg, "tokenizer_config.json", o)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	arch := []gguf.KV{ // what llama.cpp needs to load a vocab-only file
		{Key: "general.architecture", Value: "llama"},
		{Key: "llama.block_count", Value: uint32(1)},
		{Key: "llama.context_length", Value: uint32(256)},
		{Key: "llama.embedding_length", Value: uint32(64)},
		{Key: "llama.feed_forward_length", Value: uint32(128)},
		{Key: "llama.attention.head_count", Value: uint32(4)},
		{Key: "llama.attention.layer_norm_rms_epsilon", Value: float32(1e-5)},
	}
	for _, kv := range append(arch, v.GGUF()...) {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Read(bytes.NewReader(b.Bytes()), int64(b.Len()), "converted.gguf")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return v, tok, b.Bytes()
}

// A byte-level tokenizer.json becomes a "gpt2" vocabulary whose
// tokenizer.ggml.pre is recognised from its pre-tokenizer, and which
// tokenizes every case as the GGUF vocabulary of that name does (itself held
// to llama.cpp by TestPreTokenizersLlamaCpp).
func TestHFByteLevel(t *testing.T) {
	cfg := []byte(`{"bos_token": "<|endoftext|>", "eos_token": {"content": "<|endoftext|>"}, "add_bos_token": false, "chat_template": "{{ messages }}"}`)
	dir := t.TempDir()
	for _, tc := range []struct {
		pre  string
		json any
	}{
		{"llama-bpe", splitThenByteLevel(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`)},
		{"qwen2", splitThenByteLevel(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`)},
		{"gpt-2", map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}},
		{"smollm", map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}}}},
	} {
		t.Run(tc.pre, func(t *testing.T) {
			h := byteLevelJSON(tc.json)
			h.pairMerges = tc.pre == "qwen2"
			v, tok := hfToGGUF(t, h.bytes(t), cfg, HFOptions{})
			if v.Model != "gpt2" || v.Pre != tc.pre || v.ChatTemplate != "{{ messages }}" || v.AddBOS {
				t.Fatalf("model %q pre %q template %q addBOS %v", v.Model, v.Pre, v.ChatTemplate, v.AddBOS)
			}
			f, err := gguf.Open(writePretokGGUF(t, dir, tc.pre))
			if err != nil {
				t.Fatal(err)
			}
			want, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if tok.BOS() != want.BOS() || tok.EOS() != want.EOS() || tok.VocabSize() != want.VocabSize() {
				t.Errorf("BOS/EOS/size %d/%d/%d, GGUF's %d/%d/%d", tok.BOS(), tok.EOS(), tok.VocabSize(), want.BOS(), want.EOS(), want.VocabSize())
			}
			for _, c := range pretokCases {
				for _, o := range []EncodeOptions{{}, {ParseSpecial: true}} {
					if g, w := tok.Encode(c, o), want.Encode(c, o); !slices.Equal(g, w) {
						t.Errorf("%q (%+v): from tokenizer.json %v, GGUF %v", c, o, g, w)
					}
				}
			}
		})
	}
}

// spmJSON writes a SentencePiece GGUF vocabulary as Llama's tokenizer.json
// does: the pieces as the BPE vocabulary, merges derived from the scores
// (every split of a piece into two pieces, in the order of the piece's
// score, as transformers' SentencePiece converter derives them),
// byte_fallback, the Prepend/Replace normalizer.
func spmJSON(t testing.TB, tok *SPM) hfJSON {
	h := hfJSON{vocab: map[string]int{}, byteFallback: true, unk: tok.Token(tok.Unk()),
		normalizer: map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}}},
		decoder: map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "ByteFallback"}}}}
	type merge struct {
		a, b  string
		score float32
		id    int
	}
	var ms []merge
	for id := range tok.VocabSize() {
		p := tok.Token(int32(id))
		switch tok.Type(int32(id)) {
		case TypeNormal, TypeByte:
			h.vocab[p] = id
		default:
			h.added = append(h.added, hfAdded{ID: id, Content: p, Special: true})
			continue
		}
		if tok.Type(int32(id)) != TypeNormal {
			continue
		}
		for i, r := range p {
			if i == 0 {
				continue
			}
			_ = r
			a, b := p[:i], p[i:]
			if _, ok := tok.lookup[a]; !ok {
				continue
			}
			if _, ok := tok.lookup[b]; !ok {
				continue
			}
			ms = append(ms, merge{a, b, tok.scores[id], id})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].score != ms[j].score {
			return ms[i].score > ms[j].score
		}
		return ms[i].id < ms[j].id
	})
	for _, m := range ms {
		h.merges = append(h.merges, m.a+" "+m.b)
	}
	return h
}

// A SentencePiece-style tokenizer.json (Llama's, with byte_fallback) becomes
// a "llama" vocabulary that passes llama.cpp's test vectors for that
// vocabulary (the .out files come from HF transformers).
func TestHFSentencePiece(t *testing.T) {
	spm := loadGGUF(t, "llama-cpp-vocab/ggml-vocab-llama-spm.gguf").(*SPM)
	h := spmJSON(t, spm)
	v, tok, file := hfToGGUFBytes(t, h.bytes(t), nil, HFOptions{})
	if v.Model != "llama" || !v.AddSpacePrefix || !v.AddBOS || v.BOS != 1 || v.EOS != 2 || v.Unk != 0 {
		t.Fatalf("model %q prefix %v addBOS %v BOS/EOS/unk %d/%d/%d", v.Model, v.AddSpacePrefix, v.AddBOS, v.BOS, v.EOS, v.Unk)
	}
	base := "llama-cpp-vocab/ggml-vocab-llama-spm.gguf"
	inp, err := os.ReadFile(modelFile(t, base+".inp"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(modelFile(t, base+".out"))
	if err != nil {
		t.Fatal(err)
	}
	cases := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	lines := strings.Split(string(out), "\n")
	for i, c := range cases[:len(cases)-1] {
		var got strings.Builder
		for _, id := range tok.Encode(c, EncodeOptions{}) {
			got.WriteString(" ")
			got.WriteString(itoa(id))
		}
		if got.String() != lines[i] {
			t.Errorf("case %d %q: %q, .out %q", i, c, got.String(), lines[i])
		}
	}
	// llama.cpp reads the converted vocabulary and tokenizes as sluice does.
	if testing.Short() {
		return
	}
	dir := t.TempDir()
	path := dir + "/spm-from-json.gguf"
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	live, err := llamaCppPretok(t, dir, map[string]string{"spm": path})
	if err != nil {
		t.Logf("llama.cpp not run: %v", err)
		return
	}
	for i, c := range pretokCases {
		if got := tok.Encode(c, EncodeOptions{}); !slices.Equal(got, live["spm"].Plain[i]) {
			t.Errorf("%q:\nsluice    %v\nllama.cpp %v", c, got, live["spm"].Plain[i])
		}
	}
}

func itoa(id int32) string { b, _ := json.Marshal(id); return string(b) }

func TestHFErrors(t *testing.T) {
	good := byteLevelJSON(splitThenByteLevel(`\p{L}+`)) // a pattern no table entry has
	tests := []struct {
		name string
		data string
		o    HFOptions
		err  error
		want string
	}{
		{"not json", `{`, HFOptions{}, ErrFormat, "tokenizer.json"},
		{"unigram", `{"model": {"type": "Unigram", "vocab": []}}`, HFOptions{}, ErrUnsupported, `model.type "Unigram"`},
		{"neither", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`, HFOptions{}, ErrUnsupported, "neither a ByteLevel"},
		{"unknown split", string(good.bytes(t)), HFOptions{}, ErrUnsupported, `Split pattern "\\p{L}+"`},
		{"forced unknown", string(good.bytes(t)), HFOptions{Pre: "nope"}, ErrUnsupported, `"nope"`},
		{"too big", string(good.bytes(t)), HFOptions{Pre: "gpt-2", VocabSize: 10}, ErrVocabMismatch, "more than the model's vocabulary of 10"},
		{"bad merge", `{"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0}, "merges": ["ab"]}}`, HFOptions{}, ErrFormat, `model.merges[0] "ab"`},
		{"bad id", `{"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": -3}}}`, HFOptions{}, ErrFormat, `model.vocab["a"] is -3`},
		{"dup id", `{"model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "b": 0}}}`, HFOptions{}, ErrFormat, "two tokens with id 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseHFTokenizer([]byte(tc.data), "dir/tokenizer.json", nil, "", tc.o)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), "dir/tokenizer.json") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %v naming dir/tokenizer.json and containing %q", err, tc.err, tc.want)
			}
		})
	}
	// Forcing a known name accepts the unknown pattern; a model larger than
	// the tokenizer is padded with unused tokens.
	v, err := ParseHFTokenizer(good.bytes(t), "tokenizer.json", nil, "", HFOptions{Pre: "qwen2", VocabSize: len(good.vocab) + len(good.added) + 2})
	if err != nil || v.Pre != "qwen2" || !strings.HasPrefix(v.Tokens[v.Len()-1], "[PAD") || v.Types[v.Len()-1] != int32(TypeUnused) {
		t.Fatalf("forced: pre %q, last %q, %v", v.Pre, v.Tokens[len(v.Tokens)-1], err)
	}
	_, err = ParseHFTokenizer(good.bytes(t), "tokenizer.json", []byte(`{"bos_token": "<nope>"}`), "cfg.json", HFOptions{Pre: "gpt-2"})
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `cfg.json: bos_token "<nope>"`) {
		t.Errorf("unknown bos_token: %v", err)
	}
}

// FuzzParseHFTokenizer: any input gives a vocabulary or an error, never a
// panic; a vocabulary it returns loads as a GGUF tokenizer.
func FuzzParseHFTokenizer(f *testing.F) {
	f.Add([]byte(`{"model": {"type": "BPE", "byte_fallback": true, "vocab": {"<unk>": 0, "a": 1, "b": 2, "ab": 3}, "merges": ["a b"], "unk_token": "<unk>"}}`), []byte(`{"bos_token": "a"}`))
	f.Add([]byte(`{"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]}, "added_tokens": [{"id": 3, "content": "<s>", "special": true}]}`), []byte(nil))
	f.Fuzz(func(t *testing.T, data, cfg []byte) {
		if len(data) > 1<<16 {
			return
		}
		v, err := ParseHFTokenizer(data, "tokenizer.json", cfg, "tokenizer_config.json", HFOptions{})
		if err != nil {
			return
		}
		if v.Len() == 0 || len(v.Types) != v.Len() || (v.Model == "llama" && len(v.Scores) != v.Len()) {
			t.Fatalf("inconsistent vocabulary: %d tokens, %d types, %d scores", v.Len(), len(v.Types), len(v.Scores))
		}
		w := gguf.NewWriter()
		for _, kv := range v.GGUF() {
			if err := w.AddKV(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		g, err := gguf.Read(bytes.NewReader(b.Bytes()), int64(b.Len()), "x.gguf")
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromGGUF(g)
		if err != nil {
			if errors.Is(err, ErrFormat) || errors.Is(err, ErrMissingKey) {
				return // e.g. an empty piece where the GGUF reader wants one
			}
			t.Fatalf("FromGGUF: %v", err)
		}
		if s := "ab a"; utf8.ValidString(s) {
			tok.Encode(s, EncodeOptions{ParseSpecial: true})
		}
	})
}
