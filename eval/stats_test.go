package eval

import (
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestStatsAdd(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	tests := []struct {
		name           string
		model, ref     [][]float32
		next           []int32
		ppl, kl, top1  float64
		refPPL         float64
		exactKL, noRef bool
	}{
		{
			name:  "uniform model: perplexity is the vocabulary size",
			model: [][]float32{{0, 0, 0, 0, 0, 0, 0}, {3, 3, 3, 3, 3, 3, 3}, {-2, -2, -2, -2, -2, -2, -2}},
			next:  []int32{0, 6, 3}, ppl: 7, noRef: true,
		},
		{
			name:  "p(next) = 1/2 everywhere: perplexity 2",
			model: [][]float32{{ln(0.5), ln(0.25), ln(0.25)}, {0, 0}},
			next:  []int32{0, 1}, ppl: 2, noRef: true,
		},
		{
			name:  "identical rows: KL exactly 0, top-1 exactly 1",
			model: [][]float32{{0.1, -3, 2.5, 7}, {1e-3, 4, 4, -50}},
			ref:   [][]float32{{0.1, -3, 2.5, 7}, {1e-3, 4, 4, -50}},
			next:  []int32{2, 3}, kl: 0, top1: 1, exactKL: true,
			ppl: math.Exp(-(float64(LogSoftmax(nil, []float32{0.1, -3, 2.5, 7})[2]) + LogSoftmax(nil, []float32{1e-3, 4, 4, -50})[3]) / 2),
		},
		{
			// P_ref = (1/2, 1/2), P_model = (1/4, 3/4):
			// KL = ½ ln(½/¼) + ½ ln(½/¾) = ½ ln 2 + ½ ln(2/3) = ½ ln(4/3).
			name:  "two tokens, known KL",
			model: [][]float32{{ln(0.25), ln(0.75)}},
			ref:   [][]float32{{0, 0}},
			next:  []int32{1}, kl: 0.5 * math.Log(4.0/3), top1: 0,
			ppl: 4.0 / 3, refPPL: 2,
		},
		{
			// The reference puts no mass on token 2, the model does: that
			// costs nothing in KL(P_ref ‖ P_model) beyond the renormalisation.
			name:  "reference rules a token out",
			model: [][]float32{{0, 0, 0}},
			ref:   [][]float32{{0, 0, float32(math.Inf(-1))}},
			next:  []int32{0}, kl: math.Log(3.0 / 2), top1: 1, ppl: 3, refPPL: 2,
		},
		{
			name:  "model rules out a token the reference predicts: KL +Inf",
			model: [][]float32{{0, float32(math.Inf(-1))}},
			ref:   [][]float32{{0, 0}},
			next:  []int32{0}, kl: math.Inf(1), top1: 1, ppl: 1, refPPL: 2,
		},
		{
			name:  "top-1 ties break to the lowest id",
			model: [][]float32{{1, 1, 0}, {0, 5, 5}, {2, 2, 2}},
			ref:   [][]float32{{0, 1, 1}, {0, 5, 5}, {2, 2, 2}},
			next:  []int32{0, 1, 2},
			top1:  2.0 / 3, kl: math.NaN(), ppl: math.NaN(),
		},
		{
			name:  "huge logits do not overflow",
			model: [][]float32{{1e30, 0}, {-1e30, 1e30}},
			next:  []int32{0, 1}, ppl: 1, noRef: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Stats
			for i := range tc.model {
				var r []float32
				if tc.ref != nil {
					r = tc.ref[i]
				}
				if err := s.Add(tc.model[i], r, tc.next[i]); err != nil {
					t.Fatal(err)
				}
			}
			if s.Tokens != len(tc.model) {
				t.Errorf("Tokens = %d, want %d", s.Tokens, len(tc.model))
			}
			if !math.IsNaN(tc.ppl) && !near(s.Perplexity(), tc.ppl, 1e-6*tc.ppl) {
				t.Errorf("Perplexity = %v, want %v", s.Perplexity(), tc.ppl)
			}
			if tc.noRef {
				if s.RefTokens != 0 || !math.IsNaN(s.MeanKL()) || !math.IsNaN(s.Top1Agreement()) {
					t.Errorf("no reference, yet RefTokens %d, MeanKL %v, Top1 %v", s.RefTokens, s.MeanKL(), s.Top1Agreement())
				}
				return
			}
			switch {
			case math.IsNaN(tc.kl):
			case tc.exactKL && s.MeanKL() != tc.kl:
				t.Errorf("MeanKL = %v, want exactly %v", s.MeanKL(), tc.kl)
			case math.IsInf(tc.kl, 1) && !math.IsInf(s.MeanKL(), 1):
				t.Errorf("MeanKL = %v, want +Inf", s.MeanKL())
			case !math.IsInf(tc.kl, 0) && !near(s.MeanKL(), tc.kl, 1e-7):
				t.Errorf("MeanKL = %v, want %v", s.MeanKL(), tc.kl)
			}
			if tc.exactKL && s.Top1Agreement() != tc.top1 {
				t.Errorf("Top1Agreement = %v, want exactly %v", s.Top1Agreement(), tc.top1)
			}
			if !near(s.Top1Agreement(), tc.top1, 1e-12) {
				t.Errorf("Top1Agreement = %v, want %v", s.Top1Agreement(), tc.top1)
			}
			if tc.refPPL != 0 && !near(s.RefPerplexity(), tc.refPPL, 1e-6) {
				t.Errorf("RefPerplexity = %v, want %v", s.RefPerplexity(), tc.refPPL)
			}
		})
	}
}

