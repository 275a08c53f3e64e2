package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var inf = float32(math.Inf(1))

func mustNew(t testing.TB, o Options) *Sampler {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return s
}

// approx compares probabilities to 1e-6.
var approx = cmpopts.EquateApprox(0, 1e-6)

func TestValidate(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name  string
		o     Options
		field string // "" = valid
	}{
		{"zero is greedy", Options{}, ""},
		{"typical", Options{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, RepeatLastN: 64, Seed: 1}, ""},
		{"bounds inclusive", Options{Temperature: 100, TopP: 1, MinP: 1, RepeatPenalty: 0}, ""},
		{"negative temperature", Options{Temperature: -0.1}, "Temperature"},
		{"NaN temperature", Options{Temperature: nan}, "Temperature"},
		{"infinite temperature", Options{Temperature: inf}, "Temperature"},
		{"negative topK", Options{TopK: -1}, "TopK"},
		{"topP above 1", Options{TopP: 1.01}, "TopP"},
		{"topP negative", Options{TopP: -0.5}, "TopP"},
		{"topP NaN", Options{TopP: nan}, "TopP"},
		{"minP above 1", Options{MinP: 2}, "MinP"},
		{"minP negative", Options{MinP: -0.01}, "MinP"},
		{"negative penalty", Options{RepeatPenalty: -1}, "RepeatPenalty"},
		{"infinite penalty", Options{RepeatPenalty: inf}, "RepeatPenalty"},
		{"negative lastN", Options{RepeatLastN: -1}, "RepeatLastN"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrOptions) {
				t.Fatalf("Validate() = %v, want ErrOptions", err)
			}
			if got := err.Error(); !containsWord(got, tc.field) {
				t.Errorf("Validate() = %q, want it to name %s", got, tc.field)
			}
			if _, err := New(tc.o); err == nil {
				t.Errorf("New accepted invalid options")
			}
		})
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i+len(w) == len(s) || s[i+len(w)] == ' ') {
			return true
		}
	}
	return false
}

func TestUniformPinned(t *testing.T) {
	// u = k·2⁻⁵³; these pin the construction bit for bit on every platform.
	tests := []struct {
		seed, r, t uint64
		k          uint64
	}{
		{0x0, 0, 0, 0x193e51499ccaf9},
		{0x0, 0, 1, 0x949b36bf6c66e},
		{0x0, 1, 0, 0x92e2f40e6d832},
		{0x1, 0, 0, 0x1782420736ce54},
		{0x2a, 7, 1000, 0x1792b7f6458793},
		{math.MaxUint64, math.MaxUint64, math.MaxUint64, 0x19835b760a4255},
		{0x0123456789abcdef, 3, 1 << 40, 0xabc46d3f770c4},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%x/%d/%d", tc.seed, tc.r, tc.t), func(t *testing.T) {
			got := Uniform(tc.seed, tc.r, tc.t)
			if want := float64(tc.k) * 0x1p-53; got != want {
				t.Errorf("Uniform = %v (k=%#x), want %v (k=%#x)", got, uint64(got*0x1p53), want, tc.k)
			}
		})
	}
}

// chiSquare returns Σ (obs-exp)²/exp.
func chiSquare(obs []int, exp []float64) float64 {
	var x float64
	for i := range obs {
		if exp[i] == 0 {
			if obs[i] != 0 {
				return math.Inf(1)
			}
			continue
		}
		d := float64(obs[i]) - exp[i]
		x += d * d / exp[i]
	}
	return x
}

