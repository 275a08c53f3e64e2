// Package beamsearch is beam search as a state machine over token ids and
// log-probabilities, with Hugging Face transformers' generate(num_beams=k)
// semantics: no model, graph or cache, so the engine's strategy
// (decode.Beam) stays thin and the math is tested here on hand-built
// distributions. One Search.Step per forward pass over the live beams.
package beamsearch

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/sluicehq/sluice/sample"
)

// EarlyStopping is Hugging Face's early_stopping: when beam search may stop
// before MaxNewTokens.
type EarlyStopping int

const (
	// EarlyStopHeuristic is early_stopping=False, HF's default: stop once
	// NumBeams hypotheses are finished and the best live beam, scored at its
	// current length, could not beat the worst of them.
	EarlyStopHeuristic EarlyStopping = iota
	// EarlyStopTrue is early_stopping=True: stop as soon as NumBeams
	// hypotheses are finished.
	EarlyStopTrue
	// EarlyStopNever is early_stopping="never": like the heuristic, but with
	// LengthPenalty > 0 the best live beam is scored at MaxNewTokens, the
	// most a longer hypothesis could gain, so the search stops only when no
	// live beam can win (canonical beam search with LengthPenalty 0).
	EarlyStopNever
)

// String is HF's spelling of the mode: "false", "true" or "never".
func (e EarlyStopping) String() string {
	switch e {
	case EarlyStopHeuristic:
		return "false"
	case EarlyStopTrue:
		return "true"
	case EarlyStopNever:
		return "never"
	}
	return fmt.Sprintf("EarlyStopping(%d)", int(e))
}

// Options configure a Beam. NumBeams, MaxNewTokens and Vocab are required.
type Options struct {
	NumBeams int // k, the live beams kept per step
	// NumReturn is how many finished hypotheses Results returns, ≤ NumBeams;
	// 0 means 1 (HF num_return_sequences).
	NumReturn int
	// LengthPenalty is the exponent of the length a finished hypothesis's
	// summed log-probability is divided by: score = Σ log p / len^LengthPenalty,
	// where len counts the generated tokens including the final EOS (HF:
	// cur_len + 1 − prompt length). HF's default is 1.0; the zero value here
	// is 0, plain sums, so set it.
	LengthPenalty float64
	EarlyStopping EarlyStopping
	// EOS lists the tokens that finish a hypothesis. With none, hypotheses
	// finish only at MaxNewTokens.
	EOS []int32
	// MaxNewTokens is the most generated tokens (HF max_length minus the
	// prompt); at that length every candidate finishes.
	MaxNewTokens int
	// Vocab is the length of each log-probability row.
	Vocab int
}

// Validate reports the first bad field.
func (o Options) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrOptions, field, v, want)
	}
	switch {
	case o.NumBeams < 1:
		return bad("NumBeams", o.NumBeams, ">= 1")
	case o.Vocab < 1:
		return bad("Vocab", o.Vocab, ">= 1")
	case o.NumBeams > o.Vocab:
		return bad("NumBeams", o.NumBeams, fmt.Sprintf("<= Vocab (%d): more beams than tokens", o.Vocab))
	case o.NumReturn < 0 || o.NumReturn > o.NumBeams:
		return bad("NumReturn", o.NumReturn, fmt.Sprintf("in [0, NumBeams (%d)]", o.NumBeams))
	case o.MaxNewTokens < 1:
		return bad("MaxNewTokens", o.MaxNewTokens, ">= 1")
	case math.IsNaN(o.LengthPenalty) || math.IsInf(o.LengthPenalty, 0):
		return bad("LengthPenalty", o.LengthPenalty, "finite")
	case o.EarlyStopping < EarlyStopHeuristic || o.EarlyStopping > EarlyStopNever:
		return bad("EarlyStopping", o.EarlyStopping, "EarlyStopHeuristic, EarlyStopTrue or EarlyStopNever")
	}
	for _, id := range o.EOS {
		if id < 0 || int(id) >= o.Vocab {
			return bad("EOS", id, fmt.Sprintf("a token id below Vocab (%d)", o.Vocab))
		}
	}
	return nil
}

// Hypothesis is a finished sequence of generated tokens (its EOS included).
type Hypothesis struct {
	Tokens  []int32
	SumLogP float64 // Σ log p of Tokens
	Score   float64 // SumLogP / len(Tokens)^LengthPenalty, the ranking key
}