func TestStatsErrors(t *testing.T) {
	tests := []struct {
		name       string
		model, ref []float32
		next       int32
	}{
		{"next past the vocabulary", []float32{0, 0}, nil, 2},
		{"negative next", []float32{0, 0}, nil, -1},
		{"empty row", nil, nil, 0},
		{"reference row of another length", []float32{0, 0}, []float32{0, 0, 0}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Stats
			if err := s.Add(tc.model, tc.ref, tc.next); !errors.Is(err, ErrShape) {
				t.Fatalf("err = %v, want ErrShape", err)
			}
		})
	}
}

func TestEmptyStats(t *testing.T) {
	var s Stats
	for name, v := range map[string]float64{"Perplexity": s.Perplexity(), "MeanKL": s.MeanKL(), "Top1Agreement": s.Top1Agreement()} {
		if !math.IsNaN(v) {
			t.Errorf("%s of nothing = %v, want NaN", name, v)
		}
	}
}

func TestMerge(t *testing.T) {
	rows := [][]float32{{0, 1, 2}, {2, 1, 0}, {0, 0, 3}, {1, 1, 1}}
	refs := [][]float32{{0, 1, 2.5}, {0, 1, 2}, {0, 0, 3}, {1, 2, 1}}
	var all, a, b Stats
	for i := range rows {
		half := &a
		if i >= 2 {
			half = &b
		}
		for _, s := range []*Stats{&all, half} {
			if err := s.Add(rows[i], refs[i], int32(i%3)); err != nil {
				t.Fatal(err)
			}
		}
	}
	a.Merge(&b)
	opt := cmp.Comparer(func(x, y float64) bool { return near(x, y, 1e-12) })
	if d := cmp.Diff(all, a, opt, cmp.AllowUnexported(Stats{}), cmp.FilterPath(func(p cmp.Path) bool {
		f := p.Last().String()
		return f == ".lp" || f == ".lq"
	}, cmp.Ignore())); d != "" {
		t.Errorf("merged halves differ from one pass (-want +got):\n%s", d)
	}
}

func TestLogSoftmaxAllNegInf(t *testing.T) {
	inf := float32(math.Inf(-1))
	for _, v := range LogSoftmax(nil, []float32{inf, inf}) {
		if !math.IsNaN(v) {
			t.Fatalf("log-softmax of all −Inf = %v, want NaN", v)
		}
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	tests := []struct {
		name string
		x    []float32
		want int
	}{
		{"empty", nil, -1},
		{"one", []float32{-3}, 0},
		{"tie", []float32{0, 2, 2}, 1},
		{"NaN skipped", []float32{nan, 1, nan, 0}, 1},
		{"all NaN", []float32{nan, nan}, -1},
		{"-Inf only", []float32{float32(math.Inf(-1))}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Argmax(tc.x); got != tc.want {
				t.Errorf("Argmax(%v) = %d, want %d", tc.x, got, tc.want)
			}
		})
	}
}

func TestWindows(t *testing.T) {
	text := []int32{10, 11, 12, 13, 14, 15, 16}
	tests := []struct {
		name string
		bos  int32
		ctx  int
		want [][]int32
	}{
		{"bos, ctx 4", 1, 4, [][]int32{{1, 10, 11, 12}, {1, 13, 14, 15}, {1, 16}}},
		{"bos, ctx 8: one window", 1, 8, [][]int32{{1, 10, 11, 12, 13, 14, 15, 16}}},
		{"bos, ctx 2: one token each", 1, 2, [][]int32{{1, 10}, {1, 11}, {1, 12}, {1, 13}, {1, 14}, {1, 15}, {1, 16}}},
		{"no bos: windows share one token", -1, 4, [][]int32{{10, 11, 12, 13}, {13, 14, 15, 16}}},
		{"no bos, ctx 3", -1, 3, [][]int32{{10, 11, 12}, {12, 13, 14}, {14, 15, 16}}},
		{"ctx 1: nothing", 1, 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Windows(text, tc.bos, tc.ctx)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// every text token is a target exactly once
			scored := 0
			for _, w := range got {
				scored += len(w) - 1
			}
			if tc.want != nil && scored != len(text)-btoi(tc.bos < 0) {
				t.Errorf("%d targets, want %d", scored, len(text))
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