func TestUniformChiSquare(t *testing.T) {
	const draws, bins = 100_000, 100
	// 99 degrees of freedom: mean 99, sd 14; 99+5·14 ≈ 170 fails only on a real defect
	// (the inputs are fixed, so the test is deterministic).
	const limit = 170.0
	exp := make([]float64, bins)
	for i := range exp {
		exp[i] = draws / bins
	}
	walks := []struct {
		name string
		f    func(i uint64) float64
	}{
		{"along t", func(i uint64) float64 { return Uniform(12345, 0, i) }},
		{"along r", func(i uint64) float64 { return Uniform(12345, i, 7) }},
		{"along seed", func(i uint64) float64 { return Uniform(i, 3, 7) }},
		{"diagonal", func(i uint64) float64 { return Uniform(i, i, i) }},
	}
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) {
			obs := make([]int, bins)
			var pairs [10][10]int // serial pairs: u_i, u_{i+1}
			prev := -1
			for i := range uint64(draws) {
				u := w.f(i)
				if u < 0 || u >= 1 {
					t.Fatalf("draw %d = %v outside [0,1)", i, u)
				}
				obs[int(u*bins)]++
				b := int(u * 10)
				if prev >= 0 {
					pairs[prev][b]++
				}
				prev = b
			}
			if x := chiSquare(obs, exp); x > limit {
				t.Errorf("chi-square over %d bins = %.1f, want < %.0f", bins, x, limit)
			}
			var po []int
			pe := make([]float64, 100)
			for i := range pairs {
				po = append(po, pairs[i][:]...)
			}
			for i := range pe {
				pe[i] = float64(draws-1) / 100
			}
			if x := chiSquare(po, pe); x > limit {
				t.Errorf("serial-pair chi-square = %.1f, want < %.0f", x, limit)
			}
		})
	}
}

func TestUniformKeyed(t *testing.T) {
	const n = 1000
	draws := func(seed, r uint64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = Uniform(seed, r, uint64(i))
		}
		return out
	}
	a, b := draws(7, 0), draws(7, 0)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed gave different draws (-first +second):\n%s", diff)
	}
	for _, other := range [][]float64{draws(8, 0), draws(7, 1)} {
		same := 0
		for i := range other {
			if other[i] == a[i] {
				same++
			}
		}
		if same > 0 {
			t.Errorf("a different key reproduced %d of %d draws", same, n)
		}
	}
	// Call order does not matter: draw in a shuffled order, and interleave
	// another request, and get the same number at each (seed, r, t).
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for _, i := range perm {
		_ = Uniform(7, 99, uint64(i)) // unrelated request in between
		if got := Uniform(7, 0, uint64(i)); got != a[i] {
			t.Fatalf("draw t=%d depends on call order: %v then %v", i, a[i], got)
		}
	}
	// Within one (seed, r) distinct positions give distinct numbers (bijection
	// before truncation; a collision in 10⁵ 53-bit draws would be a defect).
	seen := make(map[float64]bool, 100_000)
	for i := range uint64(100_000) {
		u := Uniform(3, 4, i)
		if seen[u] {
			t.Fatalf("Uniform(3, 4, %d) repeats an earlier draw", i)
		}
		seen[u] = true
	}
}

// distOf runs Dist and copies the result out of the scratch.
func distOf(t *testing.T, o Options, logits []float32, history []int32) Dist {
	t.Helper()
	d, err := mustNew(t, o).Dist(logits, history, nil)
	if err != nil {
		t.Fatalf("Dist: %v", err)
	}
	return Dist{IDs: slices.Clone(d.IDs), Probs: slices.Clone(d.Probs)}
}

// softmax64 is the textbook softmax, for hand-checked expectations.
func softmax64(x ...float64) []float32 {
	m := slices.Max(x)
	var s float64
	for _, v := range x {
		s += math.Exp(v - m)
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(math.Exp(v-m) / s)
	}
	return out
}

