package tokenizer

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
)

// modelFile returns the path of a real test file (see testutil.Model), or
// skips the test when it is absent.
func modelFile(tb testing.TB, rel string) string {
	tb.Helper()
	return testutil.Model(tb, rel)
}

func loadTok512(tb testing.TB) *SPM {
	tb.Helper()
	tok, err := LoadLlama2C(modelFile(tb, "stories260K/tok512.bin"), 512)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func loadLlama2Tok(tb testing.TB) *SPM {
	tb.Helper()
	tok, err := LoadLlama2C(modelFile(tb, "llama2-tokenizer/tokenizer.bin"), 32000)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func loadGGUF(tb testing.TB, rel string) Tokenizer {
	tb.Helper()
	f, err := gguf.Open(modelFile(tb, rel))
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// l2cPiece is one entry of a synthetic llama2.c tokenizer.bin.
type l2cPiece struct {
	score float32
	text  string
}

// llama2cBytes encodes pieces in the tokenizer.bin layout.
func llama2cBytes(pieces []l2cPiece) []byte {
	maxLen := 0
	for _, p := range pieces {
		maxLen = max(maxLen, len(p.text))
	}
	var b bytes.Buffer
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(maxLen)))
	for _, p := range pieces {
		b.Write(binary.LittleEndian.AppendUint32(nil, math.Float32bits(p.score)))
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(p.text))))
		b.WriteString(p.text)
	}
	return b.Bytes()
}

// smallLlama2C is a synthetic llama2.c vocabulary laid out like tok512:
// <unk>, BOS, EOS, 256 byte pieces, then the given pieces with descending
// scores (earlier merges first).
func smallLlama2C(extra ...string) []l2cPiece {
	ps := []l2cPiece{{0, "<unk>"}, {0, "\n<s>\n"}, {0, "\n</s>\n"}}
	for b := range 256 {
		ps = append(ps, l2cPiece{0, byteName(byte(b))})
	}
	for i, e := range extra {
		ps = append(ps, l2cPiece{-float32(i), e})
	}
	return ps
}

func byteName(b byte) string {
	const hex = "0123456789ABCDEF"
	return "<0x" + string([]byte{hex[b>>4], hex[b&15]}) + ">"
}

// synthetic is smallLlama2C parsed.
func synthetic(tb testing.TB, extra ...string) *SPM {
	tb.Helper()
	ps := smallLlama2C(extra...)
	tok, err := ReadLlama2C(bytes.NewReader(llama2cBytes(ps)), "synthetic.bin", len(ps))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
