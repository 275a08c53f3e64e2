package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/convert"
)

func cmdConvert(ctx context.Context, e *env, args []string) error {
	fs := e.flags("convert")
	out := fs.String("o", "", "the GGUF file to write")
	tok := fs.String("tokenizer", "", "llama2.c tokenizer.bin: the vocabulary to embed (default for a Hugging Face directory: its tokenizer.json)")
	pre := fs.String("tokenizer-pre", "", "tokenizer.ggml.pre to write for a byte-level tokenizer.json whose pre-tokenizer is not recognised")
	name := fs.String("name", "", "general.name (default: the input's base name)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	in, err := oneArg(pos, "IN (a llama2.c .bin or a Hugging Face llama, mistral or qwen2 model directory)")
	if err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("convert: no output: give -o OUT.gguf: %w", errUsage)
	}
	if err := convert.File(in, *out, convert.Options{Tokenizer: *tok, TokenizerPre: *pre, Name: *name, Logger: e.log}); err != nil {
		return err
	}
	e.log.Info().Str("in", in).Str("out", *out).Msg("converted")
	return nil
}
