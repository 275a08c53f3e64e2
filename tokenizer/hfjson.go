package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/sluicehq/sluice/format/gguf"
)

// Hugging Face tokenizer.json (the tokenizers library's serialization), for
// safetensors model directories. Two shapes of BPE model are read:
//
//   - byte-level BPE (GPT-2, Llama 3, Qwen2, SmolLM …): a ByteLevel
//     pre-tokenizer or decoder. It becomes a GGUF "gpt2" vocabulary whose
//     tokenizer.ggml.pre is recognised from the pre-tokenizer (see hfPre);
//   - SentencePiece-style BPE with byte_fallback (Llama 1/2, Mistral,
//     TinyLlama): "▁" for spaces and "<0xXX>" byte pieces. It becomes a GGUF
//     "llama" vocabulary; each piece's score is minus the rank of the merge
//     that makes it, so llama.cpp's (and sluice's) score-driven SentencePiece
//     merging applies the merges in their order.
//
// tokenizer_config.json, when present beside it, gives the BOS and EOS
// tokens, add_bos_token/add_eos_token and the chat template.

// HF tokenizer file names in a model directory.
const (
	HFTokenizerFile       = "tokenizer.json"
	HFTokenizerConfigFile = "tokenizer_config.json"
)

// HFVocab is a tokenizer.json vocabulary in GGUF's representation.
type HFVocab struct {
	Model  string // tokenizer.ggml.model: "gpt2" (byte-level) or "llama" (SentencePiece-style)
	Pre    string // tokenizer.ggml.pre of a "gpt2" vocabulary
	Tokens []string
	Scores []float32 // "llama" only
	Types  []int32   // TokenType values
	Merges []string  // "gpt2" only: "a b", highest priority first
	// BOS, EOS and Unk are ids or -1.
	BOS, EOS, Unk                  int32
	AddBOS, AddEOS, AddSpacePrefix bool
	ChatTemplate                   string
}

// Len is the number of tokens.
func (v HFVocab) Len() int { return len(v.Tokens) }

// GGUF returns v's tokenizer.ggml.* (and tokenizer.chat_template) metadata.
func (v HFVocab) GGUF() []gguf.KV {
	kvs := []gguf.KV{{Key: keyModel, Value: v.Model}}
	if v.Model == "gpt2" {
		kvs = append(kvs, gguf.KV{Key: keyPre, Value: v.Pre})
	}
	kvs = append(kvs, gguf.KV{Key: keyTokens, Value: v.Tokens})
	if v.Model == "llama" {
		kvs = append(kvs, gguf.KV{Key: keyScores, Value: v.Scores})
	}
	kvs = append(kvs, gguf.KV{Key: keyTokenType, Value: v.Types})
	if v.Model == "gpt2" {
		kvs = append(kvs, gguf.KV{Key: keyMerges, Value: v.Merges})
	}
	for _, s := range []struct {
		key string
		id  int32
	}{{keyBOS, v.BOS}, {keyEOS, v.EOS}, {keyUnk, v.Unk}} {
		if s.id >= 0 {
			kvs = append(kvs, gguf.KV{Key: s.key, Value: uint32(s.id)})
		}
	}
	kvs = append(kvs,
		gguf.KV{Key: keyAddBOS, Value: v.AddBOS},
		gguf.KV{Key: keyAddEOS, Value: v.AddEOS},
	)
	if v.Model == "llama" {
		kvs = append(kvs, gguf.KV{Key: keyAddSpacePrefix, Value: v.AddSpacePrefix})
	}
	if v.ChatTemplate != "" {
		kvs = append(kvs, gguf.KV{Key: "tokenizer.chat_template", Value: v.ChatTemplate})
	}
	return kvs
}

// LoadHFTokenizer reads dir's tokenizer.json and, when present,
// tokenizer_config.json (see ParseHFTokenizer).
func LoadHFTokenizer(dir string, o HFOptions) (HFVocab, error) {
	path := filepath.Join(dir, HFTokenizerFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return HFVocab{}, fmt.Errorf("tokenizer: %w", err)
	}
	cfgPath := filepath.Join(dir, HFTokenizerConfigFile)
	cfg, err := os.ReadFile(cfgPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return HFVocab{}, fmt.Errorf("tokenizer: %w", err)
	}
	return ParseHFTokenizer(data, path, cfg, cfgPath, o)
}