func TestDistTransforms(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	tests := []struct {
		name    string
		o       Options
		logits  []float32
		history []int32
		want    Dist
	}{
		{
			name:   "softmax sorted desc",
			o:      Options{Temperature: 1},
			logits: []float32{1, 3, 2},
			want:   Dist{IDs: []int32{1, 2, 0}, Probs: perm(softmax64(1, 3, 2), 1, 2, 0)},
		},
		{
			name:   "temperature divides logits",
			o:      Options{Temperature: 2},
			logits: []float32{1, 3, 2},
			want:   Dist{IDs: []int32{1, 2, 0}, Probs: perm(softmax64(0.5, 1.5, 1), 1, 2, 0)},
		},
		{
			name:   "ties ordered by id",
			o:      Options{Temperature: 1},
			logits: []float32{0, 5, 0, 5},
			want:   Dist{IDs: []int32{1, 3, 0, 2}, Probs: perm(softmax64(0, 5, 0, 5), 1, 3, 0, 2)},
		},
		{
			name:   "-Inf dropped",
			o:      Options{Temperature: 1},
			logits: []float32{-inf, 0, -inf, 0},
			want:   Dist{IDs: []int32{1, 3}, Probs: []float32{0.5, 0.5}},
		},
		{
			name:   "top-k keeps k and renormalises",
			o:      Options{Temperature: 1, TopK: 2},
			logits: []float32{1, 4, 3, 2},
			want:   Dist{IDs: []int32{1, 2}, Probs: softmax64(4, 3)},
		},
		{
			name:   "top-k ties keep lower id",
			o:      Options{Temperature: 1, TopK: 2},
			logits: []float32{2, 1, 2, 2},
			want:   Dist{IDs: []int32{0, 2}, Probs: []float32{0.5, 0.5}},
		},
		{
			name:   "top-k ≥ vocab is off",
			o:      Options{Temperature: 1, TopK: 9},
			logits: []float32{0, 0},
			want:   Dist{IDs: []int32{0, 1}, Probs: []float32{0.5, 0.5}},
		},
		{
			// probs 0.5, 0.25, 0.125, 0.125: p = 0.75 is reached exactly by two tokens.
			name:   "top-p mass reached exactly",
			o:      Options{Temperature: 1, TopP: 0.75},
			logits: []float32{ln(0.125), ln(0.5), ln(0.125), ln(0.25)},
			want:   Dist{IDs: []int32{1, 3}, Probs: []float32{2.0 / 3, 1.0 / 3}},
		},
		{
			name:   "top-p just above needs one more",
			o:      Options{Temperature: 1, TopP: 0.76},
			logits: []float32{ln(0.125), ln(0.5), ln(0.125), ln(0.25)},
			want:   Dist{IDs: []int32{1, 3, 0}, Probs: []float32{0.5 / 0.875, 0.25 / 0.875, 0.125 / 0.875}},
		},
		{
			name:   "top-p keeps at least one",
			o:      Options{Temperature: 1, TopP: 0.01},
			logits: []float32{0, 1, 0},
			want:   Dist{IDs: []int32{1}, Probs: []float32{1}},
		},
		{
			// 0.4, 0.3, 0.3: p = 0.5 needs two; the tie goes to the lower id.
			name:   "top-p tie at the cut",
			o:      Options{Temperature: 1, TopP: 0.5},
			logits: []float32{ln(0.3), ln(0.3), ln(0.4)},
			want:   Dist{IDs: []int32{2, 0}, Probs: []float32{4.0 / 7, 3.0 / 7}},
		},
		{
			name:   "top-p 1 is off",
			o:      Options{Temperature: 1, TopP: 1},
			logits: []float32{ln(0.5), ln(0.5)},
			want:   Dist{IDs: []int32{0, 1}, Probs: []float32{0.5, 0.5}},
		},
		{
			// after top-k 2 the kept mass is 0.5/0.75, 0.25/0.75: p=0.6 keeps one.
			name:   "top-p measured after top-k",
			o:      Options{Temperature: 1, TopK: 2, TopP: 0.6},
			logits: []float32{ln(0.5), ln(0.25), ln(0.125), ln(0.125)},
			want:   Dist{IDs: []int32{0}, Probs: []float32{1}},
		},
		{
			name:   "min-p keeps p ≥ minP·pmax",
			o:      Options{Temperature: 1, MinP: 0.5},
			logits: []float32{ln(0.25), ln(0.4), ln(0.15), ln(0.2)},
			want:   Dist{IDs: []int32{1, 0, 3}, Probs: []float32{0.4 / 0.85, 0.25 / 0.85, 0.2 / 0.85}},
		},
		{
			name:   "min-p after top-p",
			o:      Options{Temperature: 1, TopP: 0.9, MinP: 0.6},
			logits: []float32{ln(0.25), ln(0.4), ln(0.15), ln(0.2)},
			want:   Dist{IDs: []int32{1, 0}, Probs: []float32{0.4 / 0.65, 0.25 / 0.65}},
		},
		{
			name:   "min-p after top-k",
			o:      Options{Temperature: 1, TopK: 3, MinP: 0.6},
			logits: []float32{ln(0.25), ln(0.4), ln(0.15), ln(0.2)},
			want:   Dist{IDs: []int32{1, 0}, Probs: []float32{0.4 / 0.65, 0.25 / 0.65}},
		},
		{
			// logits 2, -2, 1, 0.5 with penalty 2 on ids {0, 1}: 2/2 = 1, -2·2 = -4.
			name:    "repetition penalty divides positive, multiplies negative",
			o:       Options{Temperature: 1, RepeatPenalty: 2},
			logits:  []float32{2, -2, 1, 0.5},
			history: []int32{0, 1, 0, 0},
			want:    Dist{IDs: []int32{0, 2, 3, 1}, Probs: perm(softmax64(1, -4, 1, 0.5), 0, 2, 3, 1)},
		},
		{
			// only the last 2 history tokens count: id 1 is penalised, id 0 is not.
			name:    "repetition window",
			o:       Options{Temperature: 1, RepeatPenalty: 2, RepeatLastN: 2},
			logits:  []float32{2, 2, 0},
			history: []int32{0, 1, 1},
			want:    Dist{IDs: []int32{0, 1, 2}, Probs: softmax64(2, 1, 0)},
		},
		{
			name:    "penalty before top-k",
			o:       Options{Temperature: 1, RepeatPenalty: 4, TopK: 1},
			logits:  []float32{2, 1},
			history: []int32{0},
			want:    Dist{IDs: []int32{1}, Probs: []float32{1}},
		},
		{
			name:    "penalty 1 is off",
			o:       Options{Temperature: 1, RepeatPenalty: 1},
			logits:  []float32{1, 0},
			history: []int32{0},
			want:    Dist{IDs: []int32{0, 1}, Probs: softmax64(1, 0)},
		},
		{
			name:   "temperature 0 is one-hot argmax",
			o:      Options{},
			logits: []float32{1, 3, 3, 2},
			want:   Dist{IDs: []int32{1}, Probs: []float32{1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := distOf(t, tc.o, tc.logits, tc.history)
			if diff := cmp.Diff(tc.want, got, approx); diff != "" {
				t.Errorf("Dist (-want +got):\n%s", diff)
			}
		})
	}
}

// perm reorders p into the given id order.
func perm(p []float32, ids ...int) []float32 {
	out := make([]float32, len(ids))
	for i, id := range ids {
		out[i] = p[id]
	}
	return out
}

func TestDistDoesNotModifyLogits(t *testing.T) {
	logits := []float32{3, 1, 2, 5, 4}
	orig := slices.Clone(logits)
	for _, o := range []Options{{Temperature: 0.7, RepeatPenalty: 1.3}, {Temperature: 1, TopK: 2, RepeatPenalty: 2}, {Temperature: 1, TopP: 0.5}} {
		distOf(t, o, logits, []int32{0, 3})
	}
	if diff := cmp.Diff(orig, logits); diff != "" {
		t.Errorf("logits modified (-before +after):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name    string
		o       Options
		logits  []float32
		history []int32
		want    error
	}{
		{"empty", Options{Temperature: 1}, nil, nil, ErrEmpty},
		{"empty greedy", Options{}, []float32{}, nil, ErrEmpty},
		{"NaN", Options{Temperature: 1}, []float32{0, nan, 1}, nil, ErrLogits},
		{"NaN last, greedy", Options{}, []float32{5, 0, nan}, nil, ErrLogits},
		{"NaN first, greedy", Options{}, []float32{nan, 5}, nil, ErrLogits},
		{"NaN with top-k", Options{Temperature: 1, TopK: 1}, []float32{5, 6, nan}, nil, ErrLogits},
		{"+Inf", Options{Temperature: 1}, []float32{0, inf}, nil, ErrLogits},
		{"all -Inf", Options{Temperature: 1}, []float32{-inf, -inf}, nil, ErrLogits},
		{"all -Inf greedy", Options{}, []float32{-inf, -inf}, nil, ErrLogits},
		{"all -Inf top-k", Options{Temperature: 1, TopK: 1}, []float32{-inf, -inf}, nil, ErrLogits},
		{"history out of vocab", Options{Temperature: 1, RepeatPenalty: 1.1}, []float32{0, 1}, []int32{2}, ErrHistory},
		{"negative history id", Options{RepeatPenalty: 1.1}, []float32{0, 1}, []int32{-1}, ErrHistory},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.o)
			if _, err := s.Dist(tc.logits, tc.history, nil); !errors.Is(err, tc.want) {
				t.Errorf("Dist error = %v, want %v", err, tc.want)
			}
			if _, err := s.Next(tc.logits, tc.history, 0, 0, nil); !errors.Is(err, tc.want) {
				t.Errorf("Next error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestGreedy(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		logits  []float32
		history []int32
		want    int32
	}{
		{"max", Options{}, []float32{0.1, 0.9, 0.3}, nil, 1},
		{"ties go to lowest id", Options{}, []float32{1, 7, 3, 7, 7}, nil, 1},
		{"negative logits", Options{}, []float32{-3, -1, -2}, nil, 1},
		{"some -Inf", Options{}, []float32{-inf, -5, -inf}, nil, 1},
		{"penalty moves argmax", Options{RepeatPenalty: 2}, []float32{3, 2}, []int32{0}, 1},
		{"penalty on negative", Options{RepeatPenalty: 2}, []float32{-1, -1.5}, []int32{0}, 1},
		{"penalty tie → lowest", Options{RepeatPenalty: 2}, []float32{4, 2}, []int32{0}, 0},
		{"seed ignored", Options{Seed: 99, TopK: 1, TopP: 0.1}, []float32{0, 1}, nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustNew(t, tc.o)
			for r := range uint64(3) {
				got, err := s.Next(tc.logits, tc.history, r, r*7, nil)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("Next(r=%d) = %d, want %d", r, got, tc.want)
				}
			}
		})
	}
}

func TestSample(t *testing.T) {
	sparse := Dist{IDs: []int32{7, 3, 5}, Probs: []float32{0.5, 0.25, 0.25}}
	tests := []struct {
		name string
		d    Dist
		u    float64
		want int32
	}{
		{"first bucket start", sparse, 0, 7},
		{"first bucket end", sparse, 0.4999, 7},
		{"second bucket", sparse, 0.5, 3},
		{"third bucket", sparse, 0.75, 5},
		{"top end", sparse, math.Nextafter(1, 0), 5},
		{"dense", Dist{Probs: []float32{0, 0.5, 0.5}}, 0, 1},
		{"dense upper", Dist{Probs: []float32{0.2, 0, 0.8}}, 0.3, 2},
		{"zeros skipped", Dist{IDs: []int32{1, 2, 3}, Probs: []float32{0, 1, 0}}, 0.99, 2},
		{"negative and NaN skipped", Dist{IDs: []int32{1, 2, 3}, Probs: []float32{-1, float32(math.NaN()), 2}}, 0, 3},
		{"unnormalised", Dist{IDs: []int32{1, 2}, Probs: []float32{2, 6}}, 0.3, 2},
		{"empty", Dist{}, 0.5, -1},
		{"all zero", Dist{Probs: []float32{0, 0}}, 0.5, -1},
	}
	s := mustNew(t, Options{Temperature: 1})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Sample(tc.d, tc.u); got != tc.want {
				t.Errorf("Sample(u=%v) = %d, want %d", tc.u, got, tc.want)
			}
		})
	}
}

