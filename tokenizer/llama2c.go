package tokenizer

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/sluicehq/sluice/format/gguf"
)

// maxLlama2CTokenLength bounds the header's max_token_length (real files have
// 7 to 48), so a corrupt header cannot make the reader allocate gigabytes
// before it reaches the end of the file.
const maxLlama2CTokenLength = 1 << 16

// LoadLlama2C reads a llama2.c tokenizer.bin (see ReadLlama2C) from path.
func LoadLlama2C(path string, vocabSize int) (*SPM, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer fh.Close()
	return ReadLlama2C(bufio.NewReader(fh), path, vocabSize)
}

// ReadLlama2C reads a llama2.c tokenizer.bin from r; name identifies it in
// errors. The file is
//
//	i32 max_token_length
//	per piece: f32 score | i32 length | length bytes
//
// all little-endian, with no piece count: run.c reads as many pieces as the
// model's vocabulary has. ReadLlama2C therefore requires exactly vocabSize
// pieces and reports how many the file really has when that differs (a
// vocabSize <= 0 accepts any non-zero count). Every piece length must lie in
// [0, max_token_length].
//
// The vocabulary is typed the way run.c uses it: id 0 "<unk>" is the unknown
// token, ids 1 and 2 (pieces "\n<s>\n" and "\n</s>\n") are BOS and EOS,
// "<0xXX>" pieces are byte-fallback pieces, everything else is normal. Pieces
// hold plain spaces, so Encode does not escape ' ' to "▁".
func ReadLlama2C(r io.Reader, name string, vocabSize int) (*SPM, error) {
	pieces, scores, err := readLlama2C(r, name, vocabSize)
	if err != nil {
		return nil, err
	}
	n := len(pieces)
	bos, eos, unk := int32(-1), int32(-1), int32(-1)
	if n > 2 {
		bos, eos = 1, 2
	}
	if pieces[0] == "<unk>" {
		unk = 0
	}
	tok, err := NewSPM(SPMOptions{
		Pieces: pieces,
		Scores: scores,
		Types:  inferTypes(pieces, bos, eos, unk, true),
		BOS:    bos,
		EOS:    eos,
		Unk:    unk,
		AddBOS: true,
	})
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", name, err)
	}
	return tok, nil
}

// readLlama2C reads the pieces and scores of a tokenizer.bin, as they are
// stored; see ReadLlama2C for the format and vocabSize.
func readLlama2C(r io.Reader, name string, vocabSize int) ([]string, []float32, error) {
	d := &l2cReader{r: r, name: name}
	var hdr [4]byte
	if err := d.full(hdr[:], "max_token_length (i32)"); err != nil {
		return nil, nil, err
	}
	maxLen := int32(binary.LittleEndian.Uint32(hdr[:]))
	if maxLen < 0 || maxLen > maxLlama2CTokenLength {
		return nil, nil, fmt.Errorf("tokenizer: %s: offset 0: max_token_length %d outside [0, %d]: %w", name, maxLen, maxLlama2CTokenLength, ErrFormat)
	}
	capacity := vocabSize
	if capacity <= 0 || capacity > 1<<16 {
		capacity = 1 << 10
	}
	pieces := make([]string, 0, capacity)
	scores := make([]float32, 0, capacity)
	for vocabSize <= 0 || len(pieces) < vocabSize {
		p, score, err := d.piece(len(pieces), maxLen)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		pieces = append(pieces, p)
		scores = append(scores, score)
	}
	n := len(pieces)
	if vocabSize > 0 && n == vocabSize {
		// Count what is left, so the error says how big the file really is.
		for {
			_, _, err := d.piece(n, maxLen)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			n++
		}
	}
	if vocabSize > 0 && n != vocabSize {
		return nil, nil, fmt.Errorf("tokenizer: %s has %d pieces but the model's vocabulary is %d: %w", name, n, vocabSize, ErrVocabMismatch)
	}
	if n == 0 {
		return nil, nil, fmt.Errorf("tokenizer: %s: offset %d: no pieces after the header: %w", name, d.off, ErrFormat)
	}
	return pieces, scores, nil
}

// Vocab is a SentencePiece vocabulary in GGUF's representation
// (tokenizer.ggml.tokens, scores and token_type): spaces inside pieces are
// "▁", id 0 is <unk>, 1 is <s> (BOS), 2 is </s> (EOS).
type Vocab struct {
	Tokens []string
	Scores []float32
	Types  []int32 // TokenType values: 1 normal, 2 unknown, 3 control, 6 byte
}

// Len is the number of tokens.
func (v Vocab) Len() int { return len(v.Tokens) }

