// Package grammar constrains generation to a formal language: a GBNF
// grammar as llama.cpp writes it, or a JSON Schema compiled to one. For
// every token of a model's vocabulary it decides whether the token's bytes
// keep the output a prefix of the language, so a logits processor can set
// every other logit to -Inf before the sampler draws. It is pure Go.
//
// # Use
//
//	g, err := grammar.ParseGBNF(src)            // or grammar.FromJSONSchema(schema)
//	v := grammar.FromTokenizer(tok)             // once per model (or NewVocab)
//	m := grammar.NewMatcher(g, v)               // per grammar and vocabulary; shared
//	s := m.Start()                              // a State value per sequence
//	m.Apply(s, logits)                          // disallowed tokens to -Inf
//	s, ok = m.Advance(s, tok)                   // after the token is chosen
//
// A logits processor, at each position of a constrained sequence (target
// and draft distributions alike), takes the sequence's State and calls
// m.Apply(s, logits), which sets logits[t] = -Inf for every token t the
// grammar does not allow (and for padded rows past the vocabulary); the
// bitset itself is m.MaskView(s) (shared, read-only) or m.Mask(s, buf).
// After the sampler (or the verifier) accepts token t, the processor
// stores m.Advance(s, t) as the sequence's new State. m.Forced(s) returns
// the one allowed token when there is only one: it needs no draw and, for
// jump-forward, a run of forced tokens can enter a draft tree as a chain.
// End-of-generation ids are allowed exactly when m.CanEnd(s); m.MustEnd(s)
// says that nothing else is (the value is complete: stop, whatever the
// number of end-of-generation ids), and Advance over one gives an ended
// State. A State is an immutable value:
// forking a sequence (beams, draft-tree nodes) is copying it, Advance
// returns a new State and leaves its argument as it was, and a rejected
// draft is undone by keeping the older State. A Matcher is safe for
// concurrent use; one Matcher should serve every sequence that uses the
// same grammar and vocabulary, since it caches masks.
//
// # Matching bytes
//
// The matcher works on bytes, not characters: a token may end in the
// middle of a UTF-8 character (byte-fallback pieces, byte-level BPE) and the
// next token finishes it. A character class matches the UTF-8 encoding of
// its code points; a prefix of a character is allowed when some code point
// of the class begins with those bytes. Surrogates and overlong or invalid
// UTF-8 never match. Tokens that write no bytes (BOS, padding, other control
// tokens) are never allowed.
//
// A state is a set of parse stacks (llama.cpp's representation), each a
// persistent linked list shared between states. Every rule alternative that
// cannot derive a finite string is removed when the grammar is built, so
// every live stack can still complete: a token allowed by the mask can
// always be followed by more allowed tokens until the output is complete.
// Left recursion (A ::= A "x") is refused, as llama.cpp refuses it; a
// repetition of something that can match the empty string (("a"?)*, which
// llama.cpp also refuses) is accepted: it pushes no frames, and the
// expansion of such a grammar skips configurations it has already made.
//
// # Masks
//
// The vocabulary's non-empty tokens are sorted by their bytes once per
// model, with a skip table: walking them in order visits a trie without
// building one, and when a prefix dies every token that begins with it is
// skipped at once. A mask is computed from context-independent parts (as
// xgrammar's adaptive token mask cache): for each stack of the state, its
// top three frames decide most tokens whatever lies below them; that
// decision is made once per distinct window and cached in the Matcher, and
// only the few tokens that would pop below the window before their last byte
// are checked against the whole stack. Inside one window walk, sets of
// stacks are interned and their byte transitions memoized. The mask of every
// state is cached too (keyed by the state's stacks), so sequences that pass
// through the same states pay once. Each cache is bounded (64 MiB of masks
// per Matcher) and dropped when full.
//
// # JSON Schema
//
// FromJSONSchema compiles a schema (draft 4 to 2020-12, by its $schema;
// unknown metaschemas are refused) to a grammar of compact JSON: no
// whitespace outside strings. It is at least as strict as the schema: every
// text it accepts validates, and a keyword it cannot enforce is an error
// (*SchemaError) naming the keyword and its JSON pointer, never dropped.
//
//   - Objects: the properties in the order of the schema's "properties"
//     (OpenAI's strict mode order), then required names not among them
//     (in "required" order), then additional properties. Optional
//     properties may be left out; nothing is reordered. additionalProperties
//     false forbids extra keys, a schema constrains their values, absent or
//     true allows any (JSON Schema's default); extra keys are written
//     without escapes and differ from the declared names. minProperties
//     and maxProperties only when the declared shape already satisfies them.
//   - Arrays: items, prefixItems, draft 4-2019 array-valued items with
//     additionalItems, minItems, maxItems; uniqueItems true only with
//     maxItems <= 1.
//   - Strings: full JSON string syntax (escapes included; \u escapes of
//     surrogates are not written), minLength/maxLength in code points,
//     format date (leap years exact), time and date-time (RFC 3339, upper
//     case T and Z, no leap second), uuid, ipv4, and conservative subsets
//     of hostname and email (labels of at most 32 characters, an unquoted
//     local part of letters, digits, _%+- and dots), asserted in every draft;
//     pattern (ECMA-262 syntax) in the subset documented at the regex
//     compiler: literals, classes, \d \w \s and their negations, '.',
//     groups, alternation, greedy and lazy quantifiers, ^ and $ at the ends
//     (a pattern without them matches anywhere in the string); lookaround,
//     backreferences, word boundaries and \p{...} are refused.
//   - Numbers: full JSON number syntax with llama.cpp's caps: at most 16
//     integral digits and 16 fraction digits, an exponent of at most 3
//     digits. Integers have no fraction or exponent ("1.0" is refused for an
//     integer although JSON Schema calls it one: consumers parse integers
//     strictly). minimum, maximum and both exclusive forms (draft 4's
//     booleans too): integers by an exact digit-range grammar; numbers
//     exactly too (bounds with up to 30 fraction digits), on the integer
//     part and, where it equals a bound's, digit by digit on the fraction;
//     a bounded number is written without an exponent.
//     multipleOf only as 1.
//   - enum and const: the listed values, compact, objects in their own key
//     order, numbers in any decimal spelling of their value (1, 1.0).
//   - anyOf; oneOf when no value can match two branches (different types,
//     different constants, objects whose required property has different
//     constants, or a closed object (additionalProperties false) and one
//     that requires a property it does not declare); allOf and keywords
//     beside $ref (draft 2019-09 on) by
//     merging the schemas keyword by keyword, refused where a merge would
//     change the meaning; $ref to JSON pointers inside the schema ($defs,
//     definitions, any path), $anchor and draft 6-7 "#name" ids, resources
//     embedded by $id (relative references resolved against them),
//     recursion included; a reference outside the document is refused.
//   - Ignored as annotations: title, description, examples, default,
//     $comment, $schema, $id, $anchor, deprecated, readOnly, writeOnly,
//     OpenAPI's discriminator (oneOf is checked on its own) and
//     the content keywords. Refused by name: not, if/then/else, contains,
//     patternProperties, propertyNames, dependencies, dependentRequired,
//     dependentSchemas, unevaluated*, $dynamicRef, $recursiveRef, remote
//     references, unknown formats and any unknown keyword.
//
// Compiled schemas are cached by their compact bytes.
package grammar
