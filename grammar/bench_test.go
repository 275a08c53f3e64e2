package grammar

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tokenizer"
)

// benchSchema is the JSON-schema grammar of the mask benchmarks: nested
// objects, arrays, enums, bounded integers, strings and a date.
const benchSchema = `{"type":"object","properties":{
 "id":{"type":"integer","minimum":1,"maximum":100000},
 "name":{"type":"string","maxLength":40},
 "email":{"type":"string"},
 "status":{"enum":["active","inactive","pending"]},
 "score":{"type":"number","minimum":0,"maximum":100},
 "joined":{"type":"string","format":"date"},
 "tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":5},
 "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},"required":["street","city","zip"],"additionalProperties":false},
 "verified":{"type":"boolean"},
 "notes":{"type":["string","null"]}},
 "required":["id","name","email","status","score","joined","tags","address","verified","notes"],"additionalProperties":false}`

// llamaVocab is the llama2 32000-token vocabulary, or a skip.
func llamaVocab(tb testing.TB) *Vocab {
	tb.Helper()
	tok, err := tokenizer.LoadLlama2C(testutil.Model(tb, "llama2-tokenizer/tokenizer.bin"), 0)
	if err != nil {
		tb.Fatal(err)
	}
	return FromTokenizer(tok)
}

// synthVocab is a byte-level vocabulary of n tokens in the manner of a
// 128k BPE vocabulary: the 256 bytes, then pieces of English-like words
// with and without a leading space, punctuation runs, digits, and
// multi-byte characters; seeded, so every run builds the same one.
func synthVocab(n int) *Vocab {
	r := rand.New(rand.NewPCG(128, 0))
	seen := map[string]bool{}
	var toks [][]byte
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			toks = append(toks, []byte(s))
		}
	}
	for b := range 256 {
		add(string([]byte{byte(b)}))
	}
	const letters = "etaoinshrdlcumwfgypbvkjxqz"
	punct := []string{`"`, `":`, `",`, `{"`, `"}`, `":"`, `"]`, `["`, `},`, `},{"`, `":[`, `],"`, `:`, `,`, `{`, `}`, `[`, `]`, `\n`, `\"`, ` `, `  `, "\n", "\t"}
	for _, p := range punct {
		add(p)
	}
	multi := []string{"é", "ü", "ñ", "日本", "语", "😀", "—", "’", "\xe2\x80", "\xf0\x9f"}
	for len(toks) < n-1 {
		switch k := r.IntN(10); {
		case k < 7:
			l := 1 + r.IntN(9)
			w := make([]byte, 0, l+1)
			if r.IntN(2) == 0 {
				w = append(w, ' ')
			}
			for range l {
				w = append(w, letters[min(r.IntN(26), r.IntN(26))])
			}
			if r.IntN(8) == 0 {
				w[len(w)-1] -= 'a' - 'A'
			}
			add(string(w))
		case k < 8:
			add(fmt.Sprint(r.IntN(1000)))
		case k < 9:
			add(multi[r.IntN(len(multi))] + string(letters[r.IntN(26)]))
		default:
			add(punct[r.IntN(len(punct))] + punct[r.IntN(len(punct))])
		}
	}
	toks = append(toks, nil) // EOS: no bytes
	return NewVocab(toks, []int32{int32(len(toks) - 1)})
}

// walkStates returns the states of a seeded random walk of m (through
// tokens the mask allows) that completes: the states a constrained
// generation passes through.
func walkStates(tb testing.TB, m *Matcher, seed uint64) []State {
	for s := seed; s < seed+50; s++ {
		r := rand.New(rand.NewPCG(s, 3))
		st := m.Start()
		states := []State{st}
		mask := make([]uint64, (m.v.Len()+63)/64)
		var allowed []int32
		for range 2000 {
			if m.CanEnd(st) {
				return states
			}
			m.Mask(st, mask)
			allowed = allowed[:0]
			for t := range int32(m.v.Len()) {
				if mask[t/64]>>(t%64)&1 == 1 && !m.v.IsEOG(t) {
					allowed = append(allowed, t)
				}
			}
			// Prefer longer tokens half the time, as a model would, and
			// close a value now and then (strings would otherwise run on
			// for hundreds of tokens).
			tok := allowed[r.IntN(len(allowed))]
			if r.IntN(5) == 0 {
				var closing []int32
				for _, c := range allowed {
					if bytes.ContainsAny(m.v.Bytes(c), `"]},`) {
						closing = append(closing, c)
					}
				}
				if len(closing) > 0 {
					tok = closing[r.IntN(len(closing))]
				}
			} else if r.IntN(2) == 0 {
				for range 8 {
					c := allowed[r.IntN(len(allowed))]
					if len(m.v.Bytes(c)) > len(m.v.Bytes(tok)) {
						tok = c
					}
				}
			}
			var ok bool
			if st, ok = m.Advance(st, tok); !ok {
				tb.Fatalf("allowed token refused")
			}
			states = append(states, st)
		}
	}
	tb.Fatal("no walk completed")
	return nil
}