// TestSampleHistogram draws 10⁵ tokens through Next with the keyed uniform and
// checks the histogram against the distribution Dist reports (chi-square, 7
// degrees of freedom; 30 is p ≈ 10⁻⁴, and the draws are deterministic).
func TestSampleHistogram(t *testing.T) {
	const draws = 100_000
	logits := []float32{0.3, -1, 2, 0.5, 1.2, -0.4, 0.9, 0}
	for _, o := range []Options{
		{Temperature: 1, Seed: 1},
		{Temperature: 0.7, TopK: 6, Seed: 2},
		{Temperature: 1.3, TopP: 0.9, MinP: 0.1, RepeatPenalty: 1.5, Seed: 3},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			s := mustNew(t, o)
			var sc Scratch
			history := []int32{2, 4}
			d, err := s.Dist(logits, history, &sc)
			if err != nil {
				t.Fatal(err)
			}
			exp := make([]float64, len(logits))
			for i, id := range d.IDs {
				exp[id] = float64(d.Probs[i]) * draws
			}
			obs := make([]int, len(logits))
			for tt := range uint64(draws) {
				id, err := s.Next(logits, history, 5, tt, &sc)
				if err != nil {
					t.Fatal(err)
				}
				obs[id]++
			}
			if x := chiSquare(obs, exp); x > 30 {
				t.Errorf("chi-square = %.1f, want < 30\nobserved %v\nexpected %v", x, obs, exp)
			}
		})
	}
}

