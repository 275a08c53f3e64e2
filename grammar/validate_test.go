package grammar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// propertySchemas are the schemas of the property test: nested objects,
// arrays with bounds, enums, anyOf, recursive $ref, optional properties,
// formats, patterns and numeric ranges.
var propertySchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name","age"],"additionalProperties":false}`,
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"email":{"type":"string","format":"uuid"},"tags":{"type":"array","items":{"type":"string","maxLength":4},"maxItems":3}},"required":["name"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"integer","minimum":-20,"maximum":20},"minItems":2,"maxItems":5}`,
	`{"enum":["red","green","blue",1,2.5,null,true,{"a":[1]}]}`,
	`{"const":{"k":"v","n":[1,2,3]}}`,
	`{"anyOf":[{"type":"string","minLength":2,"maxLength":4},{"type":"integer","exclusiveMinimum":100}]}`,
	`{"oneOf":[{"type":"null"},{"type":"boolean"},{"type":"array","maxItems":2,"items":{"type":"null"}}]}`,
	`{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer","minimum":0,"maximum":9},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["value"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"definitions":{"list":{"anyOf":[{"type":"null"},{"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/definitions/list"}},"required":["head","tail"],"additionalProperties":false}]}},"$ref":"#/definitions/list"}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"},"d":{"type":"integer"}},"additionalProperties":false}`,
	`{"type":"object","properties":{"x":{"type":"number","minimum":-1,"maximum":1}},"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`,
	`{"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":3}}`,
	`{"type":"array","prefixItems":[{"type":"string","format":"date"},{"type":"string","format":"time"},{"type":"string","format":"date-time"}],"items":false,"minItems":3}`,
	`{"type":"array","prefixItems":[{"const":"op"},{"enum":["add","sub"]}],"items":{"type":"number"},"maxItems":5}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"integer"},{"type":"string","maxLength":2}],"additionalItems":{"type":"boolean"},"maxItems":4}`,
	`{"type":"string","pattern":"^[A-Z]{2}-[0-9]{3,4}$"}`,
	`{"type":"string","pattern":"^(foo|bar)+\\.(txt|md)$"}`,
	`{"type":"string","pattern":"[0-9]"}`,
	`{"type":"string","pattern":"^\\w+@\\w+$"}`,
	`{"type":"string","pattern":"^[^\"\\\\]{1,5}$"}`,
	`{"type":"string","pattern":"^\\d{3}\\s?\\d{2}$"}`,
	`{"type":"string","minLength":3,"maxLength":3}`,
	`{"type":"string","format":"date-time"}`,
	`{"type":"integer","minimum":123,"maximum":4567}`,
	`{"type":"integer","minimum":-999,"maximum":-10}`,
	`{"type":"integer","exclusiveMinimum":0}`,
	`{"type":"integer","maximum":0}`,
	`{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
	`{"type":"number","minimum":-5,"exclusiveMaximum":0}`,
	`{"type":"number"}`,
	`{"type":"number","minimum":-2.75,"exclusiveMaximum":0.125}`,
	`{"type":"object","properties":{"price":{"type":"number","exclusiveMinimum":0.01,"maximum":99.99},"qty":{"type":"integer","minimum":1}},"required":["price","qty"],"additionalProperties":false}`,
	`{"type":["string","integer","null"],"maxLength":3,"minimum":7}`,
	`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer","minimum":1}},"required":["b"]}]}`,
	`{"allOf":[{"$ref":"#/$defs/base"},{"properties":{"extra":{"type":"boolean"}}}],"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}}}`,
	`{"type":"object","properties":{"kind":{"enum":["a","b"]},"v":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":3}]}},"required":["kind","v"],"additionalProperties":false}`,
	`{"oneOf":[{"type":"object","properties":{"type":{"const":"circle"},"r":{"type":"number","minimum":0}},"required":["type","r"],"additionalProperties":false},{"type":"object","properties":{"type":{"const":"square"},"side":{"type":"integer","minimum":1,"maximum":9}},"required":["type","side"],"additionalProperties":false}]}`,
	`{"type":"object","properties":{"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer","minimum":0,"maximum":9},"minItems":2,"maxItems":2},"minItems":1,"maxItems":3}},"required":["matrix"],"additionalProperties":false}`,
	`{"type":"object","properties":{"when":{"type":"string","format":"date"},"ok":{"type":"boolean"},"note":{"type":["string","null"],"maxLength":5}},"required":["when","note"],"additionalProperties":false}`,
	`{"type":"array","items":{"$ref":"#"},"maxItems":2}`,
	`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"object","properties":{"c":{"type":"string","enum":["x","y"]}},"required":["c"],"additionalProperties":false}},"required":["b"],"additionalProperties":false}},"required":["a"],"additionalProperties":false}`,
	`{"type":"object","properties":{"é":{"type":"string","pattern":"^[α-ω]+$"},"key with \"quotes\"":{"type":"integer"}},"additionalProperties":false}`,
	`{"type":"object","properties":{"p":{"type":"integer"}},"required":["p","q"],"additionalProperties":{"type":"string","maxLength":2}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":10,"exclusiveMaximum":true}},"required":["n"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"string","format":"uuid"},"maxItems":2}`,
	`{"type":"object","properties":{"host":{"type":"string","format":"hostname"},"ip":{"type":"string","format":"ipv4"},"mail":{"type":"string","format":"email"}},"required":["host","ip","mail"],"additionalProperties":false}`,
	// Pydantic's discriminated union, as model_json_schema() writes it.
	`{"$defs":{"Cat":{"properties":{"pet_type":{"const":"cat","title":"Pet Type","type":"string"},"meows":{"title":"Meows","type":"integer"}},"required":["pet_type","meows"],"title":"Cat","type":"object"},"Dog":{"properties":{"pet_type":{"const":"dog","title":"Pet Type","type":"string"},"barks":{"title":"Barks","type":"number"}},"required":["pet_type","barks"],"title":"Dog","type":"object"}},"properties":{"pet":{"discriminator":{"mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"},"propertyName":"pet_type"},"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],"title":"Pet"},"n":{"anyOf":[{"type":"integer"},{"type":"null"}],"default":null,"title":"N"}},"required":["pet"],"title":"Model","type":"object"}`,
	`true`,
}

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
			c := jsonschema.NewCompiler()
			c.AssertFormat()
			doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.AddResource("schema.json", doc); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("schema.json")
			if err != nil {
				t.Fatal(err)
			}
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
