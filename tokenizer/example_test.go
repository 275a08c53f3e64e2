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
