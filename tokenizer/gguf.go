package tokenizer

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/format/gguf"
)

// The GGUF tokenizer keys (llama.cpp gguf-py constants).
const (
	keyModel          = "tokenizer.ggml.model"
	keyPre            = "tokenizer.ggml.pre"
	keyTokens         = "tokenizer.ggml.tokens"
	keyScores         = "tokenizer.ggml.scores"
	keyTokenType      = "tokenizer.ggml.token_type"
	keyMerges         = "tokenizer.ggml.merges"
	keyBOS            = "tokenizer.ggml.bos_token_id"
	keyEOS            = "tokenizer.ggml.eos_token_id"
	keyUnk            = "tokenizer.ggml.unknown_token_id"
	keyAddBOS         = "tokenizer.ggml.add_bos_token"
	keyAddEOS         = "tokenizer.ggml.add_eos_token"
	keyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
)

// FromGGUF builds the tokenizer stored in a GGUF file's metadata:
// tokenizer.ggml.model "llama" gives an *SPM, "gpt2" an *BPE, "gemma4" an
// SentencePiece-style *BPE with pre-tokenizer "gemma4" whatever
// tokenizer.ggml.pre says (as llama.cpp reads it). Other models,
// and byte-level BPE pre-tokenizers (tokenizer.ggml.pre) not listed by
// PreTokenizers, are ErrUnsupported (the error names the value and lists the
// known ones; FromGGUFOptions can force one); no tokenizer.ggml.pre means
// llama.cpp's "default". A missing or mistyped required key is ErrMissingKey;
// every error names f.Path and the key. As llama.cpp does, tokens whose text
// marks an end of turn, a FIM role or an end of generation become control
// tokens, and the EOG set (EOGer) is derived from those texts, EOS and the
// eot/eom/fim_* token id keys.
//
// Required: model and tokens, plus scores for "llama" and merges for "gpt2"
// (but for pre-tokenizer "kimi-k2", as in llama.cpp).
// Optional: token_type (default: inferred from the special ids and, for
// "llama", "<0xXX>" pieces), bos/eos/unknown_token_id (defaults 1/2/0 for
// "llama" as in SentencePiece, none for "gpt2"; 0xFFFFFFFF means none),
// add_bos_token (default true for "llama" and Llama 3 style "gpt2", false
// for other "gpt2"), add_eos_token
// (default false) and add_space_prefix (default true).
func FromGGUF(f *gguf.File) (Tokenizer, error) { return FromGGUFOptions(f, GGUFOptions{}) }

// GGUFOptions adjusts how FromGGUFOptions reads a vocabulary.
type GGUFOptions struct {
	// Pre, when set, replaces the file's tokenizer.ggml.pre (for a file
	// whose value sluice does not know, or whose value is wrong). It must be
	// a name PreTokenizers lists; it has no effect on SentencePiece
	// vocabularies.
	Pre string
}

// FromGGUFOptions is FromGGUF with options.
func FromGGUFOptions(f *gguf.File, o GGUFOptions) (Tokenizer, error) {
	if f == nil {
		return nil, fmt.Errorf("tokenizer: FromGGUF: nil file: %w", ErrMissingKey)
	}
	m := ggufMeta{f: f, name: f.Path}
	model, err := m.str(keyModel)
	if err != nil {
		return nil, err
	}
	if model != "llama" && model != "gpt2" && model != "gemma4" {
		return nil, fmt.Errorf("tokenizer: %s: %s is %q; supported are \"llama\" (SentencePiece), \"gpt2\" (byte-level BPE) and \"gemma4\" (SentencePiece-style BPE): %w", m.name, keyModel, model, ErrUnsupported)
	}
	tokens, err := m.strs(keyTokens)
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	if n == 0 {
		return nil, fmt.Errorf("tokenizer: %s: %s is empty: %w", m.name, keyTokens, ErrFormat)
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: %s: %s has %d entries, more than int32 ids can address: %w", m.name, keyTokens, n, ErrFormat)
	}
	spm := model == "llama"
	defBOS, defEOS, defUnk := int32(-1), int32(-1), int32(-1)
	if spm {
		defBOS, defEOS, defUnk = 1, 2, 0
	}
	bos, err := m.id(keyBOS, defBOS, n)
	if err != nil {
		return nil, err
	}
	eos, err := m.id(keyEOS, defEOS, n)
	if err != nil {
		return nil, err
	}
	unk, err := m.id(keyUnk, defUnk, n)
	if err != nil {
		return nil, err
	}
	types, err := m.types(n)
	if err != nil {
		return nil, err
	}
	if types == nil {
		types = inferTypes(tokens, bos, eos, unk, spm)
	}
	// The end-of-generation set, and llama.cpp's rule that a token it finds
	// by text as end-of-turn, FIM or EOG is a control token.
	eog, makeControl := eogSet(tokens, types, eos, eogKeyIDs(m, n))
	if len(makeControl) > 0 {
		types = slices.Clone(types)
		for _, id := range makeControl {
			types[id] = TypeControl
		}
	}
	pre := o.Pre
	if model == "gemma4" {
		pre = "gemma4"
	} else if pre == "" {
		if _, present := f.Get(keyPre); present {
			if pre, err = m.str(keyPre); err != nil {
				return nil, err
			}
		}
	} else if _, ok := lookupPre(pre); !ok {
		return nil, fmt.Errorf("tokenizer: %s: forced %w", m.name, unknownPre(pre))
	}
	var preTok *preTokenizer
	if !spm {
		var ok bool
		if preTok, ok = lookupPre(pre); !ok {
			return nil, fmt.Errorf("tokenizer: %s: %w", m.name, unknownPre(pre))
		}
		if preTok.noBOS && !present(f, keyBOS) {
			bos = -1
		}
	}
	addBOS, err := m.boolean(keyAddBOS, spm || preTok.addBOS)
	if err != nil {
		return nil, err
	}
	addEOS, err := m.boolean(keyAddEOS, false)
	if err != nil {
		return nil, err
	}

	var t Tokenizer
	if spm {
		scores, ok := f.Float32s(keyScores)
		if err := m.need(keyScores, ok, "float32 array"); err != nil {
			return nil, err
		}
		if len(scores) != n {
			return nil, fmt.Errorf("tokenizer: %s: %s has %d entries but %s has %d: %w", m.name, keyScores, len(scores), keyTokens, n, ErrFormat)
		}
		prefix, err := m.boolean(keyAddSpacePrefix, true)
		if err != nil {
			return nil, err
		}
		t, err = NewSPM(SPMOptions{
			Pieces: tokens, Scores: scores, Types: types,
			BOS: bos, EOS: eos, Unk: unk,
			EscapeSpaces: true, NoSpacePrefix: !prefix,
			AddBOS: addBOS, AddEOS: addEOS,
		})
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", m.name, err)
		}
		t.(*SPM).vocab.eog = eog
		return t, nil
	}

	var merges []string
	if _, ok := f.Get(keyMerges); ok || preTok.name != "kimi-k2" { // llama.cpp reads Kimi K2 without merges
		if merges, err = m.strs(keyMerges); err != nil {
			return nil, err
		}
	}
	t, err = NewBPE(BPEOptions{
		Pieces: tokens, Types: types, Merges: merges, Pre: pre,
		BOS: bos, EOS: eos, Unk: unk,
		AddBOS: addBOS, AddEOS: addEOS,
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s: %w", m.name, keyMerges, err)
	}
	t.(*BPE).vocab.eog = eog
	return t, nil
}

