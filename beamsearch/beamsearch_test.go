package beamsearch

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/sample"
)

// row builds a log-probability row over vocab from token → probability
// (absent tokens get probability 0, log −Inf).
func row(vocab int, probs map[int32]float64) []float32 {
	r := make([]float32, vocab)
	for i := range r {
		r[i] = float32(math.Inf(-1))
	}
	for id, p := range probs {
		r[id] = float32(math.Log(p))
	}
	return r
}

// beamModel is a fake model: the next-token distribution after a sequence
// of generated tokens, keyed by their names.
type beamModel struct {
	vocab int
	names []string
	next  map[string]map[int32]float64
}

func (m beamModel) key(toks []int32) string {
	var parts []string
	for _, t := range toks {
		parts = append(parts, m.names[t])
	}
	return strings.Join(parts, " ")
}

// run drives b to the end and returns the results rendered as "tokens score".
func (m beamModel) run(t *testing.T, b *Search) []string {
	t.Helper()
	for steps := 0; !b.Done(); steps++ {
		if steps > 100 {
			t.Fatal("beam search does not stop")
		}
		rows := make([][]float32, b.Live())
		for i := range rows {
			k := m.key(b.Tokens(i))
			p, ok := m.next[k]
			if !ok {
				t.Fatalf("model asked for the continuation of %q", k)
			}
			rows[i] = row(m.vocab, p)
		}
		parents, tokens, _, err := b.Step(rows)
		if err != nil {
			t.Fatal(err)
		}
		if len(parents) != len(tokens) || len(parents) != b.Live() {
			t.Fatalf("%d parents, %d tokens, %d live", len(parents), len(tokens), b.Live())
		}
	}
	var out []string
	for _, h := range b.Results() {
		out = append(out, fmt.Sprintf("%s %.4f", m.key(h.Tokens), h.Score))
	}
	return out
}

// The seed text's example: A .6 then "continue" .4 (two others .3 each);
// B .4 then "end" .9. Greedy takes A, continue: .24. Beam search with k = 2
// keeps A and B and finds B end: .36.
var seedModel = beamModel{
	vocab: 6,
	names: []string{"A", "B", "continue", "o1", "o2", "end"},
	next: map[string]map[int32]float64{
		"":           {0: .6, 1: .4},
		"A":          {2: .4, 3: .3, 4: .3},
		"B":          {5: .9, 3: .1},
		"A continue": {5: 1},
		"A o1":       {5: 1},
	},
}

func TestBeamSeedExample(t *testing.T) {
	// Step 1: candidates A (log .6), B (log .4): both live.
	// Step 2: B end (log .36) ranks first and ends: finished. Live: A continue
	//         (log .24) and A o1 (log .18; ties A o2, lower id wins).
	// Step 3: both end with probability 1. With LengthPenalty 0 the scores are
	//         the sums: B end log .36 = -1.0217 beats A continue end log .24.
	b, err := New(Options{NumBeams: 2, NumReturn: 2, EOS: []int32{5}, MaxNewTokens: 10, Vocab: 6})
	if err != nil {
		t.Fatal(err)
	}
	got := seedModel.run(t, b)
	want := []string{
		fmt.Sprintf("B end %.4f", math.Log(.36)),
		fmt.Sprintf("A continue end %.4f", math.Log(.24)),
	}
	if !slices.Equal(got, want) {
		t.Errorf("k=2: %q, want %q", got, want)
	}
	// Greedy (k = 1) never sees B: A continue end, .24.
	b, _ = New(Options{NumBeams: 1, EOS: []int32{5}, MaxNewTokens: 10, Vocab: 6})
	if got := seedModel.run(t, b); !slices.Equal(got, want[1:]) {
		t.Errorf("k=1: %q, want %q", got, want[1:])
	}
	// Length penalty 1 divides by the generated length (EOS included):
	// A continue end log .24 / 3 = -0.4757 beats B end log .36 / 2 = -0.5108.
	b, _ = New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 1, EOS: []int32{5}, MaxNewTokens: 10, Vocab: 6})
	want = []string{
		fmt.Sprintf("A continue end %.4f", math.Log(.24)/3),
		fmt.Sprintf("B end %.4f", math.Log(.36)/2),
	}
	if got := seedModel.run(t, b); !slices.Equal(got, want) {
		t.Errorf("length penalty 1: %q, want %q", got, want)
	}
	// Length penalty 2: /9 and /4, so both three-token hypotheses (log .24/9,
	// log .18/9) beat B end (log .36/4 = -0.2554), which is pushed out.
	b, _ = New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 2, EOS: []int32{5}, MaxNewTokens: 10, Vocab: 6})
	want = []string{
		fmt.Sprintf("A continue end %.4f", math.Log(.24)/9),
		fmt.Sprintf("A o1 end %.4f", math.Log(.18)/9),
	}
	if got := seedModel.run(t, b); !slices.Equal(got, want) {
		t.Errorf("length penalty 2: %q, want %q", got, want)
	}
}

