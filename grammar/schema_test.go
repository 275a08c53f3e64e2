package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustSchema(t testing.TB, s string) *Grammar {
	t.Helper()
	g, err := FromJSONSchema([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return g
}

// TestSchemaKeywords checks each keyword on texts that must and must not
// be in the compiled language.
func TestSchemaKeywords(t *testing.T) {
	cases := []struct {
		name, schema string
		yes, no      []string
	}{
		{"true", `true`, []string{`1`, `"a"`, `{"a":[1,{}]}`, `null`, `-0.5e+10`}, []string{``, ` 1`, `{"a" :1}`, `[1,]`, `tru`}},
		{"type string", `{"type":"string"}`, []string{`""`, `"a\"b"`, `"\u00e9é\n"`, `"😀"`}, []string{`1`, `"a`, "\"\x01\"", `"\x"`, `"\ud800"`}},
		{"type array of types", `{"type":["integer","null"]}`, []string{`1`, `-12`, `null`, `0`}, []string{`1.5`, `"1"`, `01`, `true`}},
		{"number syntax", `{"type":"number"}`, []string{`0`, `-0`, `1.25`, `1e5`, `-1.5E-300`, `12345678901234567890.5`[4:]}, []string{`01`, `1.`, `.5`, `+1`, `1e`, `1e1234`, `12345678901234567`}},
		{"boolean", `{"type":"boolean"}`, []string{`true`, `false`}, []string{`1`, `null`}},
		{"const", `{"const":{"a":[1,"x"]}}`, []string{`{"a":[1,"x"]}`}, []string{`{"a":[1]}`, `{ "a":[1,"x"]}`}},
		{"enum", `{"enum":["red","green",3,null]}`, []string{`"red"`, `"green"`, `3`, `null`}, []string{`"blue"`, `4`}},
		{"enum prefixes", `{"enum":["ab","abc","abd","a","b","é","éa","ü",true,null,1.5]}`, []string{`"ab"`, `"abc"`, `"abd"`, `"a"`, `"b"`, `"é"`, `"éa"`, `"ü"`, `true`, `null`, `1.5`, `1.50`}, []string{`"abe"`, `"ac"`, `""`, `"éb"`, `false`, `1`}},
		{"enum filtered by type", `{"type":"string","enum":["a",1]}`, []string{`"a"`}, []string{`1`}},
		{"minLength maxLength", `{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"é\n"`, `"\u0041b"`}, []string{`"a"`, `"abcd"`}},
		{"pattern anchored", `{"type":"string","pattern":"^[a-z]+-\\d{2}$"}`, []string{`"ab-12"`}, []string{`"ab-1"`, `"Ab-12"`, `"ab-123"`}},
		{"pattern unanchored", `{"type":"string","pattern":"x\\.y"}`, []string{`"x.y"`, `"aax.ybb"`}, []string{`"xzy"`}},
		{"pattern quote escape", `{"type":"string","pattern":"^[\"\\\\]a$"}`, []string{`"\"a"`, `"\\a"`}, []string{`"a"`}},
		{"pattern nullable repetition", `{"type":"string","pattern":"^(a?b?)*c$"}`, []string{`"c"`, `"abc"`, `"aabbc"`, `"bac"`}, []string{`"ca"`, `""`, `"abd"`}},
		{"pattern groups", `{"type":"string","pattern":"^(ab|cd)+(?:x)?$"}`, []string{`"ab"`, `"abcdx"`}, []string{`"a"`, `"abx x"`}},
		{"format date", `{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"2023-12-31"`, `"2000-02-29"`}, []string{`"2023-02-29"`, `"1900-02-29"`, `"2023-04-31"`, `"2023-13-01"`}},
		{"format time", `{"type":"string","format":"time"}`, []string{`"23:59:59Z"`, `"00:00:00.123+05:30"`}, []string{`"24:00:00Z"`, `"12:00:00"`}},
		{"format date-time", `{"type":"string","format":"date-time"}`, []string{`"2024-01-02T03:04:05Z"`}, []string{`"2024-01-02 03:04:05Z"`}},
		{"format uuid", `{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`}},
		{"format ipv4", `{"type":"string","format":"ipv4"}`, []string{`"192.168.0.1"`, `"255.255.255.255"`, `"0.0.0.0"`}, []string{`"256.1.1.1"`, `"01.2.3.4"`, `"1.2.3"`}},
		{"format hostname", `{"type":"string","format":"hostname"}`, []string{`"example.com"`, `"a-b.c"`, `"localhost"`}, []string{`"-a.com"`, `"a-.com"`, `"a..b"`, `"a_b"`}},
		{"format email", `{"type":"string","format":"email"}`, []string{`"joe.bloggs+x@mail.example.com"`, `"a@b.co"`}, []string{`"a@b"`, `".a@b.com"`, `"a..b@c.com"`, `"a@-b.com"`}},
		{"integer range", `{"type":"integer","minimum":-15,"maximum":120}`, []string{`-15`, `-1`, `0`, `9`, `10`, `99`, `100`, `120`}, []string{`-16`, `-0`, `121`, `200`, `1000`, `007`}},
		{"integer exclusive", `{"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10}`, []string{`1`, `9`}, []string{`0`, `10`}},
		{"integer draft4 exclusive", `{"type":"integer","minimum":0,"exclusiveMinimum":true,"maximum":3}`, []string{`1`, `3`}, []string{`0`, `4`}},
		{"integer fractional bounds", `{"type":"integer","minimum":1.5,"maximum":3.5}`, []string{`2`, `3`}, []string{`1`, `4`}},
		{"integer minimum only", `{"type":"integer","minimum":1000}`, []string{`1000`, `99999`, `1234567890123456`}, []string{`999`, `-1`, `0`, `12345678901234567`}},
		{"number range", `{"type":"number","minimum":-2,"maximum":3}`, []string{`-2`, `-1.5`, `0`, `0.25`, `2.999`, `3`, `3.000`, `-2.0`}, []string{`-2.5`, `3.01`, `4`, `1e1`, `-0`}},
		{"number exclusive", `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`, []string{`0.5`, `0.001`, `0.999`}, []string{`0`, `0.0`, `1`, `1.0`, `-0.5`}},
		{"number negative range", `{"type":"number","maximum":-1}`, []string{`-1`, `-1.0`, `-1.5`, `-100`}, []string{`-0.5`, `0`, `-1.000001`[:0] + `5`}},
		{"number decimal bounds", `{"type":"number","minimum":-1.25,"exclusiveMaximum":2.5}`, []string{`-1.25`, `-1.2`, `-1.250`, `-1`, `0`, `2.4999`, `2.49`, `2`, `-0.5`}, []string{`-1.26`, `-1.2500001`, `2.5`, `2.50`, `2.6`, `3`, `-2`}},
		{"number decimal exclusive min", `{"type":"number","exclusiveMinimum":0.05,"maximum":0.1}`, []string{`0.051`, `0.06`, `0.1`, `0.100`, `0.0500001`}, []string{`0.05`, `0.050`, `0.04`, `0.1001`, `0`, `1`}},
		{"number small range", `{"type":"number","minimum":3.14,"maximum":3.15}`, []string{`3.14`, `3.145`, `3.15`, `3.1499999`}, []string{`3.13`, `3.151`, `3`, `4`}},
		{"number negative decimals", `{"type":"number","minimum":-0.5,"maximum":-0.25}`, []string{`-0.5`, `-0.3`, `-0.25`, `-0.250`}, []string{`-0.51`, `-0.24`, `0`, `-0`, `-1`}},
		{"object fixed order", `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},"required":["a","b"],"additionalProperties":false}`, []string{`{"b":1,"a":"x"}`}, []string{`{"a":"x","b":1}`, `{"b":1}`, `{"b":1,"a":"x","c":1}`}},
		{"object optional", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"],"additionalProperties":false}`, []string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":2,"c":3}`, `{"a":1,"b":2,"c":3}`}, []string{`{}`, `{"a":1}`, `{"a":1,"c":3}`, `{,"b":1}`}},
		{"object additional default", `{"type":"object","properties":{"a":{"type":"integer"}}}`, []string{`{}`, `{"a":1}`, `{"a":1,"z":[true]}`, `{"zz":null}`, `{"ab":1}`, `{"":1}`}, []string{`{"a":"x"}`, `{"a":1,"a":2}`}},
		{"additionalProperties schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, []string{`{}`, `{"x":1,"y":2}`}, []string{`{"x":"1"}`}},
		{"required not declared", `{"type":"object","required":["id"],"additionalProperties":{"type":"integer"}}`, []string{`{"id":5}`, `{"id":5,"n":1}`}, []string{`{}`, `{"n":1}`}},
		{"array items bounds", `{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, []string{`[1]`, `[1,2,3]`}, []string{`[]`, `[1,2,3,4]`, `["a"]`, `[1,]`}},
		{"array default", `{"type":"array"}`, []string{`[]`, `[1,"a",{}]`}, []string{`[`, `[,]`}},
		{"prefixItems", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`, []string{`[]`, `["a"]`, `["a",1]`}, []string{`[1]`, `["a",1,2]`}},
		{"prefixItems with rest", `{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":2}`, []string{`["a",1]`, `["a",1,2]`}, []string{`["a"]`, `["a","b"]`}},
		{"draft4 tuple items", `{"type":"array","items":[{"type":"string"},{"type":"boolean"}],"additionalItems":false}`, []string{`["a",true]`, `["a"]`}, []string{`["a",true,1]`}},
		{"anyOf", `{"anyOf":[{"type":"string","maxLength":1},{"type":"integer","minimum":5}]}`, []string{`"a"`, `5`, `99`}, []string{`"ab"`, `4`}},
		{"anyOf with siblings", `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false,"anyOf":[{"required":["a"]},{"properties":{"a":{"minimum":10}}}]}`, []string{`{"a":1}`, `{}`, `{"a":12}`}, []string{`{"b":1}`}},
		{"oneOf types", `{"oneOf":[{"type":"string"},{"type":"null"}]}`, []string{`"x"`, `null`}, []string{`1`}},
		{"oneOf discriminated", `{"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k","x"],"additionalProperties":false},{"type":"object","properties":{"k":{"const":"b"},"y":{"type":"string"}},"required":["k","y"],"additionalProperties":false}]}`, []string{`{"k":"a","x":1}`, `{"k":"b","y":"s"}`}, []string{`{"k":"a","y":"s"}`}},
		{"oneOf closed objects", `{"oneOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false},{"type":"object","properties":{"b":{"type":"string"}},"required":["b"],"additionalProperties":false}]}`, []string{`{"a":1}`, `{"b":"x"}`}, []string{`{"a":1,"b":"x"}`, `{}`}},
		{"allOf merge", `{"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"string"}},"required":["b"]}]}`, []string{`{"a":1,"b":"x"}`}, []string{`{"a":1}`, `{"b":"x"}`}},
		{"allOf numeric", `{"allOf":[{"type":"integer","minimum":0},{"maximum":5},{"minimum":2}]}`, []string{`2`, `5`}, []string{`1`, `6`}},
		{"ref defs", `{"$defs":{"pos":{"type":"integer","minimum":1}},"type":"array","items":{"$ref":"#/$defs/pos"}}`, []string{`[1,2]`}, []string{`[0]`}},
		{"ref definitions", `{"definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s"}`, []string{`"a"`}, []string{`1`}},
		{"ref recursion", `{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},"$ref":"#/$defs/node"}`, []string{`{"v":1}`, `{"v":1,"kids":[{"v":2,"kids":[]},{"v":3}]}`}, []string{`{"v":1,"kids":[{}]}`}},
		{"ref root recursion", `{"type":["array","integer"],"items":{"$ref":"#"}}`, []string{`1`, `[[1,[2]],3]`}, []string{`["a"]`}},
		{"ref with siblings", `{"$defs":{"s":{"type":"string"}},"$ref":"#/$defs/s","maxLength":2}`, []string{`"ab"`}, []string{`"abc"`}},
		{"ref anchor", `{"$defs":{"a":{"$anchor":"pos","type":"integer","minimum":1}},"type":"array","items":{"$ref":"#pos"}}`, []string{`[1]`}, []string{`[0]`}},
		{"ref embedded resource", `{"$id":"https://x.example/root.json","$defs":{"b":{"$id":"b.json","type":"string","maxLength":1},"c":{"$id":"dir/c.json","$ref":"../b.json"}},"$ref":"dir/c.json"}`, []string{`"a"`}, []string{`"ab"`, `1`}},
		{"ref pointer into resource", `{"$id":"https://x.example/root.json","$defs":{"r":{"$id":"r.json","$defs":{"n":{"type":"null"}}}},"$ref":"r.json#/$defs/n"}`, []string{`null`}, []string{`1`}},
		{"draft 7 plain-name id", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"a":{"$id":"#named","type":"boolean"}},"$ref":"#named"}`, []string{`true`}, []string{`1`}},
		{"draft 4 id", `{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://x.example/s.json","definitions":{"a":{"id":"a.json","type":"integer"}},"$ref":"a.json"}`, []string{`1`}, []string{`"1"`}},
		{"boolean subschemas", `{"type":"object","properties":{"a":true,"b":false}}`, []string{`{"a":1}`, `{}`}, []string{`{"b":1}`}},
		{"no type", `{"minimum":5,"maxLength":1}`, []string{`5`, `"a"`, `null`, `[]`}, []string{`4`, `"ab"`}},
		{"annotations ignored", `{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","title":"t","description":"d","examples":[1],"default":1,"$comment":"c","type":"integer"}`, []string{`1`}, []string{`"1"`}},
		{"uniqueItems false", `{"type":"array","uniqueItems":false,"maxItems":1}`, []string{`[]`, `[1]`}, []string{`[1,1]`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := mustSchema(t, c.schema)
			for _, s := range c.yes {
				if !accepts(g, s) {
					t.Errorf("%s rejected", s)
				}
			}
			for _, s := range c.no {
				if accepts(g, s) {
					t.Errorf("%s accepted", s)
				}
			}
			if t.Failed() {
				t.Log(g.String())
			}
		})
	}
}

// TestSchemaRefused checks that every keyword the compiler cannot enforce
// is an error naming it and where it is.
func TestSchemaRefused(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"not":{"type":"string"}}`, `schema #: keyword "not"`},
		{`{"type":"object","properties":{"a":{"if":{},"then":{}}}}`, `schema #/properties/a: keyword "if"`},
		{`{"type":"array","contains":{"type":"integer"}}`, `keyword "contains"`},
		{`{"type":"object","patternProperties":{"^x":{}}}`, `keyword "patternProperties"`},
		{`{"type":"object","propertyNames":{"maxLength":2}}`, `keyword "propertyNames"`},
		{`{"type":"object","dependencies":{"a":["b"]}}`, `keyword "dependencies"`},
		{`{"type":"object","dependentRequired":{"a":["b"]}}`, `keyword "dependentRequired"`},
		{`{"type":"object","unevaluatedProperties":false}`, `keyword "unevaluatedProperties"`},
		{`{"type":"array","uniqueItems":true}`, `keyword "uniqueItems"`},
		{`{"type":"number","multipleOf":0.5}`, `keyword "multipleOf"`},
		{`{"type":"number","minimum":0.1234567890123456789012345678901}`, `keyword "minimum": 0.1234567890123456789012345678901 has more than 30 fraction digits`},
		{`{"type":"string","format":"uri"}`, `keyword "format": "uri" is not supported`},
		{`{"type":"string","pattern":"^(?=a)"}`, `keyword "pattern": offset 1: lookaround`},
		{`{"type":"string","pattern":"(a)\\1"}`, `backreference`},
		{`{"type":"string","pattern":"\\bx"}`, `word boundary`},
		{`{"type":"string","pattern":"\\p{L}"}`, `Unicode property`},
		{`{"type":"string","pattern":"a^b"}`, `anchor`},
		{`{"type":"string","pattern":"^a","maxLength":3}`, `keyword "maxLength": not supported together with pattern`},
		{`{"$ref":"http://example.com/s.json"}`, `keyword "$ref": "http://example.com/s.json" resolves to http://example.com/s.json, outside the schema`},
		{`{"$ref":"#/$defs/missing"}`, `no "$defs" in the schema`},
		{`{"$ref":"#foo"}`, `no anchor "foo" in the schema`},
		{`{"$id":"https://x.example/a.json","$ref":"b.json"}`, `resolves to https://x.example/b.json, outside the schema`},
		{`{"oneOf":[{"type":"integer"},{"minimum":2}]}`, `keyword "oneOf": branches 0 and 1 may both match`},
		{`{"oneOf":[{"type":"object","properties":{"a":{}},"required":["a"]},{"type":"object","properties":{"a":{},"b":{}},"required":["b"],"additionalProperties":false}]}`, `keyword "oneOf": branches 0 and 1 may both match`},
		{`{"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]}`, `keyword "pattern": cannot merge`},
		{`{"allOf":[{"anyOf":[{"type":"string"}]},{"anyOf":[{"type":"integer"}]}]}`, `keyword "anyOf": cannot be merged`},
		{`{"type":"object","minProperties":2}`, `keyword "minProperties"`},
		{`{"type":"object","maxProperties":2}`, `keyword "maxProperties"`},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`{"enum":[]}`, `keyword "enum": empty`},
		{`{"fooBar":1}`, `keyword "fooBar": not supported`},
		{`{"type":"integer","exclusiveMinimum":true}`, `keyword "exclusiveMinimum": true without minimum`},
		{`{"type":"integer","minimum":5,"maximum":4}`, `no JSON value satisfies the schema (unsatisfiable: #: no integer between minimum and maximum)`},
		{`{"type":"object","properties":{"a":false},"required":["a"]}`, `no JSON value satisfies the schema (unsatisfiable: #/properties/a: the schema is false`},
		{`{"type":"object","properties":{"a":{"type":"string","minLength":3,"maxLength":2}},"required":["a"]}`, `unsatisfiable: #/properties/a: maxLength is below minLength`},
		{`{"type":"number","minimum":2.5,"exclusiveMaximum":2.5}`, `unsatisfiable: #: no number between minimum and maximum`},
		{`{"allOf":[{"type":"string"},{"type":"integer"}]}`, `no JSON value satisfies the schema`},
		{`false`, `no JSON value satisfies the schema`},
		{`{"type":"array","minItems":3,"maxItems":2}`, `no JSON value satisfies`},
		{`{"type":`, `invalid JSON`},
		{`{"a":1,"a":2}`, `duplicate key "a"`},
		{`[1]`, `expected a schema`},
	}
	for _, c := range cases {
		_, err := FromJSONSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.schema, err, c.want)
		}
	}
	_, err := FromJSONSchema([]byte(`{"enum":[]}`))
	if !errors.Is(err, ErrEmpty) {
		t.Errorf("empty enum: %v does not wrap ErrEmpty", err)
	}
	var se *SchemaError
	if _, err := FromJSONSchema([]byte(`{"properties":{"x/y":{"not":{}}}}`)); !errors.As(err, &se) || se.Pointer != "#/properties/x~1y" || se.Keyword != "not" {
		t.Errorf("pointer escaping: %v", err)
	}
}

