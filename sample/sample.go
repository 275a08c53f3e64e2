// Package sample turns a row of logits into the next token.
//
// It has three parts that the decoding modes combine:
//
//   - transforms (repetition penalty, temperature, softmax, top-k, top-p, min-p)
//     that turn logits into a sparse distribution, [Sampler.Dist];
//   - an inverse-CDF draw from a distribution given a uniform number, [Sampler.Sample];
//   - a counter-based uniform generator, [Uniform], keyed by (seed, request,
//     position) so the same seed gives the same text in every decoding mode,
//     whatever order the draws happen in (DESIGN.md invariant 3).
//
// Speculative verification needs the distribution, not only the chosen token,
// which is why Dist and Sample are separate steps (ollama x/mlxrunner does the same).
//
// The package is a leaf: it imports nothing of ours.
package sample

import (
	"fmt"
	"math"
)

// Token is one candidate: an id and a value that is a logit or a weight,
// depending on the stage of the pipeline.
type Token struct {
	ID int32
	V  float32
}

// Dist is a distribution over token ids. Dist returns it sparse: IDs[i] has
// probability Probs[i], sorted by probability descending (ties by lower id), and
// ids left out have probability 0. Dense (IDs == nil, Probs indexed by id) is
// accepted by Sample too.
type Dist struct {
	IDs   []int32
	Probs []float32
}

// Len is the number of entries.
func (d Dist) Len() int { return len(d.Probs) }

// Scratch holds the buffers of one decode loop so that, once warm, Dist and Next
// do not allocate. A Dist returned by Sampler.Dist points into its Scratch and
// is valid until the next call that uses the same Scratch. The zero value is
// ready to use; a Scratch must not be used by two goroutines at once.
type Scratch struct {
	toks  []Token // candidates (vocabulary-sized when no top-k)
	tmp   []Token // radix-sort buffer
	pen   []int32 // distinct penalised ids, ascending
	ids   []int32
	probs []float32
}

func (sc *Scratch) tokens(n int) []Token {
	if cap(sc.toks) < n {
		sc.toks = make([]Token, n)
	}
	return sc.toks[:n]
}

// Sampler applies one Options. It holds no mutable state, so one Sampler may be
// shared by goroutines that each bring their own Scratch.
type Sampler struct {
	o       Options
	lastN   int
	penalty bool
	topP    bool
	minP    bool
}

// New validates o and returns a Sampler.
func New(o Options) (*Sampler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	s := &Sampler{o: o, lastN: o.RepeatLastN}
	if s.lastN == 0 {
		s.lastN = defaultRepeatLastN
	}
	s.penalty = o.RepeatPenalty != 0 && o.RepeatPenalty != 1
	s.topP = o.TopP > 0 && o.TopP < 1
	s.minP = o.MinP > 0
	return s, nil
}

// Options returns the options s was built with.
func (s *Sampler) Options() Options { return s.o }

// Next picks the token for position t of request r: the argmax after the
// repetition penalty when Temperature is 0 (ties → lowest id), otherwise
// Sample(Dist(logits, history), Uniform(Seed, r, t)).
func (s *Sampler) Next(logits []float32, history []int32, r, t uint64, sc *Scratch) (int32, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	if s.o.Temperature == 0 {
		if len(logits) == 0 {
			return -1, ErrEmpty
		}
		if err := s.penalised(history, len(logits), sc); err != nil {
			return -1, err
		}
		return s.argmax(logits, sc.pen)
	}
	d, err := s.Dist(logits, history, sc)
	if err != nil {
		return -1, err
	}
	return s.Sample(d, Uniform(s.o.Seed, r, t)), nil
}

// Sample draws from d by inverse CDF in d's order: the first entry whose
// cumulative probability exceeds u·Σp. Entries with probability ≤ 0 (or NaN)
// are never chosen. It returns -1 when d has no positive entry.
func (s *Sampler) Sample(d Dist, u float64) int32 {
	return Draw(d, u)
}

// Draw is Sample without a Sampler, for verifiers that draw from
// distributions they built: weights need not sum to 1.
func Draw(d Dist, u float64) int32 {
	var total float64
	for _, p := range d.Probs {
		if p > 0 {
			total += float64(p)
		}
	}
	if total == 0 || math.IsInf(total, 0) {
		return -1
	}
	target := u * total
	var cum float64
	last := -1
	for i, p := range d.Probs {
		if !(p > 0) {
			continue
		}
		cum += float64(p)
		last = i
		if target < cum {
			break
		}
	}
	if d.IDs == nil {
		return int32(last)
	}
	return d.IDs[last]
}

