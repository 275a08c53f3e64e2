package grammar

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// accepts reports whether the whole of s is a string of g's language.
func accepts(g *Grammar, s string) bool {
	st, ok := g.advanceBytes(g.start(), []byte(s))
	return ok && st.acc
}

// prefixOK reports whether s is a prefix of some string of g's language.
func prefixOK(g *Grammar, s string) bool {
	_, ok := g.advanceBytes(g.start(), []byte(s))
	return ok
}

func TestGBNFLanguage(t *testing.T) {
	cases := []struct {
		name, src string
		yes, no   []string
	}{
		{"literal", `root ::= "ab"`, []string{"ab"}, []string{"", "a", "abc", "b"}},
		{"alternation", `root ::= "a" | "bc" | ""`, []string{"a", "bc", ""}, []string{"b", "ab"}},
		{"groups", `root ::= ("a" | "b") ("c" | "d")`, []string{"ac", "bd"}, []string{"a", "cd"}},
		{"star", `root ::= "a"*`, []string{"", "a", "aaaa"}, []string{"b"}},
		{"plus", `root ::= "a"+ "b"`, []string{"ab", "aab"}, []string{"b", "a"}},
		{"optional", `root ::= "a"? "b"`, []string{"ab", "b"}, []string{"aab"}},
		{"exact", `root ::= [0-9]{3}`, []string{"123"}, []string{"12", "1234"}},
		{"at least", `root ::= [0-9]{2,}`, []string{"12", "12345"}, []string{"1"}},
		{"between", `root ::= [0-9]{1,3}`, []string{"1", "123"}, []string{"", "1234"}},
		{"zero to n", `root ::= "x"{0,2}`, []string{"", "x", "xx"}, []string{"xxx"}},
		{"class ranges", `root ::= [a-cx-z_]+`, []string{"abc_xyz"}, []string{"d", "w"}},
		{"negated", `root ::= [^a-z]+`, []string{"ABC", "é"}, []string{"a", "ABc"}},
		{"any", `root ::= . .`, []string{"ab", "éü", "😀x"}, []string{"a", "abc"}},
		{"escapes", `root ::= "\x41\u00e9\U0001F600\t\n\r\\\""`, []string{"Aé😀\t\n\r\\\""}, []string{"A"}},
		{"class escapes", `root ::= [\]\-\\]+`, []string{"]-\\"}, []string{"a"}},
		{"rules", "root ::= greet \" \" name\ngreet ::= \"hi\" | \"hello\"\nname ::= [a-z]+", []string{"hi bob", "hello al"}, []string{"hi", "hey bob"}},
		{"comments", "# a comment\nroot ::= \"a\" # trailing\n  # more\n", []string{"a"}, []string{""}},
		{"multiline group", "root ::= (\n  \"a\" |\n  \"b\"\n)", []string{"a", "b"}, []string{"ab"}},
		{"continuation after bar", "root ::= \"a\" |\n  \"b\"", []string{"a", "b"}, []string{""}},
		{"right recursion", "root ::= \"(\" root \")\" | \"\"", []string{"", "()", "((()))"}, []string{"(()", ")"}},
		{"nullable repetition", `root ::= ("a"? "b"?)* "c"`, []string{"c", "abc", "bbac"}, []string{"", "ca"}},
		{"cycle through last positions", "root ::= x\nx ::= y | \"a\"\ny ::= x | \"b\"", []string{"a", "b"}, []string{"", "ab"}},
		{"unicode class", `root ::= [α-ω]+`, []string{"αβγ"}, []string{"a", "Α"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := ParseGBNF(c.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.yes {
				if !accepts(g, s) {
					t.Errorf("%q rejected", s)
				}
			}
			for _, s := range c.no {
				if accepts(g, s) {
					t.Errorf("%q accepted", s)
				}
			}
		})
	}
}

func TestGBNFErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{``, "empty grammar"},
		{`root ::= "a`, `line 1 col 12: unterminated string literal`},
		{"root ::= \"a\"\nx ::= [a-", `line 2 col 10: unterminated character class`},
		{`root ::= ("a"`, `expected ')'`},
		{`root ::= a`, `undefined rule "a"`},
		{`a ::= "x"`, `no "root" rule`},
		{`root ::= root "a" | "b"`, `rule "root" is left-recursive`},
		{"root ::= x \"a\"\nx ::= y\ny ::= root | \"\"", `left-recursive`},
		{`root ::= "a"{3,2}`, `expected max >= min`},
		{`root ::= "a"{99999}`, `too large`},
		{`root ::= [z-a]`, `backwards`},
		{`root ::= "\q"`, `unknown escape \q`},
		{`root ::= "\x4"`, `expected 2 hex digits`},
		{`root ::= *`, `expected an item before the repetition operator`},
		{`root ::= "a" )`, `unexpected ')'`},
		{`root ::= "a"` + "\nroot ::= \"b\"", `defined twice`},
		{`root ::= x` + "\nx ::= x \"a\" | \"b\"", `rule "x" is left-recursive`},
		{"root ::= \"a\" root", `derives no finite string`},
		{`root ::= [^\x00-\U0010FFFF]`, `derives no finite string`},
		{`root = "a"`, `line 1 col 6: expected ::= after rule name "root", found '='`},
		{`root ::= <[1]>`, `token references`},
	}
	for _, c := range cases {
		_, err := ParseGBNF(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.src, err, c.want)
		}
	}
	_, err := ParseGBNF("root ::= \"a\" root")
	if !errors.Is(err, ErrEmpty) {
		t.Errorf("empty language: %v does not wrap ErrEmpty", err)
	}
}