// HFOptions adjusts ParseHFTokenizer.
type HFOptions struct {
	// VocabSize, when larger than the tokenizer's, pads the vocabulary with
	// unused "[PAD<id>]" tokens to the model's size (as llama.cpp's
	// converter does); a tokenizer larger than it is an error. 0: no check.
	VocabSize int
	// Pre forces tokenizer.ggml.pre for a byte-level vocabulary whose
	// pre-tokenizer is not recognised.
	Pre string
}

type hfComponent struct {
	Type             string        `json:"type"`
	Pretokenizers    []hfComponent `json:"pretokenizers"`
	Normalizers      []hfComponent `json:"normalizers"`
	Decoders         []hfComponent `json:"decoders"`
	Pattern          hfPattern     `json:"pattern"`
	Content          string        `json:"content"`
	Prepend          string        `json:"prepend"`
	UseRegex         *bool         `json:"use_regex"`
	IndividualDigits bool          `json:"individual_digits"`
	PrependScheme    string        `json:"prepend_scheme"`
	AddPrefixSpace   *bool         `json:"add_prefix_space"`
	Behavior         string        `json:"behavior"`
}

type hfPattern struct {
	Regex  string `json:"Regex"`
	String string `json:"String"`
}

type hfAdded struct {
	ID      int    `json:"id"`
	Content string `json:"content"`
	Special bool   `json:"special"`
}

