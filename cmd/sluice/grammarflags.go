package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sluicehq/sluice/grammar"
)

// grammarFlags are llama.cpp's flags for constrained output, shared by
// generate, bench and grammar check: at most one of them (grammar check
// needs exactly one).
type grammarFlags struct {
	fs                                 *flag.FlagSet
	schema, schemaFile, gbnf, gbnfFile *string
}

func addGrammarFlags(fs *flag.FlagSet) *grammarFlags {
	return &grammarFlags{
		fs:         fs,
		schema:     fs.String("json-schema", "", "constrain the output to the values of this JSON Schema (text)"),
		schemaFile: fs.String("json-schema-file", "", "constrain the output to the values of the JSON Schema in this `FILE`"),
		gbnf:       fs.String("grammar", "", "constrain the output to this GBNF grammar (llama.cpp syntax, root rule \"root\")"),
		gbnfFile:   fs.String("grammar-file", "", "constrain the output to the GBNF grammar in this `FILE`"),
	}
}

var grammarFlagNames = []string{"json-schema", "json-schema-file", "grammar", "grammar-file"}

// given is how many of the flags were set.
func (f *grammarFlags) given() int {
	set := setFlags(f.fs)
	n := 0
	for _, name := range grammarFlagNames {
		if set[name] {
			n++
		}
	}
	return n
}

// spec reads the flag that was set (nil when none was) and compiles it, so
// a bad schema or grammar fails before a model is loaded; the error names
// the flag or file and the problem. invalid marks errors of the schema or
// grammar itself (grammar check exits 2 on them).
func (f *grammarFlags) spec(cmd string) (sp *grammar.Spec, g *grammar.Grammar, invalid bool, err error) {
	switch f.given() {
	case 0:
		return nil, nil, false, nil
	case 1:
	default:
		return nil, nil, false, fmt.Errorf("%s: give one of --json-schema, --json-schema-file, --grammar, --grammar-file: %w", cmd, errUsage)
	}
	set := setFlags(f.fs)
	where := "--json-schema"
	switch {
	case set["json-schema"]:
		sp = &grammar.Spec{Schema: []byte(*f.schema)}
	case set["json-schema-file"]:
		where = *f.schemaFile
		b, err := os.ReadFile(*f.schemaFile)
		if err != nil {
			return nil, nil, true, fmt.Errorf("%s: --json-schema-file: %w", cmd, err)
		}
		sp = &grammar.Spec{Schema: b}
	case set["grammar"]:
		where = "--grammar"
		sp = &grammar.Spec{GBNF: *f.gbnf}
	default:
		where = *f.gbnfFile
		b, err := os.ReadFile(*f.gbnfFile)
		if err != nil {
			return nil, nil, true, fmt.Errorf("%s: --grammar-file: %w", cmd, err)
		}
		sp = &grammar.Spec{GBNF: string(b)}
	}
	if len(sp.Schema) == 0 && sp.GBNF == "" {
		return nil, nil, true, fmt.Errorf("%s: %s is empty", cmd, where)
	}
	if g, err = sp.Compile(); err != nil {
		return nil, nil, true, fmt.Errorf("%s: %s: %w", cmd, where, err)
	}
	return sp, g, false, nil
}
