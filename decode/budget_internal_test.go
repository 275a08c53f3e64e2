package decode

import (
	"math"
	"testing"
	"time"
)

// feed runs the chooser for rounds rounds against a synthetic machine: a
// target pass of r rows takes passCost(r), growing trees of n nodes
// draftCost(n), and the k-th best node of a tree has probability gain(k)
// (a draft that is the target: the accepted length is the expected one).
// It returns the budget chosen last.
func feed(c *budgetChooser, rounds int, passCost, draftCost func(float64) float64, gain func(int) float64) int {
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	var b int
	for range rounds {
		b = c.budget(1)
		probs := make([]float64, b)
		var exp float64
		for k := range probs {
			probs[k] = gain(k + 1)
			exp += probs[k]
		}
		c.drafted(b, sec(draftCost(float64(b))))
		c.acceptedLen(int(math.Round(c.tree(probs, b))), exp)
		c.pass(1+b, sec(passCost(float64(1+b))))
	}
	return b
}

// rateOf is the true tokens/s of budget b on the synthetic machine.
func rateOf(b int, passCost, draftCost func(float64) float64, gain func(int) float64) float64 {
	var acc float64
	for k := 1; k <= b; k++ {
		acc += gain(k)
	}
	return (acc + 1) / (passCost(float64(1+b)) + draftCost(float64(b)))
}

// The chooser picks a big budget when a pass costs about the same at any
// row count (streamed weights), a small one when every row costs (compute
// bound), and in between its pick's true rate is within 10% of the best
// candidate's.
func TestBudgetChooser(t *testing.T) {
	// An acceptance curve like a good draft's: the k-th node's chance
	// falls as a power of k.
	gain := func(k int) float64 { return 0.9 * math.Pow(float64(k), -0.6) }
	cheapDraft := func(n float64) float64 { return 0.001 + 0.0001*n }
	for _, c := range []struct {
		name     string
		pass     func(float64) float64
		min, max int
	}{
		{"flat (I/O bound)", func(r float64) float64 { return 0.5 + 0.0005*r }, 64, 128},
		{"steep (compute bound)", func(r float64) float64 { return 0.01 + 0.01*r }, 2, 8},
		{"between", func(r float64) float64 { return 0.2 + 0.004*r }, 8, 64},
	} {
		ch := newBudgetChooser(128)
		got := feed(ch, 60, c.pass, cheapDraft, gain)
		best, bestRate := 0, 0.0
		for _, b := range ch.cands {
			if r := rateOf(b, c.pass, cheapDraft, gain); r > bestRate {
				best, bestRate = b, r
			}
		}
		r := rateOf(got, c.pass, cheapDraft, gain)
		t.Logf("%s: chose %d (%.2f tok/s), best candidate %d (%.2f tok/s)", c.name, got, r, best, bestRate)
		if got < c.min || got > c.max {
			t.Errorf("%s: chose budget %d, want %d..%d", c.name, got, c.min, c.max)
		}
		if r < 0.9*bestRate {
			t.Errorf("%s: chose %d at %.3g tok/s, best %d at %.3g", c.name, got, r, best, bestRate)
		}
	}
}

// An expensive draft pulls the budget down even when target rows are free,
// and the pick stays within the engine's maximum.
func TestBudgetChooserDraftCostAndMax(t *testing.T) {
	gain := func(k int) float64 { return 0.9 * math.Pow(float64(k), -0.6) }
	flat := func(r float64) float64 { return 0.5 }
	if got := feed(newBudgetChooser(128), 60, flat, func(n float64) float64 { return 0.05 * n }, gain); got > 16 {
		t.Errorf("draft at 50 ms a node: chose %d, want ≤ 16", got)
	}
	ch := newBudgetChooser(48)
	if got := feed(ch, 60, flat, func(n float64) float64 { return 0 }, gain); got != 48 {
		t.Errorf("free rows, max 48: chose %d (candidates %v), want 48", got, ch.cands)
	}
	if got := feed(newBudgetChooser(1), 10, flat, flat, gain); got != 1 {
		t.Errorf("max 1: chose %d", got)
	}
}

// The fit ignores outliers: a few passes slowed tenfold move neither the
// slope nor the intercept.
func TestCostFitRobust(t *testing.T) {
	f := costFit{cap: 48}
	for i := range 40 {
		r := float64(1 + i%8*16)
		y := 0.3 + 0.002*r
		if i%10 == 3 {
			y *= 10
		}
		f.add(r, y)
	}
	if a, b := f.at(0), f.at(1)-f.at(0); math.Abs(a-0.3) > 1e-9 || math.Abs(b-0.002) > 1e-9 {
		t.Errorf("fit a=%g b=%g, want 0.3 and 0.002", a, b)
	}
}
