package convert_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/convert"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/tokenizer"
)

// byteRunes is GPT-2's bytes_to_unicode: printable bytes stand for
// themselves, the others map in order to U+0100….
func byteRunes() [256]string {
	var br [256]string
	next := rune(0x100)
	for b := range 256 {
		if ('!' <= b && b <= '~') || (0xA1 <= b && b <= 0xAC) || (0xAE <= b && b <= 0xFF) {
			br[b] = string(rune(b))
		} else {
			br[b] = string(next)
			next++
		}
	}
	return br
}

// tokText is what the test tokenizer learns its merges from and what it is
// checked on.
const tokText = "The quick brown fox jumps over the lazy dog. It's 2024: 1234 apples, 56 pears!\n\n" +
	"Über café naïve — 日本語 🦙 the the the quick quick brown brown dog dog\tend  "

// writeByteLevelTokenizer writes a Qwen2-style tokenizer.json (Split with
// Qwen2's pattern, then ByteLevel) and tokenizer_config.json into dir: the
// 256 byte pieces, nMerges merges learned from tokText, and two special
// tokens, <|endoftext|> (BOS and EOS) and <|im_end|>.
func writeByteLevelTokenizer(t *testing.T, dir string, nMerges int) {
	t.Helper()
	br := byteRunes()
	vocab := map[string]int{}
	var seq []string
	for b := range 256 {
		vocab[br[b]] = b
	}
	for i := 0; i < len(tokText); i++ {
		seq = append(seq, br[tokText[i]])
	}
	var merges []string
	for len(merges) < nMerges {
		counts := map[[2]string]int{}
		var best [2]string
		n := 1
		for i := 0; i+1 < len(seq); i++ {
			k := [2]string{seq[i], seq[i+1]}
			counts[k]++
			if c := counts[k]; c > n || (c == n && n > 1 && (k[0]+" "+k[1]) < (best[0]+" "+best[1])) {
				best, n = k, c
			}
		}
		if n < 2 {
			break
		}
		merges = append(merges, best[0]+" "+best[1])
		if _, ok := vocab[best[0]+best[1]]; !ok {
			vocab[best[0]+best[1]] = len(vocab)
		}
		var out []string
		for i := 0; i < len(seq); i++ {
			if i+1 < len(seq) && seq[i] == best[0] && seq[i+1] == best[1] {
				out = append(out, best[0]+best[1])
				i++
				continue
			}
			out = append(out, seq[i])
		}
		seq = out
	}
	n := len(vocab)
	tj := map[string]any{
		"version": "1.0",
		"added_tokens": []any{
			map[string]any{"id": n, "content": "<|endoftext|>", "special": true},
			map[string]any{"id": n + 1, "content": "<|im_end|>", "special": true},
		},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}, "behavior": "Isolated"},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": merges, "byte_fallback": false},
	}
	cfg := map[string]any{"bos_token": nil, "eos_token": "<|endoftext|>", "add_bos_token": false,
		"chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}
	for name, v := range map[string]any{tokenizer.HFTokenizerFile: tj, tokenizer.HFTokenizerConfigFile: cfg} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// An HF directory with a byte-level tokenizer.json converts to a GGUF whose
// vocabulary is a qwen2 "gpt2" one padded to the model's 512 ids; sluice
// loads the model with it, and llama.cpp (bench/pretok.mjs, when its
// node_modules are installed) reads the file and tokenizes as sluice does.
// The HF directory is built here: config.json and safetensors from sluice's
// writers, tokenizer.json written by the test (none is on this machine).
func TestHFTokenizerJSON(t *testing.T) {
	dir := writeHF(t, synthModel(t), 1, nil)
	writeByteLevelTokenizer(t, dir, 120)
	out := convertTo(t, dir, convert.Options{})
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2"} {
		if got, _ := f.String(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); !strings.Contains(tmpl, "<|im_start|>") {
		t.Errorf("chat template %q", tmpl)
	}
	l, err := model.Load(t.Context(), model.LoadOptions{Path: out, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tok := l.Tokenizer
	if tok.VocabSize() != 512 || tok.BOS() != -1 || tok.Token(tok.EOS()) != "<|endoftext|>" {
		t.Fatalf("vocabulary %d, BOS %d, EOS %q", tok.VocabSize(), tok.BOS(), tok.Token(tok.EOS()))
	}
	eog := tok.(tokenizer.EOGer).EOG()
	if len(eog) != 2 {
		t.Errorf("EOG %v, want <|endoftext|> and <|im_end|>", eog)
	}
	texts := []string{tokText, "the quick dog's 789<|im_end|>", "  brown\n\n\nfox  "}
	var sluiceIDs [][]int32
	for _, s := range texts {
		ids := tok.Encode(s, tokenizer.EncodeOptions{})
		if got := tok.Decode(ids); got != s {
			t.Errorf("round trip of %q: %q", s, got)
		}
		sluiceIDs = append(sluiceIDs, ids)
	}
	if len(sluiceIDs[0]) >= len(tokText)*9/10 {
		t.Errorf("%d ids for %d bytes: the merges did not apply", len(sluiceIDs[0]), len(tokText))
	}

	plain, llamaEOG, err := llamaCppTokenize(t, out, texts)
	if err != nil {
		t.Logf("llama.cpp not run: %v", err)
		return
	}
	for i := range texts {
		if !slices.Equal(plain[i], sluiceIDs[i]) {
			t.Errorf("%q:\nllama.cpp %v\nsluice    %v", texts[i], plain[i], sluiceIDs[i])
		}
	}
	if !slices.Equal(llamaEOG, eog) {
		t.Errorf("EOG: llama.cpp %v, sluice %v", llamaEOG, eog)
	}
}