type hfFile struct {
	AddedTokens  []hfAdded    `json:"added_tokens"`
	Normalizer   *hfComponent `json:"normalizer"`
	PreTokenizer *hfComponent `json:"pre_tokenizer"`
	Decoder      *hfComponent `json:"decoder"`
	Model        struct {
		Type         string          `json:"type"`
		RawVocab     json.RawMessage `json:"vocab"`
		Vocab        map[string]int  `json:"-"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		UnkToken     *string         `json:"unk_token"`
	} `json:"model"`
}

// walk calls f on c and every component nested in it.
func (c *hfComponent) walk(f func(*hfComponent)) {
	if c == nil {
		return
	}
	f(c)
	for _, l := range [][]hfComponent{c.Pretokenizers, c.Normalizers, c.Decoders} {
		for i := range l {
			l[i].walk(f)
		}
	}
}

// hfPatterns maps the Split patterns of common tokenizer.json files (as HF
// writes them) to the tokenizer.ggml.pre value llama.cpp's converter gives
// those models.
var hfPatterns = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      "qwen2",
	patLlama3: "llama-bpe",
	patQwen2:  "qwen2",
}

// hfPre recognises a byte-level pre-tokenizer: GPT-2's (a ByteLevel with its
// regex), Llama 3's or Qwen2's Split pattern before a ByteLevel, or digits
// split one by one before a ByteLevel (SmolLM, StarCoder).
func hfPre(pt *hfComponent) (string, error) {
	if pt == nil {
		return "", fmt.Errorf("no pre_tokenizer")
	}
	var splits []string
	digits, byteRegex := false, false
	pt.walk(func(c *hfComponent) {
		switch c.Type {
		case "Split":
			splits = append(splits, c.Pattern.Regex+c.Pattern.String)
		case "Digits":
			digits = c.IndividualDigits
		case "ByteLevel":
			byteRegex = c.UseRegex == nil || *c.UseRegex
		}
	})
	switch {
	case len(splits) == 1 && !digits && !byteRegex:
		if name, ok := hfPatterns[splits[0]]; ok {
			return name, nil
		}
		return "", fmt.Errorf("Split pattern %q", splits[0])
	case len(splits) == 0 && digits && byteRegex:
		return "smollm", nil
	case len(splits) == 0 && !digits && byteRegex:
		return "gpt-2", nil
	}
	b, _ := json.Marshal(pt)
	return "", fmt.Errorf("pre_tokenizer %s", b)
}

// ParseHFTokenizer converts a tokenizer.json (data, named path in errors)
// and optionally its tokenizer_config.json (cfg, named cfgPath; nil when
// absent) to GGUF's representation. Models other than BPE, and BPE models
// that are neither byte-level nor byte_fallback, are ErrUnsupported; a
// byte-level pre-tokenizer it does not recognise is ErrUnsupported naming it
// unless HFOptions.Pre forces one; malformed files are ErrFormat.
func ParseHFTokenizer(data []byte, path string, cfg []byte, cfgPath string, o HFOptions) (HFVocab, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return HFVocab{}, fmt.Errorf("tokenizer: %s: %v: %w", path, err, ErrFormat)
	}
	if f.Model.Type != "BPE" {
		return HFVocab{}, fmt.Errorf("tokenizer: %s: model.type %q: only BPE models are read: %w", path, f.Model.Type, ErrUnsupported)
	}
	if err := json.Unmarshal(f.Model.RawVocab, &f.Model.Vocab); err != nil {
		return HFVocab{}, fmt.Errorf("tokenizer: %s: model.vocab: want an object of token ids: %w", path, ErrFormat)
	}
	byteLevel := false
	for _, c := range []*hfComponent{f.PreTokenizer, f.Decoder} {
		c.walk(func(c *hfComponent) { byteLevel = byteLevel || c.Type == "ByteLevel" })
	}
	if !byteLevel && !f.Model.ByteFallback {
		return HFVocab{}, fmt.Errorf("tokenizer: %s: a BPE model with neither a ByteLevel pre-tokenizer nor byte_fallback: %w", path, ErrUnsupported)
	}
	v := HFVocab{Model: "llama", BOS: -1, EOS: -1, Unk: -1}
	if byteLevel {
		v.Model = "gpt2"
	}

	// Tokens by id: the model's vocabulary and the added tokens.
	n := 0
	for tok, id := range f.Model.Vocab {
		if id < 0 || id >= 1<<24 {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: model.vocab[%q] is %d: %w", path, tok, id, ErrFormat)
		}
		n = max(n, id+1)
	}
	for i, a := range f.AddedTokens {
		if a.ID < 0 || a.ID >= 1<<24 || a.Content == "" {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: added_tokens[%d]: id %d, content %q: %w", path, i, a.ID, a.Content, ErrFormat)
		}
		n = max(n, a.ID+1)
	}
	if o.VocabSize > 0 {
		if n > o.VocabSize {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: %d tokens, more than the model's vocabulary of %d: %w", path, n, o.VocabSize, ErrVocabMismatch)
		}
		n = o.VocabSize
	}
	if n == 0 {
		return HFVocab{}, fmt.Errorf("tokenizer: %s: model.vocab is empty: %w", path, ErrFormat)
	}
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	set := make([]bool, n)
	for tok, id := range f.Model.Vocab {
		if set[id] {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: model.vocab has two tokens with id %d (%q, %q): %w", path, id, v.Tokens[id], tok, ErrFormat)
		}
		v.Tokens[id], set[id] = tok, true
		v.Types[id] = int32(TypeNormal)
		if v.Model == "llama" {
			if _, ok := parseBytePiece(tok); ok {
				v.Types[id] = int32(TypeByte)
			}
		}
	}
	for _, a := range f.AddedTokens {
		v.Tokens[a.ID], set[a.ID] = a.Content, true
		v.Types[a.ID] = int32(TypeUserDefined)
		if a.Special {
			v.Types[a.ID] = int32(TypeControl)
		}
	}
	for id := range v.Tokens {
		if !set[id] {
			v.Tokens[id] = fmt.Sprintf("[PAD%d]", id)
			v.Types[id] = int32(TypeUnused)
		}
	}
	if f.Model.UnkToken != nil {
		if id := slices.Index(v.Tokens, *f.Model.UnkToken); id >= 0 {
			v.Unk = int32(id)
			v.Types[id] = int32(TypeUnknown)
		}
	}

	// Merges: "a b" strings, or [a, b] pairs (tokenizers ≥ 0.20).
	var merges []string
	if len(f.Model.Merges) > 0 && string(f.Model.Merges) != "null" {
		if err := json.Unmarshal(f.Model.Merges, &merges); err != nil {
			var pairs [][]string
			if err2 := json.Unmarshal(f.Model.Merges, &pairs); err2 != nil {
				return HFVocab{}, fmt.Errorf("tokenizer: %s: model.merges: want strings or pairs of strings: %w", path, ErrFormat)
			}
			merges = make([]string, len(pairs))
			for i, p := range pairs {
				if len(p) != 2 {
					return HFVocab{}, fmt.Errorf("tokenizer: %s: model.merges[%d] has %d parts, want 2: %w", path, i, len(p), ErrFormat)
				}
				if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
					return HFVocab{}, fmt.Errorf("tokenizer: %s: model.merges[%d] %q: a part with a space cannot be written as a GGUF merge: %w", path, i, p, ErrUnsupported)
				}
				merges[i] = p[0] + " " + p[1]
			}
		}
	}
	for i, m := range merges {
		if len(m) < 3 || strings.IndexByte(m[1:], ' ') < 0 {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: model.merges[%d] %q: expected two parts separated by a space: %w", path, i, m, ErrFormat)
		}
	}

	if v.Model == "gpt2" {
		v.Merges = merges
		v.Pre = o.Pre
		if v.Pre == "" {
			pre, err := hfPre(f.PreTokenizer)
			if err != nil {
				return HFVocab{}, fmt.Errorf("tokenizer: %s: byte-level pre-tokenizer not recognised (%v); name one with --tokenizer-pre: %w", path, err, ErrUnsupported)
			}
			v.Pre = pre
		}
		if _, ok := lookupPre(v.Pre); !ok {
			return HFVocab{}, fmt.Errorf("tokenizer: %s: %w", path, unknownPre(v.Pre))
		}
	} else {
		// Scores: minus the rank of the first merge that makes each piece;
		// pieces no merge makes score below every merge.
		v.Scores = make([]float32, n)
		rank := map[string]int{}
		for i, m := range merges {
			k := strings.IndexByte(m[1:], ' ') + 1
			if _, ok := rank[m[:k]+m[k+1:]]; !ok {
				rank[m[:k]+m[k+1:]] = i
			}
		}
		for id, tok := range v.Tokens {
			if r, ok := rank[tok]; ok {
				v.Scores[id] = -float32(r)
			} else if utf8.RuneCountInString(tok) > 1 && v.Types[id] == int32(TypeNormal) {
				v.Scores[id] = -float32(len(merges) + 1)
			}
		}
		f.Normalizer.walk(func(c *hfComponent) {
			if c.Type == "Prepend" && c.Prepend == "▁" {
				v.AddSpacePrefix = true
			}
		})
		f.PreTokenizer.walk(func(c *hfComponent) {
			if c.Type == "Metaspace" && c.PrependScheme != "never" && (c.AddPrefixSpace == nil || *c.AddPrefixSpace) {
				v.AddSpacePrefix = true
			}
		})
	}
	if err := v.readConfig(cfg, cfgPath); err != nil {
		return HFVocab{}, err
	}
	return v, nil
}

// readConfig applies tokenizer_config.json: bos_token, eos_token (a string
// or {"content": …}), add_bos_token, add_eos_token, chat_template. Without
// it a "llama" vocabulary takes <s> and </s> and adds BOS, as Llama's does.
func (v *HFVocab) readConfig(cfg []byte, path string) error {
	id := func(text string) int32 { return int32(slices.Index(v.Tokens, text)) }
	if cfg == nil {
		if v.Model == "llama" {
			v.BOS, v.EOS, v.AddBOS = id("<s>"), id("</s>"), true
		}
		return nil
	}
	var c struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		AddEOS       *bool           `json:"add_eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return fmt.Errorf("tokenizer: %s: %v: %w", path, err, ErrFormat)
	}
	token := func(key string, raw json.RawMessage) (int32, error) {
		if len(raw) == 0 || string(raw) == "null" {
			return -1, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			var obj struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(raw, &obj); err != nil {
				return -1, fmt.Errorf("tokenizer: %s: %s: want a string or {\"content\": …}: %w", path, key, ErrFormat)
			}
			s = obj.Content
		}
		i := id(s)
		if i < 0 {
			return -1, fmt.Errorf("tokenizer: %s: %s %q is no token of tokenizer.json: %w", path, key, s, ErrFormat)
		}
		return i, nil
	}
	var err error
	if v.BOS, err = token("bos_token", c.BOS); err != nil {
		return err
	}
	if v.EOS, err = token("eos_token", c.EOS); err != nil {
		return err
	}
	v.AddBOS = v.BOS >= 0 && (c.AddBOS == nil && v.Model == "llama" || c.AddBOS != nil && *c.AddBOS)
	v.AddEOS = v.EOS >= 0 && c.AddEOS != nil && *c.AddEOS
	if len(c.ChatTemplate) > 0 && string(c.ChatTemplate) != "null" {
		if err := json.Unmarshal(c.ChatTemplate, &v.ChatTemplate); err != nil {
			// a list of named templates: take "default"
			var named []struct {
				Name     string `json:"name"`
				Template string `json:"template"`
			}
			if err := json.Unmarshal(c.ChatTemplate, &named); err != nil {
				return fmt.Errorf("tokenizer: %s: chat_template: want a string or a list of {name, template}: %w", path, ErrFormat)
			}
			for _, t := range named {
				if t.Name == "default" {
					v.ChatTemplate = t.Template
				}
			}
		}
	}
	return nil
}
