package spec

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/sluicehq/sluice/sample"
)

func dense(p ...float32) sample.Dist { return sample.Dist{Probs: p} }

// constU returns the same uniform for every draw of one stream.
func constU(acc, res, smp float64) Uniforms {
	return func(i int, s uint64) float64 {
		switch s {
		case StreamAccept:
			return acc
		case StreamResidual:
			return res
		default:
			return smp
		}
	}
}

// The seed text's example: p = (0.2, 0.5, 0.3), q = (0.5, 0.3, 0.2).
func TestChainSeedExample(t *testing.T) {
	p, q := dense(0.2, 0.5, 0.3), dense(0.5, 0.3, 0.2)
	// Token 0 is accepted with probability min(1, 0.2/0.5) = 0.4: u just
	// below accepts, u at 0.4 rejects.
	for _, tc := range []struct {
		u    float64
		want int
	}{{0.399, 1}, {0.401, 0}} {
		n, _, err := VerifyChain([]sample.Dist{p, p}, []sample.Dist{q}, []int32{0}, constU(tc.u, 0, 0), nil)
		if err != nil || n != tc.want {
			t.Errorf("token 0 with u=%v: accepted %d, %v; want %d", tc.u, n, err, tc.want)
		}
	}
	// Token 1 has ratio 0.5/0.3 > 1: accepted whatever u.
	if n, _, _ := VerifyChain([]sample.Dist{p, p}, []sample.Dist{q}, []int32{1}, constU(0.999999, 0, 0), nil); n != 1 {
		t.Errorf("token 1 accepted %d, want 1 (probability 1)", n)
	}
	// The residual is max(0, p−q) = (0, 0.2, 0.1), normalised (0, 0.667, 0.333).
	var sc ChainScratch
	r := sc.residual(p, q)
	var tot float64
	got := make([]float64, 3)
	for j, id := range r.IDs {
		got[id] = float64(r.Probs[j])
		tot += float64(r.Probs[j])
	}
	for i, want := range []float64{0, 2.0 / 3, 1.0 / 3} {
		if math.Abs(got[i]/tot-want) > 1e-6 {
			t.Errorf("residual[%d] = %.4f, want %.4f", i, got[i]/tot, want)
		}
	}
	// The residual draw by inverse CDF: u < 2/3 gives 1, above gives 2.
	for _, tc := range []struct {
		u    float64
		want int32
	}{{0.66, 1}, {0.67, 2}} {
		n, next, _ := VerifyChain([]sample.Dist{p, p}, []sample.Dist{q}, []int32{0}, constU(0.9, tc.u, 0), nil)
		if n != 0 || next != tc.want {
			t.Errorf("rejected, residual u=%v: accepted %d next %d, want 0, %d", tc.u, n, next, tc.want)
		}
	}
	// The marginal: P(emit 1) = q(1)·1 + P(reject)·0.667 = 0.3 + 0.3·0.667 = 0.5.
	var pRej, pOne float64
	for x := range 3 {
		a := math.Min(1, probOf(p, int32(x))/probOf(q, int32(x)))
		pRej += probOf(q, int32(x)) * (1 - a)
		if x == 1 {
			pOne += probOf(q, 1) * a
		}
	}
	pOne += pRej * 2.0 / 3
	if math.Abs(pRej-0.3) > 1e-6 || math.Abs(pOne-0.5) > 1e-6 {
		t.Errorf("P(reject) = %.4f, P(emit 1) = %.4f; want 0.3 and 0.5", pRej, pOne)
	}
}

// chiSquareFirst runs n speculative rounds of γ draft tokens drawn from q and
// returns the chi-square statistic of the first emitted token against p[0]
// and its degrees of freedom. verify is VerifyChain or a broken one.
func chiSquareFirst(t *testing.T, p, q sample.Dist, gamma, n int, verify func(p, q []sample.Dist, draft []int32, u Uniforms) (int, int32, error)) (float64, int) {
	t.Helper()
	ps := make([]sample.Dist, gamma+1)
	qs := make([]sample.Dist, gamma)
	for i := range ps {
		ps[i] = p
	}
	for i := range qs {
		qs[i] = q
	}
	draft := make([]int32, gamma)
	vocab := len(p.Probs)
	for _, id := range p.IDs {
		vocab = max(vocab, int(id)+1)
	}
	for _, id := range q.IDs {
		vocab = max(vocab, int(id)+1)
	}
	counts := make([]int, vocab)
	const seed, t0 = 11, 40
	for r := range uint64(n) {
		u := KeyedUniforms(seed, r, t0)
		for i := range draft {
			draft[i] = Draw(q, u(i, StreamDraft))
		}
		acc, next, err := verify(ps, qs, draft, u)
		if err != nil {
			t.Fatal(err)
		}
		first := next
		if acc > 0 {
			first = draft[0]
		}
		counts[first]++
	}
	var x float64
	df := -1
	for id, c := range counts {
		e := probOf(p, int32(id)) * float64(n)
		if e == 0 {
			if c != 0 {
				return math.Inf(1), df
			}
			continue
		}
		df++
		d := float64(c) - e
		x += d * d / e
	}
	return x, df
}

