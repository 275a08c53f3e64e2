// Package grammar constrains generation to a formal language: a GBNF
// grammar as llama.cpp writes it, or a JSON Schema compiled to one. For
// every token of a model's vocabulary it decides whether the token's bytes
// keep the output a prefix of the language, so a logits processor can set
// every other logit to -Inf before the sampler draws.
//
// # Use
//
//	g, err := grammar.ParseGBNF(src)            // or grammar.FromJSONSchema(schema)
//	v := grammar.FromTokenizer(tok)             // once per model (or NewVocab)
//	m := grammar.NewMatcher(g, v)               // per grammar and vocabulary; shared
//	s := m.Start()                              // a State value per sequence
//	m.Mask(s, allowed)                          // bit t set: token t may come next
//	s, ok = m.Advance(s, tok)                   // after the token is chosen
//
// A State is an immutable value: forking a sequence (beams, draft trees) is
// copying it, and Advance returns a new State leaving its argument as it
// was. A Matcher is safe for concurrent use and caches the mask of every
// state it has seen, so one Matcher should serve every sequence that uses
// the same grammar and vocabulary.
//
// # Matching bytes
//
// The matcher works on bytes, not characters: a token may end in the
// middle of a UTF-8 character (byte-fallback pieces, byte-level BPE) and the
// next token finishes it. A character class matches the UTF-8 encoding of
// its code points; a prefix of a character is allowed when some code point
// of the class begins with those bytes. Surrogates and overlong or invalid
// UTF-8 never match. Tokens that write no bytes (BOS, padding, other control
// tokens) are never allowed; end-of-generation tokens are allowed exactly
// when the output so far is a complete string of the language (CanEnd).
//
// A state is a set of parse stacks (llama.cpp's representation), each a
// persistent linked list shared between states. Every rule alternative that
// cannot derive a finite string is removed when the grammar is built, so
// every live stack can still complete: a token allowed by the mask can
// always be followed by more allowed tokens until the output is complete.
//
// # Masks
//
// The vocabulary's non-empty tokens are sorted by their bytes once per
// model. A mask walk visits them in that order and reuses, for each token,
// the states of the prefix it shares with the token before (a trie walked
// depth first without building the trie); when a prefix dies, every token
// that starts with it is skipped. The mask of each state is cached in the
// Matcher, keyed by the state's stacks.
package grammar
