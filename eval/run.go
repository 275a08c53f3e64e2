package eval

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tokenizer"
)

// DefaultContext is the window length when Options.Context is 0 (capped by the
// model's context): long enough that most positions see real history, short
// enough that a 2-core laptop evaluates a few thousand tokens in seconds.
const DefaultContext = 512

// ErrVocab reports two models whose vocabularies differ: their next-token
// distributions are over different things, so KL and top-1 mean nothing.
var ErrVocab = errors.New("eval: vocabularies differ")

// Options configure Evaluate.
type Options struct {
	// Context is the window length in tokens, BOS included; 0 means
	// min(model context, DefaultContext).
	Context int
	// Progress, when set, is called after each window with the windows done
	// and the total.
	Progress func(done, total int)
}

// Result is what Evaluate measured.
type Result struct {
	Stats
	Context int // window length used
	Windows int
}

// Windows cuts text (tokens without BOS) into non-overlapping windows of at
// most ctx tokens, each starting with bos. Every text token lands in exactly
// one window, after the BOS, so every one is scored once: window w predicts
// its token i+1 from BOS and the tokens before it in the same window. The
// last window may be short. llama.cpp instead scores only the second half of
// each window so every scored token has at least ctx/2 of history; that costs
// twice the compute for a smaller number, and for comparing two models on the
// same windows (the use here) both conventions rank them alike.
//
// bos < 0 (a vocabulary without BOS) makes windows of ctx text tokens whose
// first token is context only.
func Windows(text []int32, bos int32, ctx int) [][]int32 {
	if ctx < 2 {
		return nil
	}
	var ws [][]int32
	if bos < 0 {
		for i := 0; i+1 < len(text); i += ctx - 1 {
			// windows overlap by one token so every token after the first is
			// scored exactly once
			ws = append(ws, text[i:min(i+ctx, len(text))])
		}
		return ws
	}
	for i := 0; i < len(text); i += ctx - 1 {
		w := make([]int32, 0, ctx)
		w = append(w, bos)
		ws = append(ws, append(w, text[i:min(i+ctx-1, len(text))]...))
	}
	return ws
}

// SameVocab checks that a and b have the same vocabulary, piece by piece.
// The names (file paths) go into the error.
func SameVocab(a, b tokenizer.Tokenizer, aName, bName string) error {
	if a.VocabSize() != b.VocabSize() {
		return fmt.Errorf("%w: %s has %d tokens, %s has %d", ErrVocab, aName, a.VocabSize(), bName, b.VocabSize())
	}
	for id := range int32(a.VocabSize()) {
		// Compare the text a token stands for, not its raw entry: a llama2.c
		// tokenizer.bin and the GGUF made from it spell the same pieces
		// differently (" the" and "▁the", "\n<s>\n" and "<s>").
		if x, y := a.Piece(-1, id), b.Piece(-1, id); x != y {
			return fmt.Errorf("%w: token %d is %q in %s but %q in %s", ErrVocab, id, x, aName, y, bName)
		}
	}
	if a.BOS() != b.BOS() || a.EOS() != b.EOS() {
		return fmt.Errorf("%w: BOS/EOS are %d/%d in %s but %d/%d in %s", ErrVocab, a.BOS(), a.EOS(), aName, b.BOS(), b.EOS(), bName)
	}
	return nil
}