// TestLargeEnum: every value of a 2000-value enum, and nothing else, with
// the masks of a byte vocabulary agreeing with Advance.
func TestLargeEnum(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	var vals []string
	seen := map[string]bool{}
	for len(vals) < 2000 {
		b := make([]byte, 1+r.IntN(8))
		for i := range b {
			b[i] = "abcdeé"[r.IntN(6)]
		}
		if s := strings.ToValidUTF8(string(b), "x"); !seen[s] {
			seen[s] = true
			vals = append(vals, s)
		}
	}
	js, _ := json.Marshal(map[string]any{"enum": vals})
	g := mustSchema(t, string(js))
	for _, v := range vals {
		q, _ := json.Marshal(v)
		if g.Check(q) != nil {
			t.Fatalf("%s rejected", q)
		}
		if !seen[v+"a"] && g.Check(append(q[:len(q)-1:len(q)-1], 'a', '"')) == nil {
			t.Fatalf("%sa accepted", v)
		}
	}
	m := NewMatcher(g, testVocab(4, 400))
	walkRandom(t, m, r, 12, true)
}

func TestSchemaCache(t *testing.T) {
	a := mustSchema(t, `{"type": "object", "properties": {"cache-test": {"type": "integer"}}}`)
	b := mustSchema(t, `{"type":"object","properties":{"cache-test":{"type":"integer"}}}`)
	if a != b {
		t.Error("the same schema (up to whitespace) compiled twice")
	}
}

