package grammar

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestProcessorMasks checks the processor against the matcher along random
// walks with branches (draft-tree paths, beams): every processed row is
// -Inf exactly where Advance from the start refuses the token, the logits
// of allowed tokens are untouched, and the trie holds one node per distinct
// prefix asked about, so a path is advanced over once, not from the start
// each call.
func TestProcessorMasks(t *testing.T) {
	v := testVocab(3, 500)
	m := NewMatcher(mustSchema(t, propertySchemas[7]), v)
	const prompt = 3
	p := NewProcessor(m, ProcessorOptions{Prompt: prompt})
	r := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, v.Len()+5) // a padded row
	var paths [][]int32
	distinct := map[string]bool{}
	for walk := range 30 {
		// Start from a prefix of an earlier path, as a tree's branch does.
		hist := []int32{7, 8, 9}
		if len(paths) > 0 {
			base := paths[r.IntN(len(paths))]
			hist = slices.Clone(base[:prompt+r.IntN(len(base)-prompt+1)])
		}
		for step := 0; step < 25; step++ {
			for i := range logits {
				logits[i] = float32(i % 7)
			}
			if err := p.Process(logits, hist); err != nil {
				t.Fatalf("walk %d step %d: %v", walk, step, err)
			}
			distinct[string(tokBytes(hist[prompt:]))] = true
			s := m.Start()
			for _, tok := range hist[prompt:] {
				var ok bool
				if s, ok = m.Advance(s, tok); !ok {
					t.Fatalf("walk %d: the history left the grammar at %d", walk, tok)
				}
			}
			var allowed []int32
			for tok := range int32(len(logits)) {
				_, ok := m.Advance(s, tok)
				if int(tok) >= v.Len() {
					ok = false
				}
				masked := math.IsInf(float64(logits[tok]), -1)
				if ok == masked {
					t.Fatalf("walk %d: token %d %q: allowed %v, masked %v", walk, tok, v.Bytes(min(tok, int32(v.Len()-1))), ok, masked)
				}
				if ok {
					if logits[tok] != float32(int(tok)%7) {
						t.Fatalf("allowed token %d changed: %v", tok, logits[tok])
					}
					if !v.IsEOG(tok) {
						allowed = append(allowed, tok)
					}
				}
			}
			if len(allowed) == 0 {
				break
			}
			hist = append(hist, allowed[r.IntN(len(allowed))])
		}
		paths = append(paths, hist)
	}
	if p.nodes != len(distinct) {
		t.Errorf("the trie has %d nodes for %d distinct prefixes", p.nodes, len(distinct))
	}
}

func tokBytes(toks []int32) []byte {
	var b []byte
	for _, t := range toks {
		b = append(b, byte(t), byte(t>>8))
	}
	return b
}

// TestProcessorEnds: after a complete value only end tokens are allowed
// (the vocabulary's EOG and the request's own end tokens), a history off
// the grammar is an error naming the token, and a grammar the vocabulary
// cannot write is ErrNoToken, not a row of -Inf.
func TestProcessorEnds(t *testing.T) {
	toks := [][]byte{[]byte("a"), []byte("b"), []byte("</s>"), nil, []byte("<end>")}
	v := NewVocab(toks, []int32{2})
	g, err := ParseGBNF(`root ::= "ab"`)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProcessor(NewMatcher(g, v), ProcessorOptions{Prompt: 1, Ends: []int32{4}})
	row := func(hist ...int32) ([]float32, error) {
		l := []float32{1, 2, 3, 4, 5}
		return l, p.Process(l, hist)
	}
	inf := float32(math.Inf(-1))
	l, err := row(9)
	if err != nil || !slices.Equal(l, []float32{1, inf, inf, inf, inf}) {
		t.Errorf("start: %v, %v", l, err)
	}
	l, err = row(9, 0, 1)
	if err != nil || !slices.Equal(l, []float32{inf, inf, 3, inf, 5}) {
		t.Errorf("complete: %v, %v; want only the end tokens", l, err)
	}
	if tok, ok := p.Forced([]int32{9, 0}); !ok || tok != 1 {
		t.Errorf("Forced after \"a\" = %d, %v; want 1 (\"b\")", tok, ok)
	}
	if _, ok := p.Forced([]int32{9, 0, 1}); ok {
		t.Errorf("Forced where EOG and the request's own end token are both allowed")
	}
	if ok, err := p.Allows([]int32{9, 0, 1}, 4); !ok || err != nil {
		t.Errorf("Allows(<end>) after the value = %v, %v", ok, err)
	}
	if ok, _ := p.Allows([]int32{9, 0}, 4); ok {
		t.Errorf("Allows(<end>) before the value is complete")
	}
	if _, err := row(9, 1); err == nil {
		t.Errorf("a history off the grammar was processed")
	}
	g2, err := ParseGBNF(`root ::= "c"`)
	if err != nil {
		t.Fatal(err)
	}
	p2 := NewProcessor(NewMatcher(g2, v), ProcessorOptions{Prompt: 1})
	if err := p2.Process([]float32{1, 2, 3, 4, 5}, []int32{9}); !errors.Is(err, ErrNoToken) {
		t.Errorf("a grammar the vocabulary cannot write: %v, want ErrNoToken", err)
	}
}

