// Package tokenizer turns text into token ids and back for the two tokenizer
// families llama-style models use:
//
//   - SentencePiece BPE (Kind SPM): Llama 1/2, TinyLlama, Mistral, Phi-3 and
//     karpathy's llama2.c tokenizer.bin files. Text gets a dummy-prefix space,
//     spaces become "▁" (GGUF vocabularies) and the adjacent pair whose merged
//     piece has the highest score is merged until none is left; characters that
//     are no piece fall back to the "<0xXX>" byte pieces.
//   - Byte-level BPE (Kind BPE): GPT-2, Llama 3, Qwen2, SmolLM, DeepSeek …
//     Text is split by the pre-tokenizer its tokenizer.ggml.pre names (a
//     table of llama.cpp's pattern sequences, pretable.go), each byte is
//     mapped to a printable rune and pairs are merged in the order of the
//     merges list. The SentencePiece-style names (gemma4, sarvam-moe) keep
//     raw UTF-8 instead: spaces become "▁", characters are merged, and what
//     no piece covers falls back to "<0xXX>" byte pieces.
//
// Both reproduce llama.cpp's tokenizers (llm_tokenizer_spm, llm_tokenizer_bpe)
// token for token on llama.cpp's own test vectors and, for every
// tokenizer.ggml.pre value, on ids llama.cpp produced (testdata/), and
// llama2.c's run.c for its tokenizer.bin files. Encode never fails: what no
// piece covers goes through byte fallback, or the unknown token when there
// is no byte piece. (Unlike llama.cpp, which reads invalid UTF-8 as U+FFFD,
// byte-level BPE keeps invalid bytes as they are, so it stays lossless.)
//
// Vocabularies come from GGUF metadata, llama2.c tokenizer.bin files, and
// Hugging Face tokenizer.json files (ParseHFTokenizer, to GGUF's
// representation). End-of-generation sets (EOG) are derived as llama.cpp
// derives them.
//
// A Tokenizer is immutable after loading and safe for concurrent use.
package tokenizer

import (
	"errors"
	"fmt"
)

// Kind names a tokenizer algorithm.
type Kind uint8

const (
	// KindSPM is SentencePiece BPE (tokenizer.ggml.model "llama").
	KindSPM Kind = iota + 1
	// KindBPE is GPT-2 byte-level BPE (tokenizer.ggml.model "gpt2").
	KindBPE
)

func (k Kind) String() string {
	switch k {
	case KindSPM:
		return "spm"
	case KindBPE:
		return "bpe"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Tokenizer encodes text to token ids and decodes ids to text.
type Tokenizer interface {
	// Encode tokenizes text. It never fails: bytes no piece covers go through
	// byte fallback ("<0xXX>" pieces) or become the unknown token.
	Encode(text string, o EncodeOptions) []int32
	// Decode concatenates the text of ids: "▁" becomes a space, byte pieces
	// their byte, byte-level BPE runes their bytes; control and unused tokens
	// give "", unknown and user-defined tokens their raw text (as run.c
	// prints "<unk>"), ids out of range nothing.
	// For SentencePiece the dummy-prefix space Encode adds is removed again:
	// the leading space of the first piece, or of the first piece after a BOS.
	Decode(ids []int32) string
	// Piece returns the text for token id as llama2.c's run.c prints it while
	// streaming: after BOS (prev == BOS) a leading space is dropped; "<0xXX>"
	// pieces become that raw byte (possibly half a UTF-8 sequence). Control
	// tokens (BOS/EOS) give "". Out-of-range ids give "".
	Piece(prev, id int32) string
	VocabSize() int
	BOS() int32 // -1 if none
	EOS() int32 // -1 if none
	// Token returns the raw vocabulary entry of id ("" when out of range).
	Token(id int32) string
}

// EncodeOptions controls Encode.
type EncodeOptions struct {
	BOS bool // prepend the BOS token (when the vocabulary has one)
	EOS bool // append the EOS token (when the vocabulary has one)
	// ParseSpecial lets the text of control tokens ("<s>", "<|endoftext|>")
	// in the input become those tokens. User-defined tokens are always
	// matched as whole units, as llama.cpp and HF tokenizers do.
	ParseSpecial bool
}

// TokenType is the GGUF tokenizer.ggml.token_type of a vocabulary entry.
type TokenType int32

// The GGUF token types (llama.cpp llama_token_type).
const (
	TypeUndefined   TokenType = 0 // treated like TypeNormal
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

var typeNames = [...]string{"undefined", "normal", "unknown", "control", "user-defined", "unused", "byte"}

func (t TokenType) String() string {
	if t >= 0 && int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("TokenType(%d)", int32(t))
}

// Sentinel errors. Every error returned by this package wraps exactly one.
var (
	// ErrFormat: a tokenizer file is malformed or truncated.
	ErrFormat = errors.New("tokenizer: malformed file")
	// ErrVocabMismatch: the tokenizer's piece count differs from the model's vocabulary size.
	ErrVocabMismatch = errors.New("tokenizer: vocabulary size mismatch")
	// ErrMissingKey: a required GGUF metadata key is absent or has the wrong type.
	ErrMissingKey = errors.New("tokenizer: missing key")
	// ErrUnsupported: a well-formed vocabulary of a kind this package does not implement.
	ErrUnsupported = errors.New("tokenizer: unsupported")
)
