package tokenizer_test

import (
	"fmt"

	"github.com/sluicehq/sluice/tokenizer"
)

// A SentencePiece vocabulary in llama2.c's style: plain spaces in pieces,
// <unk>/BOS/EOS first, no byte pieces (so "!" falls back to <unk>).
func ExampleNewSPM() {
	tok, err := tokenizer.NewSPM(tokenizer.SPMOptions{
		Pieces: []string{"<unk>", "<s>", "</s>", " ", "L", "i", "l", "y", " L", "il", "ily", " Lily"},
		Scores: []float32{0, 0, 0, 0, 0, 0, 0, 0, -1, -2, -3, -4},
		BOS:    1, EOS: 2, Unk: 0,
	})
	if err != nil {
		panic(err)
	}
	ids := tok.Encode("Lily Lily!", tokenizer.EncodeOptions{BOS: true})
	fmt.Println(ids)
	// Streaming, as llama2.c's run.c prints: the space after BOS is dropped.
	var pieces []string
	prev := int32(-1)
	for _, id := range ids {
		pieces = append(pieces, tok.Piece(prev, id))
		prev = id
	}
	fmt.Printf("%q\n", pieces)
	fmt.Printf("%q\n", tok.Decode(ids))
	// Output:
	// [1 11 11 0]
	// ["" "Lily" " Lily" "<unk>"]
	// "Lily Lily<unk>"
}

// A TextDecoder prints a generated sequence as it streams: a character whose
// bytes come as several byte-fallback tokens appears once, whole, with the
// token that completes it.
func ExampleTextDecoder() {
	pieces := []string{"<unk>", "<s>", "</s>", " Hi"}
	for b := range 256 {
		pieces = append(pieces, fmt.Sprintf("<0x%02X>", b))
	}
	tok, err := tokenizer.NewSPM(tokenizer.SPMOptions{
		Pieces: pieces, Scores: make([]float32, len(pieces)), BOS: 1, EOS: 2, Unk: 0,
	})
	if err != nil {
		panic(err)
	}
	byteTok := func(b byte) int32 { return 4 + int32(b) }
	// BOS " Hi" ' ' then 🦙 (F0 9F A6 99) as four byte tokens, then EOS.
	ids := []int32{1, 3, byteTok(' '), byteTok(0xF0), byteTok(0x9F), byteTok(0xA6), byteTok(0x99), 2}
	d := tokenizer.NewTextDecoder(tok)
	var chunks []string
	for _, id := range ids {
		chunks = append(chunks, d.Next(id))
	}
	chunks = append(chunks, d.Flush())
	fmt.Printf("%q\n", chunks)
	fmt.Printf("%q\n", tokenizer.Decode(tok, -1, ids))
	// Output:
	// ["" "Hi" " " "" "" "" "🦙" "" ""]
	// "Hi 🦙"
}