// The early_stopping modes on one model (k = 2, LengthPenalty 1; E is EOS):
//
//	step 1: E .4, a .35, b .25. E ranks first and ends: finished E
//	        (-0.916/1). Live: a (-1.050), b (-1.386).
//	step 2: after a: E .5, c .5; after b: c .9, E .1.
//	        Candidates: b c -1.491, a E -1.743, a c -1.743, b E -3.689.
//	        a E (rank 2 ≤ k) ends: finished [a E -0.872, E -0.916], full.
//	        Live: b c (-1.491), a c (-1.743).
//	true:   full, so stop: [a E, E].
//	false:  the best live beam at its length, -1.491/2 = -0.746, beats the
//	        worst finished (-0.916): go on.
//	step 3: after b c: E .9, c .1; after a c: E .6, c .4.
//	        Candidates: b c E -1.596, a c E -2.254, a c c -2.659, b c c -3.794.
//	        Both ends are in the top 2: finished [b c E -0.532, a c E -0.751].
//	        Live: a c c (-2.659), b c c.
//	false:  -2.659/3 = -0.886 does not beat -0.751: stop.
//	never:  scores the live beam at MaxNewTokens (10): -0.266 beats
//	        -0.751: go on.
//	step 4: both live beams end with probability 1: a c c E -2.659/4 =
//	        -0.665 enters, b c c E (-0.949) does not; no live beam: stop.
var earlyModel = beamModel{
	vocab: 4,
	names: []string{"E", "a", "b", "c"},
	next: map[string]map[int32]float64{
		"":      {0: .4, 1: .35, 2: .25},
		"a":     {0: .5, 3: .5},
		"b":     {3: .9, 0: .1},
		"b c":   {0: .9, 3: .1},
		"a c":   {0: .6, 3: .4},
		"a c c": {0: 1},
		"b c c": {0: 1},
	},
}

func TestBeamEarlyStopping(t *testing.T) {
	l := math.Log
	for _, tc := range []struct {
		mode EarlyStopping
		want []string
	}{
		{EarlyStopTrue, []string{
			fmt.Sprintf("a E %.4f", (l(.35)+l(.5))/2),
			fmt.Sprintf("E %.4f", l(.4)),
		}},
		{EarlyStopHeuristic, []string{
			fmt.Sprintf("b c E %.4f", (l(.25)+l(.9)+l(.9))/3),
			fmt.Sprintf("a c E %.4f", (l(.35)+l(.5)+l(.6))/3),
		}},
		{EarlyStopNever, []string{
			fmt.Sprintf("b c E %.4f", (l(.25)+l(.9)+l(.9))/3),
			fmt.Sprintf("a c c E %.4f", (l(.35)+l(.5)+l(.4))/4),
		}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			b, err := New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 1, EarlyStopping: tc.mode, EOS: []int32{0}, MaxNewTokens: 10, Vocab: 4})
			if err != nil {
				t.Fatal(err)
			}
			if got := earlyModel.run(t, b); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	// "never" with LengthPenalty 0 uses the current length, like false.
	b, _ := New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 0, EarlyStopping: EarlyStopNever, EOS: []int32{0}, MaxNewTokens: 10, Vocab: 4})
	h, _ := New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 0, EarlyStopping: EarlyStopHeuristic, EOS: []int32{0}, MaxNewTokens: 10, Vocab: 4})
	if a, c := earlyModel.run(t, b), earlyModel.run(t, h); !slices.Equal(a, c) {
		t.Errorf("never with LengthPenalty 0: %q, false: %q", a, c)
	}
}