// TestUTF8Prefixes checks byte-level matching of multi-byte characters:
// every prefix of a character in the class is viable, nothing else is.
func TestUTF8Prefixes(t *testing.T) {
	g, err := ParseGBNF(`root ::= [é-ê] | [\U0001F600-\U0001F64F]`)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"\xc3", "\xc3\xa9", "\xc3\xaa", "\xf0", "\xf0\x9f", "\xf0\x9f\x98", "\xf0\x9f\x98\x80"} {
		if !prefixOK(g, s) {
			t.Errorf("% x: rejected as a prefix", s)
		}
	}
	for _, s := range []string{"\xc3\xa8", "\xc4", "\xe0", "\xf0\x9f\x97", "\xf0\x9f\x9a", "\xc0\x80", "\x80", "\xff"} {
		if prefixOK(g, s) {
			t.Errorf("% x: accepted as a prefix", s)
		}
	}
	any, _ := ParseGBNF(`root ::= .`)
	// Surrogates and overlong forms are never characters.
	for _, s := range []string{"\xed\xa0", "\xe0\x80", "\xf4\x90", "\xc1"} {
		if prefixOK(any, s) {
			t.Errorf("% x: accepted by '.'", s)
		}
	}
	if !accepts(any, "\xed\x9f\xbf") || !accepts(any, "\xf4\x8f\xbf\xbf") {
		t.Error("U+D7FF or U+10FFFF rejected by '.'")
	}
}

func TestCheck(t *testing.T) {
	g := mustSchema(t, `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`)
	if err := g.Check([]byte(`{"a":12}`)); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ text, want string }{
		{`{"a":x}`, `byte 5: found 'x', expected one of '-', '0'..'9'`},
		{`{"a":1`, `byte 6: found end of input, expected one of '0'..'9', '}'`},
		{`{"a":1}x`, `byte 7: found 'x', expected end of input`},
		{`{"b"`, `byte 2: found 'b', expected 'a'`},
	}
	for _, c := range cases {
		err := g.Check([]byte(c.text))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.text, err, c.want)
		}
	}
}

// TestStringRoundTrip: a grammar's printed form (what --print-grammar
// shows, helper rules included) parses again to the same language.
func TestStringRoundTrip(t *testing.T) {
	v := testVocab(2, 400)
	srcs := []string{`root ::= [a-c\-^\]]+ ("x" | "y"){2,3} .?`, "root ::= x-1 x-2\nx-1 ::= \"a\"*\nx-2 ::= (\"b\" | [^b])?"}
	for _, s := range propertySchemas {
		g := mustSchema(t, s)
		srcs = append(srcs, g.String())
	}
	for i, src := range srcs {
		g, err := ParseGBNF(src)
		if err != nil {
			t.Fatalf("%d: %v", i, err)
		}
		g2, err := ParseGBNF(g.String())
		if err != nil {
			t.Fatalf("%d: printed form does not parse: %v\n%s", i, err, g)
		}
		m, m2 := NewMatcher(g, v), NewMatcher(g2, v)
		r := rand.New(rand.NewPCG(uint64(i), 4))
		for range 5 {
			for _, pair := range [][2]*Matcher{{m, m2}, {m2, m}} {
				out, ok := randomAccepted(pair[0], r, 300)
				if ok && pair[1].g.Check(out) != nil {
					t.Fatalf("%d: %q accepted by one form, not the other", i, out)
				}
			}
		}
	}
}
