package grammar

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

// testVocab is a byte-level vocabulary: every single byte, pieces cut from
// sample text (ASCII, multi-byte UTF-8, pieces ending mid-character), an
// empty control token and two end-of-generation tokens.
func testVocab(seed uint64, n int) *Vocab {
	r := rand.New(rand.NewPCG(seed, 1))
	var toks [][]byte
	for b := range 256 {
		toks = append(toks, []byte{byte(b)})
	}
	toks = append(toks, nil) // a control token: never allowed
	eos := int32(len(toks))
	toks = append(toks, []byte("</s>"))
	eot := int32(len(toks))
	toks = append(toks, nil)
	text := []byte(`{"name":"Zoë","age":42,"tags":["a","b\n"],"ok":true,"x":null,"v":-1.5e+10,"é😀":"日本語"} [1,2,3] 2024-02-29T12:34:56Z 123e4567-e89b-12d3-a456-426614174000 hello world`)
	for len(toks) < n {
		i := r.IntN(len(text))
		j := min(len(text), i+1+r.IntN(6))
		toks = append(toks, append([]byte(nil), text[i:j]...))
	}
	return NewVocab(toks, []int32{eos, eot})
}

// checkMask compares Mask with Advance for every token of v in s.
func checkMask(t *testing.T, m *Matcher, s State) {
	t.Helper()
	mask := make([]uint64, (m.v.Len()+63)/64)
	m.Mask(s, mask)
	n := 0
	for tok := range int32(m.v.Len()) {
		_, ok := m.Advance(s, tok)
		bit := mask[tok/64]>>(tok%64)&1 == 1
		if ok != bit {
			t.Fatalf("token %d %q: Advance ok=%v, mask bit %v", tok, m.v.Bytes(tok), ok, bit)
		}
		if ok {
			n++
		}
	}
	if f, ok := m.Forced(s); ok != (n == 1) || ok && mask[f/64]>>(f%64)&1 == 0 {
		t.Fatalf("Forced = %d, %v with %d tokens allowed", f, ok, n)
	}
	if (mask[m.v.eog[0]/64]>>(m.v.eog[0]%64)&1 == 1) != m.CanEnd(s) {
		t.Fatalf("EOG bit disagrees with CanEnd %v", m.CanEnd(s))
	}
	if want := m.CanEnd(s) && n == len(m.v.eog); m.MustEnd(s) != want {
		t.Fatalf("MustEnd %v with %d tokens allowed, CanEnd %v", m.MustEnd(s), n, m.CanEnd(s))
	}
}

// walkRandom follows allowed tokens chosen by r, checking the mask at each
// state, and returns the bytes written when an end-of-generation token was
// chosen (ok), or false when the walk ran out of steps.
func walkRandom(t *testing.T, m *Matcher, r *rand.Rand, steps int, check bool) ([]byte, bool) {
	t.Helper()
	s := m.Start()
	var out []byte
	mask := make([]uint64, (m.v.Len()+63)/64)
	var allowed []int32
	for range steps {
		if check {
			checkMask(t, m, s)
		}
		m.Mask(s, mask)
		allowed = allowed[:0]
		for tok := range int32(m.v.Len()) {
			if mask[tok/64]>>(tok%64)&1 == 1 {
				allowed = append(allowed, tok)
			}
		}
		if len(allowed) == 0 {
			t.Fatalf("no token allowed after %q", out)
		}
		tok := allowed[r.IntN(len(allowed))]
		if m.CanEnd(s) && r.IntN(4) == 0 {
			tok = m.v.eog[0]
		}
		ns, ok := m.Advance(s, tok)
		if !ok {
			t.Fatalf("allowed token %d %q refused after %q", tok, m.v.Bytes(tok), out)
		}
		if ns.Ended() {
			return out, true
		}
		out = append(out, m.v.Bytes(tok)...)
		s = ns
	}
	return out, false
}

