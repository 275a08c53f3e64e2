package tokenizer

import (
	"strings"
	"sync"
	"testing"
)

// benchParagraph is ordinary prose with a little code, digits and non-ASCII,
// about 1 KB; benchText repeats it to n bytes. Neither tokenizer caches
// words, so repetition does not flatter the numbers.
const benchParagraph = `Once upon a time, in a small village at the edge of a great forest, there lived a girl named Lily who loved to build things. Every morning she gathered sticks, stones and string, and by the evening she had made a bridge, a boat or a tower taller than her little brother Tom. "What will you build tomorrow?" asked her mother. Lily thought for a while and said, "A machine that turns words into numbers and numbers back into words." Her mother laughed, but Lily was serious. She wrote: for i := 0; i < len(text); i++ { ids = append(ids, lookup[text[i]]) } and then crossed it out, because 3.14159 things could go wrong. The café down the street sold crêpes for €4.50, and the old sign above the door read 「いらっしゃいませ」 in memory of a traveller who had stayed for a year. Tom drew a llama 🦙 on every page of her notebook. In the end the machine worked: it was slow at first, then fast, and finally, after 1,024 careful changes, it was correct.
`

func benchText(n int) string {
	return strings.Repeat(benchParagraph, n/len(benchParagraph)+1)[:n]
}

func BenchmarkEncode(b *testing.B) {
	text := benchText(10 << 10)
	cases := []struct {
		name string
		load func(testing.TB) Tokenizer
	}{
		{"llama2-32000", func(tb testing.TB) Tokenizer { return loadLlama2Tok(tb) }},
		{"tok512", func(tb testing.TB) Tokenizer { return loadTok512(tb) }},
		{"gpt2-50257", func(tb testing.TB) Tokenizer { return loadGGUF(tb, "llama-cpp-vocab/ggml-vocab-gpt-2.gguf") }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			tok := c.load(b)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			var n int
			for b.Loop() {
				n = len(tok.Encode(text, EncodeOptions{BOS: true}))
			}
			b.ReportMetric(float64(n), "tokens/op")
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tok := loadLlama2Tok(b)
	text := benchText(10 << 10)
	ids := tok.Encode(text, EncodeOptions{BOS: true})
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_ = tok.Decode(ids)
	}
}

// TestLongInputMatchesRunc checks the heap-based merge against run.c's
// quadratic one on a longer text (2,000 bytes; 600 with -short), where a
// stale-pair bug would show.
func TestLongInputMatchesRunc(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 600
	}
	tok := loadLlama2Tok(t)
	text := benchText(n)
	text = text[:len(strings.ToValidUTF8(text, ""))]
	if got, want := tok.Encode(text, EncodeOptions{}), runcEncode(tok, text); !equalIDs(got, want) {
		t.Errorf("Encode of %d bytes differs from run.c:\n got %v\nwant %v", len(text), got, want)
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestConcurrentEncode: one tokenizer serves many goroutines (run with -race).
func TestConcurrentEncode(t *testing.T) {
	toks := []Tokenizer{synthetic(t, " ", "a", " a"), syntheticBPE(t)}
	text := benchText(3000)
	for _, tok := range toks {
		want := tok.Encode(text, EncodeOptions{BOS: true})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 5 {
					if got := tok.Encode(text, EncodeOptions{BOS: true}); !equalIDs(got, want) {
						t.Error("concurrent Encode differs")
						return
					}
				}
			})
		}
		wg.Wait()
	}
}