// penalised fills sc.pen with the distinct ids of the last lastN history tokens,
// ascending, or empties it when the penalty is off.
func (s *Sampler) penalised(history []int32, vocab int, sc *Scratch) error {
	sc.pen = sc.pen[:0]
	if !s.penalty {
		return nil
	}
	if len(history) > s.lastN {
		history = history[len(history)-s.lastN:]
	}
	for _, id := range history {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("%w: token %d, vocabulary has %d", ErrHistory, id, vocab)
		}
	}
	sc.pen = append(sc.pen, history...)
	sortInt32(sc.pen)
	w := 0
	for i, id := range sc.pen {
		if i == 0 || id != sc.pen[w-1] {
			sc.pen[w] = id
			w++
		}
	}
	sc.pen = sc.pen[:w]
	return nil
}

// penalise applies the CTRL rule to one logit.
func (s *Sampler) penalise(v float32) float32 {
	if v > 0 {
		return v / s.o.RepeatPenalty
	}
	return v * s.o.RepeatPenalty
}

// checkLogit rejects values softmax cannot handle.
func checkLogit(i int, v float32) error {
	if v != v {
		return fmt.Errorf("%w: logit %d is NaN", ErrLogits, i)
	}
	if math.IsInf(float64(v), 1) {
		return fmt.Errorf("%w: logit %d is +Inf", ErrLogits, i)
	}
	return nil
}

// argmax returns the index of the largest penalised logit, the lowest on ties.
// pen is the ascending list of penalised ids. The vocabulary is scanned in
// runs between penalised ids so the inner loop has no per-element penalty test.
func (s *Sampler) argmax(logits []float32, pen []int32) (int32, error) {
	best, bestV, bad := -1, float32(math.Inf(-1)), -1
	lo := 0
	for _, id := range pen {
		if best, bestV, bad = argmaxRange(logits, lo, int(id), best, bestV); bad >= 0 {
			return -1, checkLogit(bad, logits[bad])
		}
		if v := s.penalise(logits[id]); !(v <= bestV) {
			if err := checkLogit(int(id), v); err != nil {
				return -1, err
			}
			best, bestV = int(id), v
		}
		lo = int(id) + 1
	}
	if best, _, bad = argmaxRange(logits, lo, len(logits), best, bestV); bad >= 0 {
		return -1, checkLogit(bad, logits[bad])
	}
	if best < 0 {
		// A NaN or +Inf fails the comparison and is reported above, so
		// nothing beat -Inf only when every logit is -Inf.
		return -1, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, len(logits))
	}
	return int32(best), nil
}

// argmaxRange folds x[lo:hi] into (best, bestV), keeping the first maximum. It
// stops at the first NaN or +Inf and returns its index as bad (else -1).
//
// Eight logits at a time are first tested together: past the first few
// hundred ids a new maximum is rare, so most blocks take eight compares
// and one loop step, and only a block holding a larger, NaN or +Inf logit
// is walked one by one (argmaxOne, the same tests in the same order, so
// the same answer). 32 sequences of 32k logits a step spent 3% of a 110m
// decode in the one-by-one loop.
func argmaxRange(x []float32, lo, hi, best int, bestV float32) (int, float32, int) {
	i := lo
	for ; i+8 <= hi; i += 8 {
		c := x[i : i+8 : i+8]
		if c[0] <= bestV && c[1] <= bestV && c[2] <= bestV && c[3] <= bestV &&
			c[4] <= bestV && c[5] <= bestV && c[6] <= bestV && c[7] <= bestV {
			continue
		}
		var bad int
		if best, bestV, bad = argmaxOne(x, i, i+8, best, bestV); bad >= 0 {
			return best, bestV, bad
		}
	}
	return argmaxOne(x, i, hi, best, bestV)
}

// argmaxOne is argmaxRange one logit at a time.
func argmaxOne(x []float32, lo, hi, best int, bestV float32) (int, float32, int) {
	for i := lo; i < hi; i++ {
		if v := x[i]; !(v <= bestV) {
			if v != v || v > math.MaxFloat32 {
				return best, bestV, i
			}
			best, bestV = i, v
		}
	}
	return best, bestV, -1
}
