package decode

import (
	"slices"
	"time"
)

// The tree budget that maximises tokens per second depends on the machine
// and on where the target's weights live (the SpecExec paper, Appendix D):
// when a target pass is bound by reading streamed weights, a 128-row pass
// costs about what a 1-row pass costs and a big tree is nearly free; when it
// is bound by compute, every row costs and a small tree wins. budgetChooser
// picks the budget as SpecExec runs (SpecOptions.AutoBudget) from three
// curves it measures:
//
//   - the target pass's wall time against its row count, a robust line
//     a + b·rows (Theil–Sen) over the recent passes, drafted or plain;
//   - the draft's time to grow the step's trees against their nodes, the
//     same kind of line;
//   - the acceptance curve: the k-th best node of a grown tree has draft
//     probability p_k of being on the accepted path, so a tree of budget B
//     accepts Σ_{k≤B} p_k tokens on average; the p_k are averaged over the
//     trees grown, and the sum is scaled by the ratio of the accepted
//     lengths seen to those the trees predicted (a draft that is over- or
//     under-confident about the target).
//
// Every few rounds it picks the candidate budget (powers of two up to the
// maximum the engine was sized for) that maximises
// (accepted(B) + 1) / (draft(B) + target(1 + B)) per drafted sequence. The
// first two rounds probe budgets 8 and 32, so the cost lines have two sizes;
// past the largest budget grown, p_k is taken as the last one seen, an
// optimistic guess: when rows are cheap the chooser tries a larger tree and
// learns its real curve, when they are dear it never pays for the probe (a
// 129-row pass over compute-bound weights costs many small ones).
// The budget never changes the text (SpecExec's output is plain decoding's
// for any tree), only the speed.
type budgetChooser struct {
	max   int
	cands []int
	// warm lists the budgets of the first rounds, one round each.
	warm   []int
	every  int // rounds between choices
	rounds int
	cur    int

	target, draft costFit
	// gain[k] is the mean draft probability of the (k+1)-th best node, over
	// the trees that had a budget above k; n[k] how many trees that is.
	gain []float64
	n    []int
	// seen and predicted are decayed sums of the accepted lengths and of
	// the trees' expected accepted lengths, for the calibration.
	seen, predicted float64
}

// newBudgetChooser chooses budgets in 1..max.
func newBudgetChooser(max int) *budgetChooser {
	c := &budgetChooser{max: max, every: 4, gain: make([]float64, max), n: make([]int, max)}
	for b := 2; b < max; b *= 2 {
		c.cands = append(c.cands, b)
	}
	c.cands = append(c.cands, max)
	c.warm = []int{min(8, max)}
	if max > 8 {
		c.warm = append(c.warm, min(32, max))
	}
	c.target.cap, c.draft.cap = 48, 48
	c.cur = c.warm[0]
	return c
}

// budget returns the budget of the next round, which drafts for n sequences.
func (c *budgetChooser) budget(n int) int {
	switch {
	case c.rounds < len(c.warm):
		c.cur = c.warm[c.rounds]
	case (c.rounds-len(c.warm))%c.every == 0:
		c.cur = c.choose(n)
	}
	c.rounds++
	return c.cur
}

// choose returns the candidate with the best modelled rate for n drafted
// sequences.
func (c *budgetChooser) choose(n int) int {
	n = max(n, 1)
	best, bestRate := c.cur, -1.0
	for _, b := range c.cands {
		r := c.rate(b, n)
		if r > bestRate {
			best, bestRate = b, r
		}
	}
	return best
}

// rate is the modelled tokens per second of budget b with n drafted
// sequences in a step.
func (c *budgetChooser) rate(b, n int) float64 {
	t := c.draft.at(float64(n*b)) + c.target.at(float64(n*(1+b)))
	if !(t > 0) {
		t = 1e-9
	}
	return float64(n) * (c.accepted(b) + 1) / t
}

// accepted is the expected accepted length of a tree of budget b.
func (c *budgetChooser) accepted(b int) float64 {
	var sum, last float64
	for k := range b {
		if c.n[k] > 0 {
			last = c.gain[k]
		}
		sum += last
	}
	cal := 1.0
	if c.predicted > 0 {
		cal = min(max(c.seen/c.predicted, 0.05), 2)
	}
	return cal * sum
}

// tree records a grown tree's node probabilities (best first, as
// spec.Tree.Probs gives them) under its budget, and returns its expected
// accepted length, for acceptedLen.
func (c *budgetChooser) tree(probs []float64, budget int) float64 {
	var exp float64
	for k := range min(budget, c.max) {
		p := 0.0 // a tree that stopped short of its budget: no node there
		if k < len(probs) {
			p = probs[k]
		}
		exp += p
		c.n[k]++
		// A running mean over the first trees, then an exponential one (the
		// acceptance changes with the text).
		c.gain[k] += (p - c.gain[k]) / float64(min(c.n[k], 64))
	}
	return exp
}

// acceptedLen records that a tree whose expected accepted length was
// predicted accepted k nodes.
func (c *budgetChooser) acceptedLen(k int, predicted float64) {
	const decay = 0.98
	c.seen = c.seen*decay + float64(k)
	c.predicted = c.predicted*decay + predicted
}

// pass records a target pass of rows rows that took d.
func (c *budgetChooser) pass(rows int, d time.Duration) { c.target.add(float64(rows), d.Seconds()) }

// drafted records that growing trees of nodes nodes in all took d.
func (c *budgetChooser) drafted(nodes int, d time.Duration) { c.draft.add(float64(nodes), d.Seconds()) }

// costFit is a robust line y = a + b·x over the last cap samples: the
// Theil–Sen estimator (b the median of the slopes between samples of
// different x, a the median of y − b·x), so a pass slowed by another
// process or a page fault does not move it.
type costFit struct {
	cap  int
	x, y []float64
	next int
	a, b float64
	ok   bool
}

func (f *costFit) add(x, y float64) {
	if len(f.x) < f.cap {
		f.x, f.y = append(f.x, x), append(f.y, y)
	} else {
		f.x[f.next], f.y[f.next] = x, y
		f.next = (f.next + 1) % f.cap
	}
	f.ok = false
}

func (f *costFit) fit() {
	f.ok = true
	f.a, f.b = 0, 0
	if len(f.x) == 0 {
		return
	}
	var slopes []float64
	for i := range f.x {
		for j := i + 1; j < len(f.x); j++ {
			if dx := f.x[j] - f.x[i]; dx != 0 {
				slopes = append(slopes, (f.y[j]-f.y[i])/dx)
			}
		}
	}
	if len(slopes) > 0 {
		f.b = max(median(slopes), 0)
	}
	res := make([]float64, len(f.x))
	for i := range f.x {
		res[i] = f.y[i] - f.b*f.x[i]
	}
	f.a = max(median(res), 0)
	if len(slopes) == 0 && f.x[0] > 0 {
		// One size seen: cost proportional to size is the only line
		// through it that does not favour sizes never tried.
		f.a, f.b = 0, median(f.y)/f.x[0]
	}
}

// at is the fitted cost of x.
func (f *costFit) at(x float64) float64 {
	if !f.ok {
		f.fit()
	}
	return f.a + f.b*x
}

func median(x []float64) float64 {
	s := slices.Clone(x)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
