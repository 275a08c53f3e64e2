package sample

import (
	"fmt"
	"math"
)

// A Processor transforms one row of logits in place before a sampler turns
// it into a distribution: a logit bias, next a grammar's mask of the tokens
// that keep the output in its language. history is the tokens up to and
// including the one the logits were computed at: the prompt, the generated
// tokens and, inside a draft tree or a beam, the path to the row. A
// processor must depend on nothing else, so that every decoding strategy
// (plain, SpecExec trees, chains, beams) gets the same distribution at the
// same prefix, and a draft model's row the same transformation as the
// target's.
//
// The repetition penalty is not one: it is a sampler option (Options), applied
// as the sampler reads the row, without a pass over it.
type Processor interface {
	Process(logits []float32, history []int32) error
}

// LogitBias adds a bias to the logits of some tokens, as OpenAI's and
// llama.cpp's logit_bias do: -Inf bans a token; a bias of ±100 in practice
// bans or forces it.
type LogitBias map[int32]float32

// Process adds each bias to its token's logit.
func (b LogitBias) Process(logits []float32, _ []int32) error {
	for id, v := range b {
		if id < 0 || int(id) >= len(logits) {
			return fmt.Errorf("%w: logit_bias names token %d, the vocabulary has %d", ErrOptions, id, len(logits))
		}
		logits[id] += v
	}
	return nil
}

// Validate checks every bias is a number (-Inf allowed: a ban).
func (b LogitBias) Validate() error {
	for id, v := range b {
		if v != v || math.IsInf(float64(v), 1) {
			return fmt.Errorf("%w: logit_bias[%d] = %v, want a number or -Inf", ErrOptions, id, v)
		}
		if id < 0 {
			return fmt.Errorf("%w: logit_bias names token %d, want an id ≥ 0", ErrOptions, id)
		}
	}
	return nil
}