// BenchmarkProcessor is the per-row cost of the processor along one
// growing output of 64 tokens (masks cached in the matcher): "trie" keeps
// the processor, so each row advances over one new token; "from-start" is
// what the trie saves, a new processor per row advancing over the whole
// output (a string array, so every walk runs its 64 tokens). ns/row times
// Process alone.
func BenchmarkProcessor(b *testing.B) {
	v := testVocab(7, 32000)
	m := NewMatcher(mustSchema(b, `{"type":"array","items":{"type":"string"}}`), v)
	for _, fresh := range []bool{false, true} {
		name := "trie"
		if fresh {
			name = "from-start"
		}
		b.Run(name, func(b *testing.B) {
			logits := make([]float32, v.Len())
			rows, spent := 0, time.Duration(0)
			for b.Loop() {
				r := rand.New(rand.NewPCG(1, 1))
				p := NewProcessor(m, ProcessorOptions{Prompt: 1})
				hist := []int32{0}
				for range 64 {
					if fresh {
						p = NewProcessor(m, ProcessorOptions{Prompt: 1})
					}
					t0 := time.Now()
					if err := p.Process(logits, hist); err != nil {
						b.Fatal(err)
					}
					spent += time.Since(t0)
					rows++
					var allowed []int32
					for tok, x := range logits {
						if !math.IsInf(float64(x), -1) && !v.IsEOG(int32(tok)) {
							allowed = append(allowed, int32(tok))
						}
						logits[tok] = 0
					}
					if len(allowed) == 0 {
						break
					}
					hist = append(hist, allowed[r.IntN(len(allowed))])
				}
			}
			b.ReportMetric(float64(spent.Nanoseconds())/float64(rows), "ns/row")
			b.ReportMetric(float64(rows)/float64(b.N), "rows/op")
		})
	}
}

// BenchmarkProcessorState is what the trie saves: the State for each
// position of a 256-token output, found by the processor (one Advance for
// the new token) or by advancing from the start each time.
func BenchmarkProcessorState(b *testing.B) {
	v := testVocab(7, 32000)
	m := NewMatcher(mustSchema(b, `{"type":"array","items":{"type":"string"}}`), v)
	// A fixed output: walk the grammar, taking the first allowed token that
	// is not a closing quote or bracket, so the string runs on.
	hist := []int32{0}
	s := m.Start()
	opened := false
	for len(hist) < 257 {
		var next int32 = -1
		for tok := range int32(v.Len()) {
			bb := v.Bytes(tok)
			if len(bb) == 0 || bytes.ContainsAny(bb, `]\`) || opened && bytes.ContainsRune(bb, '"') {
				continue
			}
			if ns, ok := m.Advance(s, tok); ok {
				s, next = ns, tok
				opened = opened || bytes.ContainsRune(bb, '"')
				break
			}
		}
		if next < 0 {
			b.Fatalf("no continuation after %d tokens", len(hist))
		}
		hist = append(hist, next)
	}
	b.Run("trie", func(b *testing.B) {
		for b.Loop() {
			p := NewProcessor(m, ProcessorOptions{Prompt: 1})
			for k := 1; k <= len(hist); k++ {
				if _, err := p.State(hist[:k]); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hist)), "ns/position")
	})
	b.Run("from-start", func(b *testing.B) {
		for b.Loop() {
			for k := 1; k <= len(hist); k++ {
				s := m.Start()
				for _, t := range hist[1:k] {
					s, _ = m.Advance(s, t)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(hist)), "ns/position")
	})
}

// The cache shares one matcher per spec and drops the least recently used
// past maxMatchers.
func TestCacheMatchers(t *testing.T) {
	c := &Cache{m: map[string]*cached{}}
	c.once.Do(func() { c.v = testVocab(1, 300) })
	spec := func(i int) Spec { return Spec{GBNF: fmt.Sprintf(`root ::= "%d"`, i)} }
	first, err := c.Matcher(spec(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < maxMatchers+3; i++ {
		if _, err := c.Matcher(spec(i)); err != nil {
			t.Fatal(err)
		}
		if again, _ := c.Matcher(spec(0)); again != first {
			t.Fatalf("spec 0 was dropped while in use (after %d others)", i)
		}
	}
	if len(c.m) != maxMatchers {
		t.Errorf("%d matchers cached, want %d", len(c.m), maxMatchers)
	}
	if _, err := c.Matcher(Spec{GBNF: "root ::= [a-"}); err == nil {
		t.Errorf("a bad grammar compiled")
	}
	if _, err := c.Matcher(Spec{}); err == nil {
		t.Errorf("an empty spec compiled")
	}
}
