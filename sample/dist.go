package sample

import (
	"fmt"
	"math"
)

// Dist turns logits into the sampling distribution. In order: repetition
// penalty, temperature (logits/T), softmax (max-subtracted, float64 sums), top-k,
// top-p with Hugging Face semantics (sort descending, keep the smallest prefix
// whose mass reaches TopP, at least one token; mass measured after top-k),
// min-p (keep p ≥ MinP·p_max), renormalise. Tokens whose probability underflows
// to 0 are left out. With Temperature 0 the result is the argmax alone.
//
// logits is not modified. The result lives in sc (see Scratch). Errors: empty
// logits, a NaN or +Inf logit, all logits -Inf, a history id outside the
// vocabulary.
func (s *Sampler) Dist(logits []float32, history []int32, sc *Scratch) (Dist, error) {
	if sc == nil {
		sc = new(Scratch)
	}
	n := len(logits)
	if n == 0 {
		return Dist{}, ErrEmpty
	}
	if err := s.penalised(history, n, sc); err != nil {
		return Dist{}, err
	}
	if s.o.Temperature == 0 {
		id, err := s.argmax(logits, sc.pen)
		if err != nil {
			return Dist{}, err
		}
		sc.ids = append(sc.ids[:0], id)
		sc.probs = append(sc.probs[:0], 1)
		return Dist{IDs: sc.ids, Probs: sc.probs}, nil
	}

	var cand []Token
	sorted := false
	if k := s.o.TopK; k > 0 && k < n {
		var err error
		if cand, err = s.topKLogits(logits, sc); err != nil {
			return Dist{}, err
		}
		sorted = true
	} else {
		cand = sc.tokens(n)
		for i, v := range logits {
			if v != v || v > math.MaxFloat32 {
				return Dist{}, checkLogit(i, v)
			}
			cand[i] = Token{ID: int32(i), V: v}
		}
		for _, id := range sc.pen {
			cand[id].V = s.penalise(cand[id].V)
		}
	}

	// Temperature and softmax: w = exp((v - max)/T), in float64, stored back as
	// float32 weights (the max has weight exactly 1).
	vmax := float32(math.Inf(-1))
	if sorted {
		vmax = cand[0].V
	} else {
		for _, t := range cand {
			vmax = max(vmax, t.V)
		}
	}
	if math.IsInf(float64(vmax), -1) {
		return Dist{}, fmt.Errorf("%w: all %d logits are -Inf", ErrLogits, n)
	}
	invT := 1 / float64(s.o.Temperature)
	m := float64(vmax)
	var total float64
	for i := range cand {
		w := float32(math.Exp((float64(cand[i].V) - m) * invT))
		cand[i].V = w
		total += float64(w)
	}
	if sorted {
		// Distinct logits can round to equal weights; restore the documented
		// order (probability descending, then id). Already almost sorted.
		insertionSort(cand)
	}

	switch {
	case s.topP:
		// Grow a sorted prefix until it holds TopP of the mass: usually a few
		// hundred tokens, so selection beats sorting the whole vocabulary.
		target := float64(s.o.TopP) * total
		done := 0 // cand[:done] is sorted and holds the largest weights
		if sorted {
			done = len(cand)
		}
		var cum float64
		i, keep := 0, 0
		for keep == 0 {
			for ; i < done; i++ {
				cum += float64(cand[i].V)
				if cum >= target {
					keep = i + 1
					break
				}
			}
			switch {
			case keep > 0:
			case done == len(cand):
				keep = len(cand) // rounding kept the sum just short of target
			default:
				done += selectTop(cand[done:], max(64, 3*done))
			}
		}
		cand = cand[:keep]
		sorted = true
		if s.minP {
			cand = cutMinP(cand, s.o.MinP)
		}
	case s.minP:
		if sorted {
			cand = cutMinP(cand, s.o.MinP)
		} else {
			// min-p does not depend on the order, so filter before sorting.
			thr := float64(s.o.MinP) // p_max has weight 1
			w := 0
			for _, t := range cand {
				if float64(t.V) >= thr {
					cand[w] = t
					w++
				}
			}
			cand = cand[:w]
		}
	}
	if !sorted {
		// Zero weights can never be drawn: drop them before sorting.
		w := 0
		for _, t := range cand {
			if t.V > 0 {
				cand[w] = t
				w++
			}
		}
		cand = cand[:w]
		sortByWeight(cand, sc)
	}
	for len(cand) > 1 && cand[len(cand)-1].V == 0 {
		cand = cand[:len(cand)-1]
	}

	var sum float64
	for _, t := range cand {
		sum += float64(t.V)
	}
	sc.ids = sc.ids[:0]
	sc.probs = sc.probs[:0]
	for _, t := range cand {
		sc.ids = append(sc.ids, t.ID)
		sc.probs = append(sc.probs, float32(float64(t.V)/sum))
	}
	// A subnormal weight can still round to probability 0 once divided by
	// the sum; it could never be drawn, so it leaves the distribution too.
	k := len(sc.probs)
	for k > 1 && sc.probs[k-1] == 0 {
		k--
	}
	return Dist{IDs: sc.ids[:k], Probs: sc.probs[:k]}, nil
}

// cutMinP keeps the prefix of the sorted candidates with weight ≥ minP·w_max.
func cutMinP(cand []Token, minP float32) []Token {
	thr := float64(minP) * float64(cand[0].V)
	for i := 1; i < len(cand); i++ {
		if float64(cand[i].V) < thr {
			return cand[:i]
		}
	}
	return cand
}

// LogSumExp is ln Σ exp(x_i), in float64 with the largest value taken out
// first; NaN if any x_i is NaN, −Inf if every one is −Inf. A token's
// log-probability under the model is x_tok − LogSumExp(x): what beam search
// ranks by, best_of sums, eval scores and the server reports as logprobs.
func LogSumExp(x []float32) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, float64(v)) // max propagates NaN
	}
	if math.IsInf(m, -1) {
		return m
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - m)
	}
	return m + math.Log(sum)
}

// LogSoftmax writes ln softmax(x) to dst (len(x) long): x_i − LogSumExp(x).
func LogSoftmax(dst, x []float32) {
	lse := LogSumExp(x)
	for i, v := range x {
		dst[i] = float32(float64(v) - lse)
	}
}