// refDist is the obvious implementation: transform every logit, sort the whole
// vocabulary, cut. It mirrors Dist's float rounding (float32 penalty, float32
// weights) so the kept sets agree exactly; the point is to check Dist's
// partial selection (heap top-k, growing top-p prefix, min-p prefilter).
func refDist(o Options, logits []float32, history []int32) Dist {
	n := len(logits)
	x := slices.Clone(logits)
	if o.RepeatPenalty != 0 && o.RepeatPenalty != 1 {
		last := o.RepeatLastN
		if last == 0 {
			last = 64
		}
		if len(history) > last {
			history = history[len(history)-last:]
		}
		done := map[int32]bool{}
		for _, id := range history {
			if !done[id] {
				done[id] = true
				if x[id] > 0 {
					x[id] /= o.RepeatPenalty
				} else {
					x[id] *= o.RepeatPenalty
				}
			}
		}
	}
	toks := make([]Token, n)
	for i, v := range x {
		toks[i] = Token{int32(i), v}
	}
	sortTokens(toks)
	if o.Temperature == 0 {
		return Dist{IDs: []int32{toks[0].ID}, Probs: []float32{1}}
	}
	topk := o.TopK > 0 && o.TopK < n
	if topk {
		toks = toks[:o.TopK]
	}
	m := float64(toks[0].V)
	w := make([]float32, n)
	var total float64
	for i, tk := range toks {
		w[i] = float32(math.Exp((float64(tk.V) - m) / float64(o.Temperature)))
	}
	// Order by weight then id (distinct logits can round to equal weights).
	for i := range toks {
		toks[i].V = w[i]
	}
	sortTokens(toks)
	for i := range toks {
		w[i] = toks[i].V
	}
	if topk {
		for i := range toks {
			total += float64(w[i])
		}
	} else {
		// Dist sums in id order when it has not sorted.
		byID := make([]float32, n)
		for i, tk := range toks {
			byID[tk.ID] = w[i]
		}
		for _, v := range byID {
			total += float64(v)
		}
	}
	keep := len(toks)
	if o.TopP > 0 && o.TopP < 1 {
		var cum float64
		for i := range toks {
			cum += float64(w[i])
			if cum >= float64(o.TopP)*total {
				keep = i + 1
				break
			}
		}
	}
	if o.MinP > 0 {
		for i := 1; i < keep; i++ {
			if float64(w[i]) < float64(o.MinP)*float64(w[0]) {
				keep = i
				break
			}
		}
	}
	for keep > 1 && w[keep-1] == 0 {
		keep--
	}
	var sum float64
	for i := range keep {
		sum += float64(w[i])
	}
	d := Dist{}
	for i := range keep {
		d.IDs = append(d.IDs, toks[i].ID)
		d.Probs = append(d.Probs, float32(float64(w[i])/sum))
	}
	for len(d.Probs) > 1 && d.Probs[len(d.Probs)-1] == 0 {
		d.IDs, d.Probs = d.IDs[:len(d.IDs)-1], d.Probs[:len(d.Probs)-1]
	}
	return d
}

