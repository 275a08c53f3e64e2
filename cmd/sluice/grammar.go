package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/tokenizer"
)

const grammarUsage = "grammar check (--json-schema JSON | --json-schema-file F | --grammar GBNF | --grammar-file F) [-m MODEL [--tokenizer TOK]] [--print-grammar] [FILE|-]"

// exitError carries a process exit status other than 1 (errUsage gives 2).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// cmdGrammar checks a text against a grammar or JSON Schema, as llama.cpp's
// gbnf-validator does: exit 0 when the whole input is a string of the
// language, 1 when it is not (naming the byte offset and what was expected
// there), 2 when the grammar or schema is invalid or uses a keyword the
// engine cannot enforce. With -m the text goes through the model's
// tokenizer and each token is checked against the vocabulary mask, as
// generation would see it, and the end against the end-of-generation
// tokens.
func cmdGrammar(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			return cmdGrammarCheck(ctx, e, args)
		}
		fmt.Fprintf(e.stderr, "Usage: sluice %s\n", grammarUsage)
		return errUsage
	}
	return cmdGrammarCheck(ctx, e, args[1:])
}

func cmdGrammarCheck(_ context.Context, e *env, args []string) error {
	fs := e.flags("grammar")
	gf := addGrammarFlags(fs)
	m := fs.String("m", "", "model (.gguf, or a llama2.c .bin with --tokenizer): check token by token through its vocabulary masks")
	tokPath := fs.String("tokenizer", "", "llama2.c tokenizer.bin")
	print := fs.Bool("print-grammar", false, "print the grammar (a schema's generated GBNF) to standard output")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if gf.given() != 1 {
		return fmt.Errorf("grammar check: give exactly one of --json-schema, --json-schema-file, --grammar, --grammar-file: %w", errUsage)
	}
	if len(pos) > 1 {
		return fmt.Errorf("grammar check: at most one input FILE, got %q: %w", pos, errUsage)
	}
	_, g, invalid, err := gf.spec("grammar check")
	if err != nil {
		if invalid {
			return &exitError{code: 2, err: err}
		}
		return err
	}
	if *print {
		_, err := io.WriteString(e.stdout, g.String())
		if len(pos) == 0 || err != nil {
			return err
		}
	}
	name := "standard input"
	var text []byte
	if len(pos) == 1 && pos[0] != "-" {
		name = pos[0]
		text, err = os.ReadFile(pos[0])
	} else {
		text, err = io.ReadAll(e.stdin)
	}
	if err != nil {
		return err
	}
	if *m == "" && *tokPath == "" {
		if err := g.Check(text); err != nil {
			return fmt.Errorf("%s: not in the language: %w", name, err)
		}
		fmt.Fprintf(e.stdout, "ok: %d bytes\n", len(text))
		return nil
	}
	tok, err := openTokenizer(*m, *tokPath, "")
	if err != nil {
		return err
	}
	ntok, err := checkTokens(g, tok, text)
	if err != nil {
		return fmt.Errorf("%s: not in the language: %w", name, err)
	}
	fmt.Fprintf(e.stdout, "ok: %d bytes, %d tokens\n", len(text), ntok)
	return nil
}

// checkTokens feeds the tokenization of text through the vocabulary masks
// of g, then the end of generation. A SentencePiece tokenizer's dummy
// prefix (a space before the first piece that the text does not have) is
// not part of generated output: the first token is replaced by the token
// for its piece without the space, or its bytes are fed as they are when
// the vocabulary has no such token.
func checkTokens(g *grammar.Grammar, tok tokenizer.Tokenizer, text []byte) (int, error) {
	v := grammar.FromTokenizer(tok)
	m := grammar.NewMatcher(g, v)
	ids := tok.Encode(string(text), tokenizer.EncodeOptions{})
	var got []byte
	for _, id := range ids {
		got = append(got, v.Bytes(id)...)
	}
	s := m.Start()
	off := 0
	if !bytes.Equal(got, text) && len(ids) > 0 && bytes.Equal(got, append([]byte(" "), text...)) {
		first := v.Bytes(ids[0])[1:]
		ids = ids[1:]
		byBytes := map[string]int32{}
		for id := range int32(v.Len()) {
			if _, dup := byBytes[string(v.Bytes(id))]; !dup && !v.IsEOG(id) && len(v.Bytes(id)) > 0 {
				byBytes[string(v.Bytes(id))] = id
			}
		}
		if id, ok := byBytes[string(first)]; ok {
			ids = append([]int32{id}, ids...)
		} else if len(first) > 0 {
			ns, ok := m.AdvanceBytes(s, first)
			if !ok {
				return 0, g.Check(text)
			}
			s, off = ns, len(first)
		}
	} else if !bytes.Equal(got, text) {
		return 0, fmt.Errorf("the tokenizer does not reproduce the text (it has no byte fallback for some of it): its tokens write %q", got)
	}
	for i, id := range ids {
		if !allowed(m.MaskView(s), id) {
			return 0, fmt.Errorf("byte %d: token %d (id %d, %q) is not allowed by the mask: expected %s", off, i, id, v.Bytes(id), g.Expected(s))
		}
		ns, ok := m.Advance(s, id)
		if !ok {
			return 0, errors.New("internal error: a token the mask allows is refused by Advance")
		}
		s = ns
		off += len(v.Bytes(id))
	}
	if !m.CanEnd(s) {
		return 0, fmt.Errorf("byte %d: found end of input, expected %s", off, g.Expected(s))
	}
	eog := v.EOG()
	if len(eog) > 0 && !allowed(m.MaskView(s), eog[0]) {
		return 0, errors.New("internal error: the end-of-generation token is not allowed at the end")
	}
	return len(ids), nil
}

func allowed(mask []uint64, id int32) bool { return mask[id/64]>>(id%64)&1 == 1 }
