package grammar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// propertySchemas are the schemas of the property test
// (testdata/property_schemas.jsonl, one a line; the engine's tests in
// package decode run them through a model too): nested objects, arrays
// with bounds, enums, anyOf, recursive $ref, optional properties, formats,
// patterns and numeric ranges.
var propertySchemas = func() []string {
	b, err := os.ReadFile("testdata/property_schemas.jsonl")
	if err != nil {
		panic(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}()

// closers are bytes a random walk prefers once it is long, so most walks
// finish within their budget.
const closers = "\"]}0123456789el"

// randomAccepted walks the matcher from its start choosing allowed tokens at
// random (preferring closing bytes as the text grows) until it ends, and
// returns the text, or ok false when it ran out of budget.
func randomAccepted(m *Matcher, r *rand.Rand, budget int) ([]byte, bool) {
	s := m.Start()
	var out []byte
	mask := make([]uint64, (m.v.Len()+63)/64)
	var allowed, closing []int32
	for step := 0; step < budget; step++ {
		if m.CanEnd(s) && r.IntN(3) > 0 {
			return out, true
		}
		m.Mask(s, mask)
		allowed, closing = allowed[:0], closing[:0]
		for tok := range int32(m.v.Len()) {
			if mask[tok/64]>>(tok%64)&1 == 1 && !m.v.IsEOG(tok) {
				allowed = append(allowed, tok)
				if b := m.v.Bytes(tok); len(b) == 1 && strings.IndexByte(closers, b[0]) >= 0 {
					closing = append(closing, tok)
				}
			}
		}
		if len(allowed) == 0 {
			return out, m.CanEnd(s)
		}
		pick := allowed
		if len(closing) > 0 && r.IntN(budget) < 4*step+budget/8 {
			pick = closing
		}
		tok := pick[r.IntN(len(pick))]
		ns, ok := m.Advance(s, tok)
		if !ok {
			panic(fmt.Sprintf("allowed token %q refused after %q", m.v.Bytes(tok), out))
		}
		s = ns
		out = append(out, m.v.Bytes(tok)...)
	}
	return out, false
}

// TestAcceptedValidates is the property test: every text the matcher lets
// a random walk complete validates under an independent JSON Schema
// validator (formats asserted).
func TestAcceptedValidates(t *testing.T) {
	v := testVocab(7, 600)
	for i, src := range propertySchemas {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			g := mustSchema(t, src)
			sch := testutil.Schema(t, src)
			m := NewMatcher(g, v)
			done := 0
			for seed := range uint64(60) {
				r := rand.New(rand.NewPCG(seed, uint64(i)))
				out, ok := randomAccepted(m, r, 400)
				if !ok {
					continue
				}
				done++
				inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
				if err != nil {
					t.Fatalf("seed %d: accepted text is not JSON: %q: %v", seed, out, err)
				}
				if err := sch.Validate(inst); err != nil {
					t.Fatalf("seed %d: accepted text does not validate: %s\n%v\ngrammar:\n%s", seed, out, err, g)
				}
			}
			if done < 10 {
				t.Errorf("only %d of 60 walks completed", done)
			}
		})
	}
}