// critical999 is the 0.999 quantile of chi-square for df ≤ 7.
var critical999 = []float64{0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32}

func chainPairs() []struct {
	name string
	p, q sample.Dist
} {
	rng := rand.New(rand.NewPCG(3, 4))
	rnd := func() sample.Dist {
		w := make([]float32, 8)
		var s float32
		for i := range w {
			w[i] = rng.Float32() + 0.05
			s += w[i]
		}
		for i := range w {
			w[i] /= s
		}
		return dense(w...)
	}
	return []struct {
		name string
		p, q sample.Dist
	}{
		{"seed example", dense(0.2, 0.5, 0.3), dense(0.5, 0.3, 0.2)},
		{"disjoint supports", dense(0.7, 0.3, 0, 0), dense(0, 0, 0.4, 0.6)},
		{"p equals q", dense(0.1, 0.2, 0.3, 0.4), dense(0.1, 0.2, 0.3, 0.4)},
		{"q has mass where p has none", dense(0.6, 0.4, 0), dense(0.2, 0.3, 0.5)},
		{"random V=8", rnd(), rnd()},
		{"sparse p and q", sample.Dist{IDs: []int32{3, 1, 0}, Probs: []float32{0.5, 0.3, 0.2}},
			sample.Dist{IDs: []int32{2, 3}, Probs: []float32{0.6, 0.4}}},
	}
}

func correct(p, q []sample.Dist, draft []int32, u Uniforms) (int, int32, error) {
	return VerifyChain(p, q, draft, u, nil)
}

// TestChainDistribution checks over 10^5 rounds per pair that the first
// emitted token is distributed as p, whatever q.
func TestChainDistribution(t *testing.T) {
	const n = 100_000
	for _, pc := range chainPairs() {
		for _, gamma := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/gamma=%d", pc.name, gamma), func(t *testing.T) {
				x, df := chiSquareFirst(t, pc.p, pc.q, gamma, n, correct)
				if df < 1 || x > critical999[df] {
					t.Errorf("chi-square = %.2f with %d df, want < %.2f", x, df, critical999[df])
				}
				if testing.Verbose() {
					t.Logf("chi-square = %.2f with %d df (critical %.2f)", x, df, critical999[df])
				}
			})
		}
	}
}

// acceptAlways is the classic bug: it keeps every proposal, so the output
// follows q, not p. The same test must catch it.
func acceptAlways(p, q []sample.Dist, draft []int32, u Uniforms) (int, int32, error) {
	return len(draft), Draw(p[len(draft)], u(len(draft), StreamSample)), nil
}

func TestChainDistributionCatchesWrongVerifier(t *testing.T) {
	const n = 100_000
	for _, pc := range chainPairs() {
		if pc.name == "p equals q" || pc.p.IDs != nil {
			continue // accepting everything is right when p = q
		}
		t.Run(pc.name, func(t *testing.T) {
			x, df := chiSquareFirst(t, pc.p, pc.q, 1, n, acceptAlways)
			if !(x > 100*critical999[max(df, 1)]) {
				t.Errorf("accept-always verifier: chi-square = %.2f with %d df; want far above %.2f", x, df, critical999[max(df, 1)])
			}
			if testing.Verbose() {
				t.Logf("accept-always verifier: chi-square = %.0f (critical %.2f)", x, critical999[max(df, 1)])
			}
		})
	}
}

func oneHot(id int32) sample.Dist { return sample.Dist{IDs: []int32{id}, Probs: []float32{1}} }

