package grammar

import (
	"errors"
	"testing"
)

// FuzzParseGBNF: any input either parses or fails with an error; a parsed
// grammar's start state is alive, and its printed form parses again.
func FuzzParseGBNF(f *testing.F) {
	for _, s := range []string{
		`root ::= "a"`, `root ::= [a-z]+ ("," [a-z]+)*`, "root ::= x\nx ::= \"(\" x \")\" | \"\"",
		`root ::= [^\x00-\x1F]{2,5} . "\u00e9"`, `root ::= ("a"?)*`, `root ::= a`, "# c\nroot ::= \"a\" # c",
		`root ::= "a"{3,}`, `root ::= [\]-]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		g, err := ParseGBNF(src)
		if err != nil {
			return
		}
		if g.start().Dead() {
			t.Fatalf("%q: start state is dead", src)
		}
		// Matching terminates (cycles through nullable rules included) and
		// a text's prefixes stay alive up to where Check stops.
		text := []byte(src)[:min(len(src), 32)]
		err = g.Check(text)
		var ce *CheckError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("%q: Check: %v", src, err)
		}
	})
}

// FuzzFromJSONSchema: any input compiles or fails with an error, never a
// panic; what compiles has a live start state.
func FuzzFromJSONSchema(f *testing.F) {
	for _, s := range propertySchemas {
		f.Add(s)
	}
	f.Add(`{"not":{}}`)
	f.Add(`{"$ref":"#"}`)
	f.Add(`{"type":"string","pattern":"^(a|b)*[^c]{2}$"}`)
	f.Fuzz(func(t *testing.T, src string) {
		g, err := FromJSONSchema([]byte(src))
		if err != nil {
			var se *SchemaError
			if errors.As(err, &se) && se.Pointer == "" {
				t.Fatalf("schema error without a pointer: %v", err)
			}
			return
		}
		if g.start().Dead() {
			t.Fatalf("%q: start state is dead", src)
		}
	})
}

// FuzzMatcher feeds random bytes as tokens: Advance never panics, and at
// every state reached the mask agrees with Advance on every token.
func FuzzMatcher(f *testing.F) {
	f.Add(0, []byte(`{"name":"x","age":3}`))
	f.Add(3, []byte("\xf0\x9f\x98"))
	f.Add(7, []byte(`[1,2,"a\u00e9"]`))
	v := testVocab(11, 320)
	var ms []*Matcher
	for _, src := range []string{
		propertySchemas[0], propertySchemas[7], propertySchemas[16], propertySchemas[20], `true`,
		`{"type":"object","properties":{"a":{"type":"number","minimum":-3,"maximum":7}}}`,
		`{"type":"array","items":{"type":"string","format":"date"}}`,
		// Bounded repetitions deeper than the vocabulary's tokens reach:
		// their frame windows are shared (Matcher.canonPos).
		`{"type":"object","properties":{"a":{"type":"string","maxLength":30},"b":{"type":"array","items":{"type":"string","minLength":1,"maxLength":25},"maxItems":3}},"required":["a","b"]}`,
	} {
		g, err := FromJSONSchema([]byte(src))
		if err != nil {
			f.Fatal(err)
		}
		ms = append(ms, NewMatcher(g, v))
	}
	for _, src := range []string{`root ::= ("a"? ("b" | "")*)* "c"?`, `root ::= [^"]* "\"" ([é-ü] | "😀")+`, `root ::= ("ab" | [c-eé]){2,26} ("," [0-9]{1,18})*`} {
		g, err := ParseGBNF(src)
		if err != nil {
			f.Fatal(err)
		}
		ms = append(ms, NewMatcher(g, v))
	}
	f.Fuzz(func(t *testing.T, which int, data []byte) {
		m := ms[uint(which)%uint(len(ms))]
		s := m.Start()
		for i := 0; i < len(data) && i < 64; i++ {
			tok := int32(data[i]) // the single-byte tokens
			if i+1 < len(data) && data[i]&0x80 != 0 {
				tok = int32(256 + (int(data[i+1])<<8|int(data[i]))%(v.Len()-256))
				i++
			}
			checkMask(t, m, s)
			ns, ok := m.Advance(s, tok)
			if !ok {
				continue
			}
			s = ns
			if s.Ended() {
				return
			}
		}
	})
}