// TestNumberBoundsRandom compares the number grammar under random decimal
// bounds with exact arithmetic on random decimals.
func TestNumberBoundsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	dec := func(fracDigits int) string {
		s := fmt.Sprintf("%d", r.IntN(41)-20)
		if fracDigits > 0 {
			f := fmt.Sprintf("%0*d", fracDigits, r.IntN(int(math.Pow10(fracDigits))))
			s += "." + f
		}
		if s == "-0" || strings.HasPrefix(s, "-0.") && strings.Trim(s[3:], "0") == "" {
			s = s[1:]
		}
		if strings.HasPrefix(s, "-0") && s != "-0" && !strings.HasPrefix(s, "-0.") {
			s = s[1:]
		}
		return s
	}
	for range 150 {
		lo, hi := dec(r.IntN(4)), dec(r.IntN(4))
		loEx, hiEx := r.IntN(2) == 0, r.IntN(2) == 0
		kl, kh := "minimum", "maximum"
		if loEx {
			kl = "exclusiveMinimum"
		}
		if hiEx {
			kh = "exclusiveMaximum"
		}
		schema := fmt.Sprintf(`{"type":"number","%s":%s,"%s":%s}`, kl, lo, kh, hi)
		g, err := FromJSONSchema([]byte(schema))
		lr, _ := new(big.Rat).SetString(lo)
		hr, _ := new(big.Rat).SetString(hi)
		// The 16-digit cap is far away; -0 is never written.
		if err != nil {
			c := lr.Cmp(hr)
			if !errors.Is(err, ErrEmpty) || c < 0 || c == 0 && !loEx && !hiEx {
				t.Fatalf("%s: %v", schema, err)
			}
			continue
		}
		for range 60 {
			x := dec(r.IntN(5))
			if r.IntN(4) == 0 && strings.Contains(x, ".") {
				x += "0"
			}
			xr, _ := new(big.Rat).SetString(x)
			c1, c2 := xr.Cmp(lr), xr.Cmp(hr)
			want := (c1 > 0 || c1 == 0 && !loEx) && (c2 < 0 || c2 == 0 && !hiEx)
			if got := g.Check([]byte(x)) == nil; got != want {
				t.Fatalf("%s: %s accepted=%v, want %v", schema, x, got, want)
			}
		}
		// The same bounds on an integer.
		ischema := strings.Replace(schema, `"number"`, `"integer"`, 1)
		ig, err := FromJSONSchema([]byte(ischema))
		if err != nil && !errors.Is(err, ErrEmpty) {
			t.Fatalf("%s: %v", ischema, err)
		}
		for v := -22; v <= 22; v++ {
			xr := big.NewRat(int64(v), 1)
			c1, c2 := xr.Cmp(lr), xr.Cmp(hr)
			want := (c1 > 0 || c1 == 0 && !loEx) && (c2 < 0 || c2 == 0 && !hiEx)
			if got := err == nil && ig.Check([]byte(fmt.Sprint(v))) == nil; got != want {
				t.Fatalf("%s: %d accepted=%v, want %v (%v)", ischema, v, got, want, err)
			}
		}
	}
}