// Under greedy every Dist is one-hot: accept while the draft is the target's
// argmax, then emit the target's argmax, whatever the uniforms.
func TestChainGreedy(t *testing.T) {
	targetArgmax := []int32{5, 2, 7, 1}
	p := []sample.Dist{oneHot(5), oneHot(2), oneHot(7), oneHot(1)}
	for _, tc := range []struct {
		draft []int32
		acc   int
		next  int32
	}{
		{[]int32{5, 2, 7}, 3, 1},
		{[]int32{5, 2, 0}, 2, 7},
		{[]int32{5, 9, 7}, 1, 2},
		{[]int32{4, 2, 7}, 0, 5},
	} {
		q := []sample.Dist{oneHot(tc.draft[0]), oneHot(tc.draft[1]), oneHot(tc.draft[2])}
		for _, u := range []Uniforms{constU(0, 0, 0), constU(0.999, 0.999, 0.999), KeyedUniforms(1, 2, 3)} {
			acc, next, err := VerifyChain(p, q, tc.draft, u, nil)
			if err != nil || acc != tc.acc || next != tc.next {
				t.Errorf("draft %v: accepted %d next %d (%v), want %d, %d", tc.draft, acc, next, err, tc.acc, tc.next)
			}
		}
		// The emitted tokens are the greedy text.
		acc, next, _ := VerifyChain(p, q, tc.draft, KeyedUniforms(0, 0, 0), nil)
		got := append(append([]int32{}, tc.draft[:acc]...), next)
		for i, tok := range got {
			if tok != targetArgmax[i] {
				t.Errorf("draft %v emitted %v, greedy is %v", tc.draft, got, targetArgmax[:len(got)])
				break
			}
		}
	}
	// A stochastic draft against a greedy target reduces the same way.
	q := []sample.Dist{dense(0.2, 0.3, 0.1, 0.1, 0.1, 0.2)}
	for _, x := range []int32{0, 1, 5} {
		acc, next, _ := VerifyChain([]sample.Dist{oneHot(5), oneHot(2)}, q, []int32{x}, KeyedUniforms(4, 4, 4), nil)
		if x == 5 && (acc != 1 || next != 2) || x != 5 && (acc != 0 || next != 5) {
			t.Errorf("draft %d against greedy target: accepted %d next %d", x, acc, next)
		}
	}
}

// The bonus token is plain sampling's draw: VerifyChain with everything
// accepted emits what sample.Sampler.Next would at position t0+γ.
func TestChainBonusIsPlainSample(t *testing.T) {
	s, err := sample.New(sample.Options{Temperature: 0.8, TopK: 5, Seed: 99})
	if err != nil {
		t.Fatal(err)
	}
	logits := []float32{0.1, 2, -1, 0.5, 1.5, 0.3, 0.9}
	for r := range uint64(50) {
		d, err := s.Dist(logits, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		const t0 = 17
		_, next, err := VerifyChain([]sample.Dist{d}, nil, nil, KeyedUniforms(99, r, t0), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := s.Next(logits, nil, r, t0, nil)
		if next != want {
			t.Fatalf("request %d: bonus %d, plain sampling %d", r, next, want)
		}
	}
}

func TestDrawMatchesSampler(t *testing.T) {
	s, _ := sample.New(sample.Options{Temperature: 1})
	rng := rand.New(rand.NewPCG(8, 9))
	for range 2000 {
		n := 1 + rng.IntN(10)
		w := make([]float32, n)
		for i := range w {
			if rng.IntN(4) > 0 {
				w[i] = rng.Float32()
			}
		}
		d := dense(w...)
		if rng.IntN(2) == 0 {
			d.IDs = make([]int32, 0, n)
			for _, v := range rng.Perm(100)[:n] {
				d.IDs = append(d.IDs, int32(v))
			}
		}
		u := rng.Float64()
		if a, b := Draw(d, u), s.Sample(d, u); a != b {
			t.Fatalf("Draw(%v, %v) = %d, Sampler.Sample = %d", d, u, a, b)
		}
	}
}

func TestChainErrors(t *testing.T) {
	p := dense(0.5, 0.5)
	for _, tc := range []struct {
		name  string
		p, q  []sample.Dist
		draft []int32
		u     Uniforms
	}{
		{"short p", []sample.Dist{p}, []sample.Dist{p}, []int32{0}, constU(0, 0, 0)},
		{"short q", []sample.Dist{p, p}, nil, []int32{0}, constU(0, 0, 0)},
		{"nil uniforms", []sample.Dist{p}, nil, nil, nil},
		{"empty target", []sample.Dist{dense(0, 0)}, nil, nil, constU(0, 0, 0)},
	} {
		if _, _, err := VerifyChain(tc.p, tc.q, tc.draft, tc.u, nil); !errors.Is(err, ErrInput) {
			t.Errorf("%s: err = %v, want ErrInput", tc.name, err)
		}
	}
}

func TestChainNoAllocs(t *testing.T) {
	p := []sample.Dist{{IDs: []int32{3, 1, 0}, Probs: []float32{0.5, 0.3, 0.2}}, dense(0.5, 0.5)}
	q := []sample.Dist{{IDs: []int32{2, 3}, Probs: []float32{0.6, 0.4}}}
	var sc ChainScratch
	u := constU(0.99, 0.5, 0.5)
	VerifyChain(p, q, []int32{2}, u, &sc)
	if a := testing.AllocsPerRun(100, func() { VerifyChain(p, q, []int32{2}, u, &sc) }); a != 0 {
		t.Errorf("VerifyChain allocates %v times per call once warm", a)
	}
}