func present(f *gguf.File, key string) bool {
	_, ok := f.Get(key)
	return ok
}

// ggufMeta reads tokenizer keys with errors that name the file and key.
type ggufMeta struct {
	f    *gguf.File
	name string
}

// need turns a failed typed lookup into an error saying whether the key is
// absent or has another type.
func (m ggufMeta) need(key string, ok bool, want string) error {
	if ok {
		return nil
	}
	if v, present := m.f.Get(key); present {
		return fmt.Errorf("tokenizer: %s: key %s holds %T, expected %s: %w", m.name, key, v, want, ErrMissingKey)
	}
	return fmt.Errorf("tokenizer: %s: missing key %s (%s): %w", m.name, key, want, ErrMissingKey)
}

func (m ggufMeta) str(key string) (string, error) {
	s, ok := m.f.String(key)
	return s, m.need(key, ok, "string")
}

func (m ggufMeta) strs(key string) ([]string, error) {
	s, ok := m.f.Strings(key)
	return s, m.need(key, ok, "string array")
}

// boolean reads an optional bool.
func (m ggufMeta) boolean(key string, def bool) (bool, error) {
	if _, present := m.f.Get(key); !present {
		return def, nil
	}
	b, ok := m.f.Bool(key)
	return b, m.need(key, ok, "bool")
}

// id reads an optional token id; -1, 0xFFFFFFFF and 0xFFFFFFFFFFFFFFFF mean
// "none" (converters write all three).
func (m ggufMeta) id(key string, def int32, n int) (int32, error) {
	if _, present := m.f.Get(key); !present {
		if int(def) >= n {
			def = -1
		}
		return def, nil
	}
	if i, ok := m.f.Int(key); ok && (i == -1 || i == math.MaxUint32) {
		return -1, nil
	}
	u, ok := m.f.Uint(key)
	if err := m.need(key, ok, "non-negative integer"); err != nil {
		return 0, err
	}
	if u == math.MaxUint64 {
		return -1, nil
	}
	if u >= uint64(n) {
		return 0, fmt.Errorf("tokenizer: %s: %s is %d, outside the %d-token vocabulary: %w", m.name, key, u, n, ErrFormat)
	}
	return int32(u), nil
}

// types reads the optional token_type array (nil when absent).
func (m ggufMeta) types(n int) ([]TokenType, error) {
	if _, present := m.f.Get(keyTokenType); !present {
		return nil, nil
	}
	raw, ok := m.f.Int32s(keyTokenType)
	if err := m.need(keyTokenType, ok, "int32 array"); err != nil {
		return nil, err
	}
	if len(raw) != n {
		return nil, fmt.Errorf("tokenizer: %s: %s has %d entries but %s has %d: %w", m.name, keyTokenType, len(raw), keyTokens, n, ErrFormat)
	}
	types := make([]TokenType, n)
	for i, r := range raw {
		if r < int32(TypeUndefined) || r > int32(TypeByte) {
			return nil, fmt.Errorf("tokenizer: %s: %s[%d] is %d, expected 0..6: %w", m.name, keyTokenType, i, r, ErrFormat)
		}
		types[i] = TokenType(r)
	}
	return types, nil
}