// Beam is beam search as a state machine with the semantics of Hugging Face
// transformers' generate(num_beams=k), as of its vectorised _beam_search
// (introduced in v4.50; followed here as read at commit 000034a4 of
// generation/utils.py, _get_top_k_continuations, _update_finished_beams,
// _check_early_stop_heuristic): per step, the top max(2, 1+len(EOS))·k
// (beam, token) candidates by cumulative log-probability; those that end
// (EOS, or MaxNewTokens reached) and rank in the top k become finished
// hypotheses, of which the best k are kept; the best k that do not end are
// the next live beams; early stopping as EarlyStopping says.
//
// The engine runs one forward pass per Step over the live beams (one KV
// sequence each; a fresh Beam has one, the prompt):
//
//	b, _ := beamsearch.New(opts)
//	for !done {
//		// rows[i]: log-softmax of live beam i's logits, after any processing
//		parents, tokens, done, _ = b.Step(rows)
//		// new beam j = old beam parents[j] + tokens[j]: kvcache.Fork the
//		// parent's sequence (copy-on-write) for every extra child, Free the
//		// old beams no one chose, and feed tokens[j] next pass
//	}
//	best := b.Results()
//
// Differences from HF, where HF pads with placeholders: a candidate with
// log-probability −Inf is never taken, so with a tiny vocabulary (k·V < 2k)
// or masked tokens there may be fewer than k live beams; HF would carry −1e9
// placeholder beams instead, which it never returns. Ties are broken by
// lower beam index, then lower token id (HF's topk leaves them unspecified).
type Search struct {
	o          Options
	k, keep    int
	live       [][]int32 // generated tokens per live beam
	scores     []float64 // cumulative log-probability per live beam
	finished   []Hypothesis
	cur        int  // tokens generated so far
	improvable bool // HF's is_early_stop_heuristic_unsatisfied
	done       bool
	heap       []beamCand
	nextLive   [][]int32
	nextScores []float64
	parents    []int
	tokens     []int32
	isEOS      map[int32]bool
}

type beamCand struct {
	beam  int
	token int32
	total float64
}

// beamBetter is the candidate order: higher total, then lower beam, then
// lower token.
func beamBetter(a, b beamCand) bool {
	if a.total != b.total {
		return a.total > b.total
	}
	if a.beam != b.beam {
		return a.beam < b.beam
	}
	return a.token < b.token
}

// NewBeam validates o and returns a search with one live beam, the prompt.
func New(o Options) (*Search, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.NumReturn == 0 {
		o.NumReturn = 1
	}
	b := &Search{o: o, k: o.NumBeams, keep: max(2, 1+len(o.EOS)) * o.NumBeams, improvable: true}
	b.isEOS = make(map[int32]bool, len(o.EOS))
	for _, id := range o.EOS {
		b.isEOS[id] = true
	}
	b.live = [][]int32{nil}
	b.scores = []float64{0}
	return b, nil
}

// Live is the number of live beams: the rows the next Step expects.
func (b *Search) Live() int { return len(b.live) }

// Tokens returns the generated tokens of live beam i (shared; do not modify).
func (b *Search) Tokens(i int) []int32 { return b.live[i] }

// Score returns live beam i's cumulative log-probability.
func (b *Search) Score(i int) float64 { return b.scores[i] }

// Done reports whether the search has finished.
func (b *Search) Done() bool { return b.done }