func TestMaskAgreesWithAdvance(t *testing.T) {
	grammars := []string{
		`root ::= "ab"`,
		`root ::= [a-z]+ ("," [a-z]+)*`,
		`root ::= . . .`,
		`root ::= [é-ê😀-😎]+ "x"?`,
		`root ::= "{" ( "\"" [^"\\]* "\"" ":" [0-9]{1,3} )? "}"`,
		"root ::= obj\nobj ::= \"{\" (kv (\",\" kv)*)? \"}\"\nkv ::= \"\\\"\" [a-z]+ \"\\\":\" (obj | [0-9]+ | \"true\")",
		`root ::= [^\x00-\x7F]{2,5}`,
		`root ::= ("hello" | "hel" | "help") " " ("world" | "")`,
		`root ::= ("a"? ("b" | "")*)* "c"?`,
	}
	v := testVocab(1, 700)
	for gi, src := range grammars {
		g, err := ParseGBNF(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		m := NewMatcher(g, v)
		r := rand.New(rand.NewPCG(uint64(gi), 2))
		for range 3 {
			walkRandom(t, m, r, 30, true)
		}
	}
}

// TestMaskAgreesOnSchemas checks Mask against Advance for every token at
// the states of random walks under the property-test schemas, whose
// stacks run deeper than the frame window.
func TestMaskAgreesOnSchemas(t *testing.T) {
	v := testVocab(3, 500)
	for i, src := range propertySchemas {
		g := mustSchema(t, src)
		m := NewMatcher(g, v)
		r := rand.New(rand.NewPCG(uint64(i), 9))
		walkRandom(t, m, r, 40, true)
	}
}

// TestMaskAgreesLlama checks Mask against Advance on the llama2 vocabulary
// (SentencePiece pieces with a leading space, byte-fallback pieces).
func TestMaskAgreesLlama(t *testing.T) {
	v := llamaVocab(t)
	g := mustSchema(t, benchSchema)
	m := NewMatcher(g, v)
	for i, s := range walkStates(t, NewMatcher(g, v), 5) {
		if i%25 == 0 {
			checkMask(t, m, s)
		}
	}
}

// TestMatcherConcurrent runs sequences on one shared Matcher from several
// goroutines (run under -race in CI): each must see the masks a private
// Matcher computes.
func TestMatcherConcurrent(t *testing.T) {
	v := testVocab(5, 400)
	g := mustSchema(t, propertySchemas[7])
	shared := NewMatcher(g, v)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := NewMatcher(g, v)
			r := rand.New(rand.NewPCG(uint64(w), 1))
			a := make([]uint64, (v.Len()+63)/64)
			b := make([]uint64, len(a))
			for range 3 {
				s := shared.Start()
				for range 60 {
					shared.Mask(s, a)
					own.Mask(s, b)
					if !slices.Equal(a, b) {
						errs <- "shared and private masks differ"
						return
					}
					var allowed []int32
					for tok := range int32(v.Len()) {
						if a[tok/64]>>(tok%64)&1 == 1 && !v.IsEOG(tok) {
							allowed = append(allowed, tok)
						}
					}
					if len(allowed) == 0 {
						break
					}
					s, _ = shared.Advance(s, allowed[r.IntN(len(allowed))])
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestFromTokenizer checks the bytes of SentencePiece pieces: "▁" is a
// space, "<0x0A>" byte-fallback pieces their byte, BOS and EOS nothing,
// and EOS is the end of generation.
func TestFromTokenizer(t *testing.T) {
	v := llamaVocab(t)
	if v.Len() != 32000 {
		t.Fatalf("vocabulary of %d tokens", v.Len())
	}
	want := map[int32]string{1: "", 2: "", 13: "\n", 29871: " ", 450: " The", 0x3C + 3: "\x3c"}
	for id, w := range want {
		if got := string(v.Bytes(id)); got != w {
			t.Errorf("token %d: %q, want %q", id, got, w)
		}
	}
	if !v.IsEOG(2) || v.IsEOG(1) || v.IsEOG(13) {
		t.Errorf("EOG set %v", v.EOG())
	}
	// A byte-fallback piece ending mid-character is allowed inside a string
	// and a second one completes the character.
	m := NewMatcher(mustSchema(t, `{"type":"string"}`), v)
	s, ok := m.AdvanceBytes(m.Start(), []byte(`"`))
	if !ok {
		t.Fatal(`'"' refused`)
	}
	s, ok = m.Advance(s, 0xC3+3) // <0xC3>
	if !ok {
		t.Fatal("<0xC3> refused inside a string")
	}
	if _, ok := m.Advance(s, 0x41+3); ok { // <0x41>: 'A' cannot continue a character
		t.Fatal("<0x41> accepted after <0xC3>")
	}
	if _, ok := m.Advance(s, 0xA9+3); !ok { // <0xA9>: é
		t.Fatal("<0xA9> refused after <0xC3>")
	}
}

// TestApply: exactly the disallowed logits become -Inf, padded rows past
// the vocabulary too, the allowed ones keep their values.
func TestApply(t *testing.T) {
	v := testVocab(6, 300)
	m := NewMatcher(mustSchema(t, `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}`), v)
	s, ok := m.AdvanceBytes(m.Start(), []byte(`{"a":1`))
	if !ok {
		t.Fatal("prefix refused")
	}
	logits := make([]float32, v.Len()+70)
	for i := range logits {
		logits[i] = float32(i)
	}
	m.Apply(s, logits)
	for i, l := range logits {
		_, ok := m.Advance(s, int32(i))
		if i >= v.Len() {
			ok = false
		}
		if ok != !math.IsInf(float64(l), -1) || ok && l != float32(i) {
			t.Fatalf("token %d (%q): logit %v, allowed %v", i, v.Bytes(int32(min(i, v.Len()-1))), l, ok)
		}
	}
}

// TestWindowsShared checks the frame-window sharing of bounded
// repetitions and alike positions: masks still agree with Advance at every
// state of random walks through long bounded repetitions (of characters,
// of multi-character groups, of JSON strings with maxLength), the
// positions of a repetition deeper than any token can see share one window
// walk, and strings of different maxLength share their body's windows.
func TestWindowsShared(t *testing.T) {
	v := testVocab(11, 600) // tokens of at most 6 bytes: depth 7 and deeper look alike
	if v.maxStarts > 6 {
		t.Fatalf("test vocabulary: %d character starts in a token", v.maxStarts)
	}
	for i, src := range []string{
		`root ::= "\"" [a-z]{0,30} "\"" "," "\"" [a-z]{2,25} "\""`,
		`root ::= ("ab" | "é" | [0-9]){3,28} "x"`,
		`root ::= ([a-c] [a-c]?){0,20} "." [^"]{0,15}`,
	} {
		g, err := ParseGBNF(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		m := NewMatcher(g, v)
		r := rand.New(rand.NewPCG(uint64(i), 31))
		for range 4 {
			walkRandom(t, m, r, 40, true)
		}
	}
	schema := `{"type":"object","properties":{"a":{"type":"string","maxLength":30},"b":{"type":"string","maxLength":40},"c":{"type":"array","items":{"type":"string","minLength":2,"maxLength":35},"maxItems":3}},"required":["a","b","c"],"additionalProperties":false}`
	g := mustSchema(t, schema)
	m := NewMatcher(g, v)
	r := rand.New(rand.NewPCG(5, 31))
	for range 4 {
		walkRandom(t, m, r, 60, true)
	}

	// Inside "a" after 0..22 letters, at least 8 more fit: one walk for all
	// the deep positions.
	m = NewMatcher(g, v)
	s, ok := m.AdvanceBytes(m.Start(), []byte(`{"a":"`))
	if !ok {
		t.Fatal("prefix refused")
	}
	mask := make([]uint64, (v.Len()+63)/64)
	m.Mask(s, mask)
	first := m.nframes
	for i := range 22 {
		if s, ok = m.AdvanceBytes(s, []byte("q")); !ok {
			t.Fatalf("letter %d refused", i+1)
		}
		checkMask(t, m, s)
	}
	if m.nframes != first {
		t.Errorf("the deep positions of one string made %d window walks, want none after the first state's %d", m.nframes-first, first)
	}
	// The same depth inside "b" (maxLength 40) finds the body's window.
	deepA, _ := m.AdvanceBytes(m.Start(), []byte(`{"a":"q`))
	deepB, _ := m.AdvanceBytes(m.Start(), []byte(`{"a":"","b":"q`))
	keyA, keyB := map[[frameWindow]uint64]bool{}, map[[frameWindow]uint64]bool{}
	for _, n := range deepA.st {
		k, _, _, _ := m.windowOf(n)
		keyA[k] = true
	}
	shared := 0
	for _, n := range deepB.st {
		k, _, _, _ := m.windowOf(n)
		keyB[k] = true
		if keyA[k] {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("strings of maxLength 30 and 40 share no window: %v, %v", keyA, keyB)
	}
}