// randomLogits makes logits of a given shape: "peaked" (a few large values,
// like a trained model), "flat" (top-p must grow its prefix several times),
// "ties" (many equal values) or "wide" (a large spread with -Inf entries).
func randomLogits(rng *rand.Rand, n int, shape string) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch shape {
		case "peaked":
			x[i] = float32(rng.NormFloat64() * 2)
			if rng.IntN(100) == 0 {
				x[i] += 8
			}
		case "flat":
			x[i] = float32(rng.NormFloat64() * 0.05)
		case "ties":
			x[i] = float32(rng.IntN(4))
		case "wide":
			x[i] = float32(rng.NormFloat64() * 40)
			if rng.IntN(10) == 0 {
				x[i] = -inf
			}
		}
	}
	return x
}

func TestDistMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	opts := []Options{
		{Temperature: 1},
		{Temperature: 0.6, TopK: 40},
		{Temperature: 1, TopK: 1},
		{Temperature: 1.5, TopP: 0.95},
		{Temperature: 1, TopP: 0.999},
		{Temperature: 0.8, MinP: 0.05},
		{Temperature: 0.8, TopK: 200, TopP: 0.9, MinP: 0.01, RepeatPenalty: 1.3},
		{Temperature: 1, TopP: 0.5, MinP: 0.2, RepeatPenalty: 0.7, RepeatLastN: 300},
		{RepeatPenalty: 1.2},
	}
	sc := new(Scratch) // shared across cases: stale state must not leak
	for _, n := range []int{1, 2, 7, 64, 65, 513, 5000} {
		for _, shape := range []string{"peaked", "flat", "ties", "wide"} {
			logits := randomLogits(rng, n, shape)
			if shape == "wide" {
				logits[rng.IntN(n)] = 1 // at least one finite
			}
			history := make([]int32, rng.IntN(400))
			for i := range history {
				history[i] = int32(rng.IntN(n))
			}
			for _, o := range opts {
				t.Run(fmt.Sprintf("n=%d/%s/%+v", n, shape, o), func(t *testing.T) {
					s := mustNew(t, o)
					got, err := s.Dist(logits, history, sc)
					if err != nil {
						t.Fatal(err)
					}
					want := refDist(o, logits, history)
					if diff := cmp.Diff(want, got, approx); diff != "" {
						t.Errorf("Dist differs from the full-sort reference (-want +got):\n%s", diff)
					}
				})
			}
		}
	}
}