// maskTimes times Mask at every state of a generation: cold with a new
// matcher per state (no cache at all), first with one new matcher over the
// generation (the first request under a schema), steady with a matcher
// that has served four other generations under the schema. Each is timed
// by the wall clock and by the thread's CPU time (nil where unavailable).
func maskTimes(tb testing.TB, g *Grammar, v *Vocab) (cold, first, steady, coldCPU, firstCPU, steadyCPU []time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, cpuOK := threadCPU()
	states := walkStates(tb, NewMatcher(g, v), 1)
	mask := make([]uint64, (v.Len()+63)/64)
	timed := func(m *Matcher, s State, wall, cpu *[]time.Duration) {
		c0, _ := threadCPU()
		t0 := time.Now()
		m.Mask(s, mask)
		*wall = append(*wall, time.Since(t0))
		if cpuOK {
			c1, _ := threadCPU()
			*cpu = append(*cpu, c1-c0)
		}
	}
	for _, s := range states[:min(len(states), 100)] {
		timed(NewMatcher(g, v), s, &cold, &coldCPU)
	}
	m := NewMatcher(g, v)
	for _, s := range states {
		timed(m, s, &first, &firstCPU)
	}
	m = NewMatcher(g, v)
	for seed := uint64(100); seed < 104; seed++ {
		walkStates(tb, m, seed)
	}
	for _, s := range states {
		timed(m, s, &steady, &steadyCPU)
	}
	return cold, first, steady, coldCPU, firstCPU, steadyCPU
}

func pct(d []time.Duration, p float64) time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d[int(p*float64(len(d)-1))]
}

func µs(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

func benchMask(b *testing.B, v *Vocab) {
	g, err := FromJSONSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	var cold, first, steady, coldCPU, firstCPU, steadyCPU []time.Duration
	for b.Loop() {
		cold, first, steady, coldCPU, firstCPU, steadyCPU = maskTimes(b, g, v)
	}
	b.ReportMetric(µs(pct(cold, 0.5)), "cold-p50-µs")
	b.ReportMetric(µs(pct(first, 0.5)), "first-p50-µs")
	b.ReportMetric(µs(pct(first, 0.9)), "first-p90-µs")
	b.ReportMetric(µs(pct(steady, 0.5)), "steady-p50-µs")
	b.ReportMetric(µs(pct(steady, 0.9)), "steady-p90-µs")
	if len(firstCPU) > 0 {
		// By the thread's CPU time: what the masks cost whatever else runs.
		b.ReportMetric(µs(pct(coldCPU, 0.5)), "cold-p50-cpu-µs")
		b.ReportMetric(µs(pct(firstCPU, 0.5)), "first-p50-cpu-µs")
		b.ReportMetric(µs(sum(firstCPU))/1e3, "first-total-cpu-ms")
		b.ReportMetric(µs(pct(steadyCPU, 0.5)), "steady-p50-cpu-µs")
	}
	b.ReportMetric(float64(len(first)), "tokens")
}

func sum(d []time.Duration) (s time.Duration) {
	for _, x := range d {
		s += x
	}
	return s
}

// BenchmarkMask32k is the mask time per token of a generation under
// benchSchema with the llama2 vocabulary.
func BenchmarkMask32k(b *testing.B) { benchMask(b, llamaVocab(b)) }

// BenchmarkMask128k is the same on a synthetic 128k byte-level vocabulary.
func BenchmarkMask128k(b *testing.B) { benchMask(b, synthVocab(128000)) }

// BenchmarkCompile30 compiles a 30-property schema (no cache): the
// schema to grammar to matcher-ready form.
func BenchmarkCompile30(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"type":"object","properties":{`)
	kinds := []string{`{"type":"string","maxLength":30}`, `{"type":"integer","minimum":0,"maximum":5000}`, `{"enum":["a","b","c"]}`, `{"type":"array","items":{"type":"number"},"maxItems":4}`, `{"type":"boolean"}`, `{"type":"string","format":"date-time"}`}
	var req []string
	for i := range 30 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"field_%d":%s`, i, kinds[i%len(kinds)])
		if i%3 != 0 {
			req = append(req, fmt.Sprintf(`"field_%d"`, i))
		}
	}
	fmt.Fprintf(&sb, `},"required":[%s],"additionalProperties":false}`, strings.Join(req, ","))
	v, err := decodeOrdered([]byte(sb.String()))
	if err != nil {
		b.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0, cpuOK := threadCPU()
	for b.Loop() {
		if _, err := compileSchema(v); err != nil {
			b.Fatal(err)
		}
	}
	if c1, _ := threadCPU(); cpuOK {
		// By the thread's CPU time, as the mask benchmarks.
		b.ReportMetric(float64((c1-c0).Nanoseconds())/1e6/float64(b.N), "cpu-ms/op")
	}
}

// BenchmarkAdvance is the cost of Advance per token along a generation
// (what every constrained sequence pays per accepted token).
func BenchmarkAdvance(b *testing.B) {
	v := llamaVocab(b)
	g, err := FromJSONSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	m := NewMatcher(g, v)
	states := walkStates(b, m, 1)
	// Recover the tokens between consecutive states.
	var toks []int32
	s := m.Start()
	for _, next := range states[1:] {
		for t := range int32(v.Len()) {
			if ns, ok := m.Advance(s, t); ok && ns.equal(next) {
				toks = append(toks, t)
				s = ns
				break
			}
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		s := m.Start()
		for _, t := range toks {
			s, _ = m.Advance(s, t)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(toks)), "ns/token")
}