func TestBeamMaxNewTokens(t *testing.T) {
	// No EOS: at MaxNewTokens every candidate ends and the top k finish,
	// scored by their length. Step 1: x .5, y .3 live (z .2 third). Step 2
	// (the last): x x .35, y z .3, x y .15: the top two finish.
	m := beamModel{vocab: 3, names: []string{"x", "y", "z"}, next: map[string]map[int32]float64{
		"": {0: .5, 1: .3, 2: .2}, "x": {0: .7, 1: .3}, "y": {2: 1},
	}}
	b, _ := New(Options{NumBeams: 2, NumReturn: 2, LengthPenalty: 1, MaxNewTokens: 2, Vocab: 3})
	want := []string{
		fmt.Sprintf("x x %.4f", math.Log(.35)/2),
		fmt.Sprintf("y z %.4f", math.Log(.3)/2),
	}
	if got := m.run(t, b); !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// With one beam, beam search is greedy decoding: on a deterministic fake
// model without EOS, and with EOS under early_stopping=True.
func TestBeamOneIsGreedy(t *testing.T) {
	greedy, _ := sample.New(sample.Options{})
	for seed := range uint64(10) {
		logitsAt := func(h []int32) []float32 {
			l := fakeLogits(append([]int32{int32(seed)}, h...), 0)
			return l
		}
		logSoftmax := func(l []float32) []float32 {
			m := slices.Max(l)
			var s float64
			for _, v := range l {
				s += math.Exp(float64(v - m))
			}
			out := make([]float32, len(l))
			for i, v := range l {
				out[i] = float32(float64(v-m) - math.Log(s))
			}
			return out
		}
		for _, eos := range [][]int32{nil, {3}} {
			const n = 30
			var want []int32
			for len(want) < n {
				tok, _ := greedy.Next(logitsAt(want), nil, 0, 0, nil)
				want = append(want, tok)
				if slices.Contains(eos, tok) {
					break
				}
			}
			b, err := New(Options{NumBeams: 1, EarlyStopping: EarlyStopTrue, LengthPenalty: 1, EOS: eos, MaxNewTokens: n, Vocab: fakeVocab})
			if err != nil {
				t.Fatal(err)
			}
			for !b.Done() {
				if _, _, _, err := b.Step([][]float32{logSoftmax(logitsAt(b.Tokens(0)))}); err != nil {
					t.Fatal(err)
				}
			}
			r := b.Results()
			if len(r) != 1 || !slices.Equal(r[0].Tokens, want) {
				t.Errorf("seed %d eos %v: beam %v, greedy %v", seed, eos, r, want)
			}
		}
	}
}

func TestBeamParents(t *testing.T) {
	// The returned parents and tokens rebuild every live beam.
	b, _ := New(Options{NumBeams: 3, MaxNewTokens: 6, Vocab: fakeVocab})
	beams := [][]int32{nil}
	for !b.Done() {
		rows := make([][]float32, b.Live())
		for i := range rows {
			l := fakeLogits(beams[i], 0)
			rows[i] = make([]float32, len(l))
			for j, v := range l {
				rows[i][j] = v - 3 // not normalised: Step does not care
			}
		}
		parents, tokens, done, err := b.Step(rows)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		next := make([][]int32, len(parents))
		for j, p := range parents {
			next[j] = append(slices.Clone(beams[p]), tokens[j])
			if !slices.Equal(next[j], b.Tokens(j)) {
				t.Fatalf("beam %d: rebuilt %v, Beam has %v", j, next[j], b.Tokens(j))
			}
		}
		beams = next
	}
	if len(b.Results()) != 1 || len(b.Results()[0].Tokens) != 6 {
		t.Errorf("results %v", b.Results())
	}
}

func TestBeamErrors(t *testing.T) {
	for _, o := range []Options{
		{NumBeams: 0, MaxNewTokens: 5, Vocab: 5},
		{NumBeams: 6, MaxNewTokens: 5, Vocab: 5}, // more beams than the vocabulary
		{NumBeams: 2, MaxNewTokens: 5, Vocab: 0},
		{NumBeams: 2, NumReturn: 3, MaxNewTokens: 5, Vocab: 5},
		{NumBeams: 2, MaxNewTokens: 0, Vocab: 5},
		{NumBeams: 2, MaxNewTokens: 5, Vocab: 5, LengthPenalty: math.NaN()},
		{NumBeams: 2, MaxNewTokens: 5, Vocab: 5, EOS: []int32{5}},
		{NumBeams: 2, MaxNewTokens: 5, Vocab: 5, EarlyStopping: 7},
	} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(%+v): err = %v, want ErrOptions", o, err)
		}
	}
	b, _ := New(Options{NumBeams: 2, MaxNewTokens: 1, Vocab: 3})
	if _, _, _, err := b.Step(nil); !errors.Is(err, ErrInput) {
		t.Errorf("no rows: %v", err)
	}
	if _, _, _, err := b.Step([][]float32{{0, 0}}); !errors.Is(err, ErrInput) {
		t.Errorf("short row: %v", err)
	}
	if _, _, _, err := b.Step([][]float32{{0, float32(math.NaN()), 0}}); !errors.Is(err, ErrInput) {
		t.Errorf("NaN: %v", err)
	}
	if _, _, done, err := b.Step([][]float32{{-1, -2, -3}}); err != nil || !done {
		t.Fatalf("MaxNewTokens 1: done %v, %v", done, err)
	}
	if _, _, _, err := b.Step([][]float32{{-1, -2, -3}}); !errors.Is(err, ErrState) {
		t.Errorf("Step after done: %v", err)
	}
}

const fakeVocab = 12

// fakeLogits is a deterministic "model": logits that depend on the whole
// history through a hash, with a few strong tokens.
func fakeLogits(history []int32, salt uint64) []float32 {
	h := uint64(1469598103934665603)
	for _, t := range history {
		h = (h ^ uint64(t)) * 1099511628211
	}
	out := make([]float32, fakeVocab)
	for i := range out {
		u := sample.UniformAt(h, uint64(i), 0, 1) // a hash, not a sampling draw
		out[i] = float32(4 * u * u * u)
	}
	if salt != 0 {
		for i := range out {
			out[i] += float32(sample.UniformAt(h, uint64(i), salt, 1))
		}
	}
	return out
}