// Evaluate scores m on text (already tokenized with m's tokenizer, no BOS)
// and, when ref is not nil, compares it with ref on the same windows. Both
// models run through decode with AllLogits, the same path generation uses.
func Evaluate(ctx context.Context, m, ref *model.Loaded, text []int32, o Options) (*Result, error) {
	n := o.Context
	mctx := m.Model.Arch().Context
	if ref != nil {
		if err := SameVocab(m.Tokenizer, ref.Tokenizer, m.Source.Path, ref.Source.Path); err != nil {
			return nil, err
		}
		if v, w := m.Model.Arch().Vocab, ref.Model.Arch().Vocab; v != w {
			return nil, fmt.Errorf("%w: %s has %d output rows, %s has %d", ErrVocab, m.Source.Path, v, ref.Source.Path, w)
		}
		mctx = min(mctx, ref.Model.Arch().Context)
	}
	if n == 0 {
		n = min(mctx, DefaultContext)
	}
	if n < 2 || n > mctx {
		return nil, fmt.Errorf("eval: window of %d tokens: want 2 to %d (the models' context)", n, mctx)
	}
	if len(text) == 0 {
		return nil, errors.New("eval: the text has no tokens")
	}
	windows := Windows(text, m.Tokenizer.BOS(), n)
	if len(windows) == 0 {
		return nil, errors.New("eval: the text is too short to score (one token and no BOS)")
	}
	vocab := m.Model.Arch().Vocab
	mrun, err := newRunner(m, n)
	if err != nil {
		return nil, err
	}
	defer mrun.close()
	var rrun *runner
	if ref != nil {
		if rrun, err = newRunner(ref, n); err != nil {
			return nil, err
		}
		defer rrun.close()
	}
	res := &Result{Context: n, Windows: len(windows)}
	var refRows []float32
	for wi, w := range windows {
		if rrun != nil {
			refRows = refRows[:0]
			err := rrun.run(ctx, w, func(pos int32, logits []float32) error {
				refRows = append(refRows, logits...)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("eval: %s: window %d: %w", ref.Source.Path, wi, err)
			}
		}
		err := mrun.run(ctx, w, func(pos int32, logits []float32) error {
			var r []float32
			if rrun != nil {
				r = refRows[int(pos)*vocab : int(pos+1)*vocab]
			}
			return res.Add(logits, r, w[pos+1])
		})
		if err != nil {
			return nil, fmt.Errorf("eval: %s: window %d: %w", m.Source.Path, wi, err)
		}
		if o.Progress != nil {
			o.Progress(wi+1, len(windows))
		}
	}
	return res, nil
}

// runner runs windows through one model.
type runner struct {
	eng *sluice.Engine
}

func newRunner(l *model.Loaded, n int) (*runner, error) {
	p := pipelines.Greedy()
	sc := p.Scheduler()
	sc.MaxInFlight, sc.MaxNewTokens, sc.StopAtEOS, sc.PrefillChunk = 1, 1, false, 128
	p.Model.Context = n
	eng, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		return nil, err
	}
	return &runner{eng: eng}, nil
}

func (r *runner) close() { r.eng.Close() }

// run feeds w minus its last token (the last token is only a target) and
// calls row for each position 0..len(w)-2 in order.
func (r *runner) run(ctx context.Context, w []int32, row func(pos int32, logits []float32) error) error {
	seen := int32(0)
	var rowErr error
	on := func(pos int32, logits []float32) {
		switch {
		case rowErr != nil || pos >= int32(len(w)-1):
			// an earlier failure, or the logits after the window: unused
		case pos != seen:
			rowErr = fmt.Errorf("logits for position %d, want %d", pos, seen)
		default:
			seen++
			rowErr = row(pos, logits)
		}
	}
	if _, err := r.eng.Complete(ctx, sluice.Request{Tokens: w[:len(w)-1], AllLogits: true, OnLogits: on}); err != nil {
		return err
	}
	if rowErr != nil {
		return rowErr
	}
	if seen != int32(len(w)-1) {
		return fmt.Errorf("got logits for %d positions, want %d", seen, len(w)-1)
	}
	return nil
}

// CorpusOptions configure SampleCorpus.
type CorpusOptions struct {
	Tokens int    // sampled tokens in all; 0 means 4096
	Seed   uint64 // sampling seed
}

// SampleCorpus samples stories from m at temperature 1 with no truncation
// (top-k 0, top-p 1, min-p 0), each from BOS until the model emits a stop
// token or fills its context, until o.Tokens tokens are sampled in all (the
// last story is cut there). Story r draws its uniforms from (Seed, r, t), so
// a smaller Tokens gives a prefix of the same text: a committed corpus can be
// checked by regenerating its start. Each story is followed by a newline.
func SampleCorpus(ctx context.Context, m *model.Loaded, o CorpusOptions) (string, error) {
	if o.Tokens == 0 {
		o.Tokens = 4096
	}
	if o.Tokens < 0 {
		return "", fmt.Errorf("eval: corpus of %d tokens", o.Tokens)
	}
	bos := m.Tokenizer.BOS()
	if bos < 0 {
		return "", fmt.Errorf("eval: %s: the vocabulary has no BOS token to start stories from", m.Source.Path)
	}
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 1, 0
	seed := o.Seed
	*p.Sampler() = pipelines.SampleParams{Temperature: 1, TopK: 0, TopP: 1, MinP: 0, RepeatPenalty: 1, Seed: &seed}
	eng, err := sluice.New(m, sluice.Options{Pipeline: p})
	if err != nil {
		return "", err
	}
	defer eng.Close()
	var sb strings.Builder
	empty := 0
	for r, total := uint64(0), 0; total < o.Tokens; r++ {
		s, err := eng.Complete(ctx, sluice.Request{Index: r, Tokens: []int32{bos}, MaxNewTokens: o.Tokens - total})
		if err != nil {
			return "", fmt.Errorf("eval: %s: story %d: %w", m.Source.Path, r, err)
		}
		if s.CompletionTokens == 0 {
			if empty++; empty > 100 {
				return "", fmt.Errorf("eval: %s: 100 stories in a row stopped at once", m.Source.Path)
			}
			continue
		}
		empty = 0
		total += s.CompletionTokens
		sb.WriteString(s.Text)
		sb.WriteByte('\n')
	}
	return sb.String(), nil
}