func TestNoAllocs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	logits := randomLogits(rng, 32000, "peaked")
	history := []int32{5, 17, 5, 900, 31999}
	for _, o := range []Options{
		{},
		{RepeatPenalty: 1.1},
		{Temperature: 0.8, TopK: 40, TopP: 0.95, RepeatPenalty: 1.1},
		{Temperature: 1, TopP: 0.9},
		{Temperature: 1, MinP: 0.05},
		{Temperature: 1},
	} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			s := mustNew(t, o)
			var sc Scratch
			var step uint64
			next := func() {
				if _, err := s.Next(logits, history, 1, step, &sc); err != nil {
					t.Fatal(err)
				}
				step++
			}
			next() // warm the scratch
			if a := testing.AllocsPerRun(20, next); a != 0 {
				t.Errorf("Next allocates %v times per call with a warm Scratch", a)
			}
			if a := testing.AllocsPerRun(20, func() { _, _ = s.Dist(logits, history, &sc) }); a != 0 {
				t.Errorf("Dist allocates %v times per call with a warm Scratch", a)
			}
		})
	}
}

// FuzzDist checks, for arbitrary logits and options, that Dist either reports
// an error or returns a valid distribution equal to the full-sort reference,
// and that Next picks a token from it.
func FuzzDist(f *testing.F) {
	f.Add([]byte{0, 10, 20, 30, 40, 50}, uint8(100), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add([]byte{1, 1, 1, 1, 1}, uint8(50), uint8(2), uint8(90), uint8(5), uint8(20))
	f.Add([]byte{255, 0, 255, 128}, uint8(0), uint8(1), uint8(0), uint8(0), uint8(10))
	f.Add([]byte{}, uint8(10), uint8(0), uint8(0), uint8(0), uint8(0))
	// Two tied maxima and a third weight of one subnormal step (1.4e-45):
	// halved by the sum, its probability rounds to 0 and must be left out.
	f.Add([]byte{200, 200, 134}, uint8(4), uint8(0), uint8(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, temp, topK, topP, minP, pen uint8) {
		logits := make([]float32, len(raw))
		for i, b := range raw {
			switch b {
			case 255:
				logits[i] = -inf
			default:
				logits[i] = (float32(b) - 128) / 8
			}
		}
		o := Options{
			Temperature:   float32(temp) / 50,
			TopK:          int(topK % 8),
			TopP:          float32(topP%101) / 100,
			MinP:          float32(minP%101) / 100,
			RepeatPenalty: float32(pen) / 10,
			RepeatLastN:   int(pen % 5),
		}
		s := mustNew(t, o)
		var history []int32
		for i := range len(raw) / 2 {
			history = append(history, int32(raw[i])%int32(len(raw)))
		}
		d, err := s.Dist(logits, history, nil)
		allNegInf := true
		for _, v := range logits {
			allNegInf = allNegInf && math.IsInf(float64(v), -1)
		}
		if len(logits) == 0 || allNegInf {
			if err == nil {
				t.Fatalf("Dist(%v) = %v, want an error", logits, d)
			}
			return
		}
		if err != nil {
			t.Fatalf("Dist(%v, %+v): %v", logits, o, err)
		}
		if want := refDist(o, logits, history); !cmp.Equal(want, d, approx) {
			t.Fatalf("Dist(%v, %+v) differs from the reference:\n%s", logits, o, cmp.Diff(want, d, approx))
		}
		var sum float64
		for i, p := range d.Probs {
			if !(p > 0) || (i > 0 && p > d.Probs[i-1]) {
				t.Fatalf("probabilities not positive and descending: %v", d.Probs)
			}
			sum += float64(p)
		}
		if math.Abs(sum-1) > 1e-5 {
			t.Fatalf("probabilities sum to %v", sum)
		}
		id, err := s.Next(logits, history, 1, 2, nil)
		if err != nil || !slices.Contains(d.IDs, id) {
			t.Fatalf("Next = %d, %v; want one of %v", id, err, d.IDs)
		}
	})
}

// TestArgmaxRangeBlocks: argmaxRange's eight-at-a-time scan gives argmaxOne's
// answer (the first maximum, or the first NaN or +Inf as bad) for every
// start, length and starting best, over logits with ties, -Inf, NaN and +Inf
// placed in and across blocks.
func TestArgmaxRangeBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	nan := float32(math.NaN())
	for trial := range 400 {
		n := r.IntN(80)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.IntN(9)) // small integers: many ties
			switch r.IntN(40) {
			case 0:
				x[i] = nan
			case 1:
				x[i] = inf
			case 2:
				x[i] = -inf
			}
		}
		for lo := 0; lo <= n; lo += 1 + r.IntN(5) {
			for _, start := range []struct {
				best int
				v    float32
			}{{-1, -inf}, {-1, 4}, {7, 8}} {
				gb, gv, gbad := argmaxRange(x, lo, n, start.best, start.v)
				wb, wv, wbad := argmaxOne(x, lo, n, start.best, start.v)
				if gb != wb || math.Float32bits(gv) != math.Float32bits(wv) || gbad != wbad {
					t.Fatalf("trial %d x=%v [%d:%d] from (%d, %v): (%d, %v, %d), one by one (%d, %v, %d)",
						trial, x, lo, n, start.best, start.v, gb, gv, gbad, wb, wv, wbad)
				}
			}
		}
	}
}
