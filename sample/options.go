package sample

import (
	"errors"
	"fmt"
	"math"
)

// Errors returned by Options.Validate and Sampler.Dist. Wrapped errors carry the
// field or the logit index.
var (
	ErrOptions = errors.New("sample: invalid options")
	ErrEmpty   = errors.New("sample: empty logits")
	ErrLogits  = errors.New("sample: invalid logits")
	ErrHistory = errors.New("sample: history token out of vocabulary")
)

// defaultRepeatLastN is llama.cpp's default penalty window.
const defaultRepeatLastN = 64

// Options configure a Sampler. The zero value is greedy decoding with no penalty.
type Options struct {
	Temperature float32 // 0 = greedy (argmax, ties → lowest id)
	TopK        int     // 0 = off
	TopP, MinP  float32 // 0 (or TopP 1) = off
	// RepeatPenalty follows llama.cpp and CTRL: over the distinct ids among the
	// last RepeatLastN history tokens, a logit > 0 becomes logit/p and any other
	// logit becomes logit*p. 0 or 1 = off.
	RepeatPenalty float32
	RepeatLastN   int // 0 → 64
	Seed          uint64
}

// Validate reports the first out-of-range field by name.
func (o Options) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrOptions, field, v, want)
	}
	switch {
	case isNaN32(o.Temperature) || o.Temperature < 0 || math.IsInf(float64(o.Temperature), 1):
		return bad("Temperature", o.Temperature, "finite and >= 0")
	case o.TopK < 0:
		return bad("TopK", o.TopK, ">= 0")
	case isNaN32(o.TopP) || o.TopP < 0 || o.TopP > 1:
		return bad("TopP", o.TopP, "in [0, 1]")
	case isNaN32(o.MinP) || o.MinP < 0 || o.MinP > 1:
		return bad("MinP", o.MinP, "in [0, 1]")
	case isNaN32(o.RepeatPenalty) || o.RepeatPenalty < 0 || math.IsInf(float64(o.RepeatPenalty), 0):
		return bad("RepeatPenalty", o.RepeatPenalty, "finite and >= 0")
	case o.RepeatLastN < 0:
		return bad("RepeatLastN", o.RepeatLastN, ">= 0")
	}
	return nil
}

func isNaN32(f float32) bool { return f != f }
