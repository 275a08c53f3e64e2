// Package eval measures how well a model predicts a text, and how far a model
// (quantized, pruned, converted) has moved from a reference: perplexity, the
// mean KL divergence KL(P_ref ‖ P_model) of the next-token distributions, and
// top-1 agreement, the three numbers llama.cpp's perplexity tool reports with
// --kl-divergence ("Mean PPL", "Mean KLD", "Same top p").
//
// Stats is the pure arithmetic over rows of logits; Evaluate drives one or two
// loaded models over a tokenized text in windows; SampleCorpus writes a
// fixed-seed text sampled from a model, so a test corpus can be regenerated
// instead of trusted.
//
// Every log-softmax is computed in float64: a 32000-way float32 softmax loses
// enough precision that the KL of two nearly identical models (the case that
// matters when judging a quantization) drowns in rounding.
package eval

import (
	"errors"
	"fmt"
	"math"

	"github.com/sluicehq/sluice/sample"
)

// ErrShape reports logits rows of different lengths or a next token outside
// the vocabulary.
var ErrShape = errors.New("eval: shape mismatch")

// Stats accumulates per-position scores. The zero value is ready to use.
type Stats struct {
	// Tokens is the number of scored positions.
	Tokens int
	// NLL is the sum over scored positions of −ln P_model(next).
	NLL float64
	// RefTokens is the number of positions scored against a reference
	// (Add with refLogits); RefNLL, KL and Top1 are sums over those.
	RefTokens int
	RefNLL    float64
	KL        float64 // Σ KL(P_ref ‖ P_model), nats
	Top1      int     // positions whose argmax agrees (ties: the lowest id)

	lp, lq []float64 // scratch
}

// Add scores one position: logits is the model's row predicting next,
// refLogits the reference's row for the same position, or nil to measure
// perplexity only.
func (s *Stats) Add(logits, refLogits []float32, next int32) error {
	if next < 0 || int(next) >= len(logits) {
		return fmt.Errorf("%w: next token %d outside a vocabulary of %d", ErrShape, next, len(logits))
	}
	s.lq = LogSoftmax(s.lq, logits)
	s.Tokens++
	s.NLL -= s.lq[next]
	if refLogits == nil {
		return nil
	}
	if len(refLogits) != len(logits) {
		return fmt.Errorf("%w: reference row has %d logits, model row %d", ErrShape, len(refLogits), len(logits))
	}
	s.lp = LogSoftmax(s.lp, refLogits)
	s.RefTokens++
	s.RefNLL -= s.lp[next]
	s.KL += KL(s.lp, s.lq)
	if Argmax(logits) == Argmax(refLogits) {
		s.Top1++
	}
	return nil
}

// Merge adds o's sums to s (windows scored in parallel).
func (s *Stats) Merge(o *Stats) {
	s.Tokens += o.Tokens
	s.NLL += o.NLL
	s.RefTokens += o.RefTokens
	s.RefNLL += o.RefNLL
	s.KL += o.KL
	s.Top1 += o.Top1
}

// Perplexity is exp(mean NLL); NaN when nothing was scored.
func (s *Stats) Perplexity() float64 { return expMean(s.NLL, s.Tokens) }

// RefPerplexity is the reference model's perplexity over the same positions.
func (s *Stats) RefPerplexity() float64 { return expMean(s.RefNLL, s.RefTokens) }

// MeanKL is the mean KL(P_ref ‖ P_model) in nats; NaN without a reference.
func (s *Stats) MeanKL() float64 { return mean(s.KL, s.RefTokens) }

// Top1Agreement is the fraction of positions where both models' most likely
// next token is the same; NaN without a reference.
func (s *Stats) Top1Agreement() float64 { return mean(float64(s.Top1), s.RefTokens) }

func mean(sum float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

func expMean(sum float64, n int) float64 { return math.Exp(mean(sum, n)) }

// LogSoftmax writes ln softmax(logits) into dst (grown as needed) and returns
// it, in float64 with the max subtracted first. A row whose logits are all
// −Inf has no distribution: every entry becomes NaN, so a broken model shows
// as a NaN perplexity instead of a plausible number.
func LogSoftmax(dst []float64, logits []float32) []float64 {
	if cap(dst) < len(logits) {
		dst = make([]float64, len(logits))
	}
	dst = dst[:len(logits)]
	lse := sample.LogSumExp(logits)
	for i, x := range logits {
		dst[i] = float64(x) - lse
	}
	return dst
}

// KL is Σ p_i (ln p_i − ln q_i) for log-probabilities lp and lq of equal
// length. Terms with p_i = 0 contribute nothing (0·ln 0 = 0), so a token the
// reference never predicts costs nothing even when the model gives it q_i = 0;
// a token the reference predicts and the model rules out makes KL +Inf.
func KL(lp, lq []float64) float64 {
	var kl float64
	for i, a := range lp {
		p := math.Exp(a)
		if p == 0 {
			continue
		}
		kl += p * (a - lq[i])
	}
	return kl
}

// Argmax is the index of the largest logit, the lowest index among ties (as
// the greedy sampler picks). NaNs are never chosen; an empty or all-NaN row
// gives -1.
func Argmax(x []float32) int {
	best := -1
	for i, v := range x {
		if v != v {
			continue
		}
		if best < 0 || v > x[best] {
			best = i
		}
	}
	return best
}