// GGUF returns the tokenizer.ggml.* metadata of v as a Llama SentencePiece
// vocabulary: model "llama", unknown id 0, BOS 1, EOS 2, BOS added and EOS
// not, as llama.cpp's converter writes a Llama 2 vocabulary.
func (v Vocab) GGUF() []gguf.KV {
	return []gguf.KV{
		{Key: keyModel, Value: "llama"},
		{Key: keyTokens, Value: v.Tokens},
		{Key: keyScores, Value: v.Scores},
		{Key: keyTokenType, Value: v.Types},
		{Key: keyBOS, Value: uint32(1)},
		{Key: keyEOS, Value: uint32(2)},
		{Key: keyUnk, Value: uint32(0)},
		{Key: keyAddBOS, Value: true},
		{Key: keyAddEOS, Value: false},
	}
}

// LoadLlama2CVocab reads a llama2.c tokenizer.bin from path (see
// ReadLlama2CVocab).
func LoadLlama2CVocab(path string) (Vocab, error) {
	fh, err := os.Open(path)
	if err != nil {
		return Vocab{}, fmt.Errorf("tokenizer: %w", err)
	}
	defer fh.Close()
	return ReadLlama2CVocab(bufio.NewReader(fh), path)
}

// ReadLlama2CVocab reads a llama2.c tokenizer.bin of any number of pieces
// (the format is ReadLlama2C's) and converts it to GGUF's representation, as
// llama.cpp's own vocabulary of the same model has it: plain spaces become
// "▁", ids 1 and 2 (stored as "\n<s>\n" and "\n</s>\n") become "<s>" and "</s>"
// of type control, id 0 is the unknown token, "<0xXX>" pieces are byte
// tokens and the rest are normal. name identifies r in errors.
func ReadLlama2CVocab(r io.Reader, name string) (Vocab, error) {
	pieces, scores, err := readLlama2C(r, name, 0)
	if err != nil {
		return Vocab{}, err
	}
	v := Vocab{Tokens: make([]string, len(pieces)), Scores: scores, Types: make([]int32, len(pieces))}
	for id, p := range pieces {
		typ := TypeNormal
		switch _, isByte := parseBytePiece(p); {
		case id == 0:
			typ = TypeUnknown
		case id == 1:
			p, typ = "<s>", TypeControl
		case id == 2:
			p, typ = "</s>", TypeControl
		case isByte:
			typ = TypeByte
		default:
			p = strings.ReplaceAll(p, " ", "\u2581")
		}
		v.Tokens[id], v.Types[id] = p, int32(typ)
	}
	return v, nil
}

// l2cReader reads a tokenizer.bin and tracks the offset for errors.
type l2cReader struct {
	r    io.Reader
	name string
	off  int64
}

// full fills b, or fails naming what was being read: io.EOF itself when not a
// byte was left (a clean end between pieces), ErrFormat when cut short.
func (d *l2cReader) full(b []byte, what string) error {
	n, err := io.ReadFull(d.r, b)
	start := d.off
	d.off += int64(n)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("tokenizer: %s: offset %d: %s: expected %d bytes, file ends after %d: %w", d.name, start, what, len(b), n, ErrFormat)
	default:
		return fmt.Errorf("tokenizer: %s: offset %d: reading %s: %w", d.name, start, what, err)
	}
}

// piece reads piece i; it returns io.EOF when the file ends cleanly before it.
func (d *l2cReader) piece(i int, maxLen int32) (string, float32, error) {
	var hdr [8]byte
	n, err := io.ReadFull(d.r, hdr[:])
	if n == 0 && errors.Is(err, io.EOF) {
		return "", 0, io.EOF
	}
	start := d.off
	d.off += int64(n)
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return "", 0, fmt.Errorf("tokenizer: %s: offset %d: piece %d: expected 8 bytes (f32 score, i32 length), file ends after %d: %w", d.name, start, i, n, ErrFormat)
		}
		return "", 0, fmt.Errorf("tokenizer: %s: offset %d: reading piece %d: %w", d.name, start, i, err)
	}
	score := math.Float32frombits(binary.LittleEndian.Uint32(hdr[:4]))
	length := int32(binary.LittleEndian.Uint32(hdr[4:]))
	if length < 0 || length > maxLen {
		return "", 0, fmt.Errorf("tokenizer: %s: offset %d: piece %d: length %d outside [0, max_token_length %d]: %w", d.name, start+4, i, length, maxLen, ErrFormat)
	}
	b := make([]byte, length)
	if err := d.full(b, fmt.Sprintf("piece %d: %d text bytes", i, length)); err != nil {
		return "", 0, err
	}
	return string(b), score, nil
}