// Step advances the search by one token. logprobs[i] is the log-softmax over
// the vocabulary for live beam i (HF applies its logits processors to the
// log-softmax; do the same before calling). It returns, for each new live
// beam j, the index parents[j] of the old live beam it extends and the token
// it appends; done reports that the search is over (Results is final, and
// the returned beams need no further pass). The slices are valid until the
// next Step.
func (b *Search) Step(logprobs [][]float32) (parents []int, tokens []int32, done bool, err error) {
	if b.done {
		return nil, nil, true, fmt.Errorf("%w: Step after the search is done", ErrState)
	}
	if len(logprobs) != len(b.live) {
		return nil, nil, false, fmt.Errorf("%w: %d log-probability rows for %d live beams", ErrInput, len(logprobs), len(b.live))
	}
	for i, row := range logprobs {
		if len(row) != b.o.Vocab {
			return nil, nil, false, fmt.Errorf("%w: row %d has %d entries, Vocab is %d", ErrInput, i, len(row), b.o.Vocab)
		}
		for j, v := range row {
			if v != v || v > math.MaxFloat32 {
				return nil, nil, false, fmt.Errorf("%w: row %d token %d log-probability %v", ErrInput, i, j, v)
			}
		}
	}

	// c. The top `keep` candidates over all beams, best first.
	h := b.heap[:0]
	for i, row := range logprobs {
		s := b.scores[i]
		for j, v := range row {
			if math.IsInf(float64(v), -1) {
				continue
			}
			c := beamCand{beam: i, token: int32(j), total: s + float64(v)}
			if len(h) < b.keep {
				h = append(h, c)
				sample.HeapUp(h, len(h)-1, beamBetter)
			} else if beamBetter(c, h[0]) {
				h[0] = c
				sample.HeapDown(h, 0, beamBetter)
			}
		}
	}
	slices.SortFunc(h, func(a, c beamCand) int {
		if beamBetter(a, c) {
			return -1
		}
		if beamBetter(c, a) {
			return 1
		}
		return 0
	})
	b.heap = h

	// d. Which candidates end here.
	last := b.cur+1 >= b.o.MaxNewTokens
	ends := func(c beamCand) bool { return last || b.isEOS[c.token] }

	// f. Finished hypotheses: candidates in the top k that end, unless the
	// search cannot improve any more or (early_stopping=True) is full. The
	// flags are the previous step's, as in HF.
	full := len(b.finished) >= b.k
	if b.improvable && !(full && b.o.EarlyStopping == EarlyStopTrue) {
		norm := math.Pow(float64(b.cur+1), b.o.LengthPenalty)
		for _, c := range h[:min(len(h), b.k)] {
			if !ends(c) {
				continue
			}
			toks := append(slices.Clone(b.live[c.beam]), c.token)
			b.addFinished(Hypothesis{Tokens: toks, SumLogP: c.total, Score: c.total / norm})
		}
	}

	// e. The next live beams: the best k candidates that do not end.
	b.nextLive, b.nextScores = b.nextLive[:0], b.nextScores[:0]
	b.parents, b.tokens = b.parents[:0], b.tokens[:0]
	allEnd := true
	for _, c := range h {
		if ends(c) {
			continue
		}
		allEnd = false
		if len(b.parents) == b.k {
			continue
		}
		b.parents = append(b.parents, c.beam)
		b.tokens = append(b.tokens, c.token)
		b.nextLive = append(b.nextLive, append(slices.Clone(b.live[c.beam]), c.token))
		b.nextScores = append(b.nextScores, c.total)
	}
	b.live, b.nextLive = b.nextLive, b.live
	b.scores, b.nextScores = b.nextScores, b.scores
	b.cur++

	// g. HF's stopping test: can a live beam still beat the worst finished
	// hypothesis (sticky once false), is the finished list open under
	// early_stopping=True, is there any candidate that did not end.
	if len(b.finished) >= b.k {
		if len(b.live) == 0 {
			b.improvable = false
		} else {
			n := b.cur
			if b.o.EarlyStopping == EarlyStopNever && b.o.LengthPenalty > 0 {
				n = b.o.MaxNewTokens
			}
			best := b.scores[0] / math.Pow(float64(n), b.o.LengthPenalty)
			worst := b.finished[len(b.finished)-1].Score
			b.improvable = b.improvable && best > worst
		}
	}
	closed := len(b.finished) >= b.k && b.o.EarlyStopping == EarlyStopTrue
	b.done = !b.improvable || closed || allEnd || len(b.live) == 0
	return b.parents, b.tokens, b.done, nil
}

// addFinished inserts h into the finished list, kept sorted by Score
// descending and cut to k; a new hypothesis goes after existing equal ones.
func (b *Search) addFinished(h Hypothesis) {
	i := len(b.finished)
	for i > 0 && h.Score > b.finished[i-1].Score {
		i--
	}
	if i >= b.k {
		return
	}
	b.finished = slices.Insert(b.finished, i, h)
	if len(b.finished) > b.k {
		b.finished = b.finished[:b.k]
	}
}

// Results returns the best NumReturn finished hypotheses, best first (fewer
// if fewer finished, which happens only when the caller stops before Done).
// The slice is the caller's; the token slices are shared.
func (b *Search) Results() []Hypothesis {
	n := min(b.o.NumReturn, len(b.finished))
	out := slices.Clone(b.finished[:n])
	slices.SortStableFunc(out, func(a, c Hypothesis) int { return cmp.Compare(c.Score, a.Score) })
	return out
}

// Errors of a Search: a call out of order, input of the wrong shape.
var (
	ErrState   = errors.New("beamsearch: call out of order")
	ErrInput   = errors.New("beamsearch: invalid input")
	ErrOptions = errors.New("beamsearch: invalid options")
)
