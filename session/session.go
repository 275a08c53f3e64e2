// Package session is one request on its way through the engine: its tokens,
// its sampler, its stop rules, its context (cancellation and timeout) and the
// text it has produced so far. The scheduler (package sched) decides when a
// session's rows go through the model; the session decides, from the logits of
// its last row, which token comes next and whether it is finished.
//
// A Session is touched by one goroutine at a time: the stage that holds the
// step it belongs to. Its hooks (OnToken, OnLogits) run on that goroutine and
// must not block.
package session

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/beamsearch"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
)

// Finish reasons, as OpenAI names them (plus cancelled and timeout, which
// vLLM's "abort" covers).
const (
	FinishStop      = "stop"      // a stop token
	FinishLength    = "length"    // max new tokens, or the context is full
	FinishError     = "error"     // the request could not run; Err says why
	FinishCancelled = "cancelled" // its context was cancelled
	FinishTimeout   = "timeout"   // its deadline passed
)

// ErrPromptTooLong is wrapped by the error of a request whose prompt does not
// fit the context.
var ErrPromptTooLong = errors.New("prompt longer than the context")

// Request is one prompt to complete.
type Request struct {
	// Ctx is the request's own context (nil: none): cancelling it, or its
	// deadline passing, finishes this request alone. A request is a message
	// that crosses goroutines, so it carries its context as http.Request does.
	Ctx          context.Context
	ID           string
	Index        uint64 // request number r: the keyed RNG draws (seed, r, t)
	Prompt       string
	Tokens       []int32         // a pre-tokenized prompt; used instead of Prompt when set (no BOS added)
	MaxNewTokens int             // 0 = Options.MaxNewTokens
	Sampling     *sample.Options // nil = Options.Sampling
	// LogitBias adds to the logits of some tokens before every draw
	// (OpenAI's logit_bias; -Inf bans a token).
	LogitBias map[int32]float32
	// Processors transform each row of the request's logits before its
	// sampler sees it, after LogitBias, in every decoding strategy alike
	// (sample.Processor): a grammar's mask, say. A processor is the
	// request's own; the engine calls it from one goroutine at a time.
	Processors []sample.Processor
	// Grammar constrains the output to a JSON Schema's values or a GBNF
	// grammar's language: its mask is the last processor, so a logit bias
	// cannot lift it. The engine's grammar cache (Options.Grammars) compiles
	// it once per distinct spec and shares the matcher; the output may end
	// (EOG, or StopTokens) only where the grammar's string is complete, and
	// then only end tokens are allowed where nothing may follow.
	Grammar *grammar.Spec
	// StopTokens are more token ids that end the request with finish reason
	// stop, like EOS: a chat template's end-of-turn tokens (<|im_end|>,
	// <|eot_id|>). The stop token itself is not part of the completion.
	// They apply even when Options.NoStop is set.
	StopTokens []int32
	// Adapter names a LoRA adapter set registered on the model
	// (model.Adaptable.AddAdapter); "" runs the base model. Sessions with
	// different adapters never share a forward pass.
	Adapter string
	// AllLogits computes logits at every prompt position too (perplexity).
	AllLogits bool
	// OnLogits, when set, sees every row of logits computed for the request,
	// in position order: pos is the position of the token the logits were
	// computed at. The slice is only valid during the call. Beam search
	// (NumBeams > 1) and speculative pipelines compute rows that belong to
	// no one sequence, or sample without them: a request that sets OnLogits
	// there is refused (it finishes with an error saying so).
	OnLogits func(pos int32, logits []float32)
	// OnToken, when set, sees every generated token as it is sampled, with
	// the text it completes (possibly "" while a character is incomplete).
	// When the request ends with bytes of an unfinished character held
	// back, a last call has tok = -1 and their replacement text. A beam
	// search's tokens are known only when it ends: OnToken then sees the
	// best hypothesis's tokens, in order (its end-of-sequence token not).
	OnToken func(tok int32, text string)
	// Tag is carried untouched to the finished session, for whoever
	// submits the request to the stage graph to find its own state again.
	// The engine (package sluice) is that submitter: it sets Tag to its
	// pending result, replacing whatever a caller put there.
	Tag any
	// Beam, when set, decodes by beam search (Hugging Face generate with
	// num_beams) instead of sampling. NumBeams ≥ 1; MaxNewTokens, EOS and
	// Vocab are filled by the engine. NumBeams = 1 is greedy decoding,
	// whatever EarlyStopping says, as Hugging Face's generate sends it to
	// greedy search. Beam search does not sample: a request whose sampling
	// has a temperature above 0 or a repeat penalty is refused naming it,
	// never run with the option ignored; its logits processors (LogitBias,
	// Processors) apply to each beam's log-softmax scores, as Hugging Face
	// applies them. Top-k, top-p and min-p are sampling warpers, which
	// Hugging Face leaves out of a search that does not sample (do_sample =
	// False), as this one does.
	Beam *beamsearch.Options
	// BestOf > 1 samples that many candidate completions and ranks them by
	// the sum of their tokens' log-probabilities, best first, in
	// Session.Beams (OpenAI's best_of; the caller keeps the n it wants and
	// counts them all in its usage). Tokens is the best's. No token is
	// streamed while the candidates run; OnToken sees the best one's tokens
	// when it ends, as for beam search.
	BestOf int
}

// Options are the engine-wide defaults and limits a session is created with.
type Options struct {
	Sampling     sample.Options
	MaxNewTokens int  // 0 = until a stop token or the context is full
	AddBOS       bool // prepend BOS to a text prompt
	NoStop       bool // keep going past EOS, the other end-of-generation tokens and BOS (benchmarks)
	Context      int  // KV slots per sequence
	Timeout      time.Duration
	// Speculative is set when the pipeline verifies drafts: accepted draft
	// tokens are sampled from rows OnLogits never sees, so a request that
	// sets OnLogits is refused.
	Speculative bool
	// Grammars is the engine's grammar cache, needed by requests that set
	// Grammar.
	Grammars *grammar.Cache
	// Grammar constrains the requests that carry no Grammar of their own
	// (a pipeline's default schema).
	Grammar *grammar.Spec
	// NoJumpForward turns jump-forward off: every token the grammar forces
	// then costs a pass of its own, as an unconstrained token does (the
	// baseline a benchmark compares against; the text is the same).
	NoJumpForward bool
}

// Session is one request in flight.
type Session struct {
	Req     Request
	Ctx     context.Context // the request's; cancelling it finishes the session
	Tokens  []int32         // prompt (with BOS) then generated tokens
	NPrompt int
	Cached  int // tokens whose keys and values are in the KV cache
	// CachedTokens are the prompt tokens the prefix cache supplied: their
	// keys and values were mapped from pages earlier requests computed,
	// not computed for this one (OpenAI's usage.prompt_tokens_details.cached_tokens).
	CachedTokens int
	Finish       string
	Err          error

	Start, FirstToken, End time.Time

	// Seq is the KV-cache sequence the scheduler gave this session; -1 when none.
	Seq int32
	// Jumped counts the tokens this session took by jump-forward: forced by
	// its grammar and appended without a pass of their own (JumpForward).
	Jumped int
	// Beams are a beam search's returned hypotheses, best first (Tokens is
	// then the prompt and the best one).
	Beams []beamsearch.Hypothesis
	// Scratch is the sampler's working memory; nil uses the session's own.
	// The scheduler lends every session the same one (it samples them one at
	// a time), so a session that joins finds it grown.
	Scratch *sample.Scratch

	cancel  context.CancelFunc
	tok     tokenizer.Tokenizer
	maxNew  int
	context int
	noStop  bool
	jump    bool // jump-forward is on (JumpForward)
	sampler *sample.Sampler
	scratch sample.Scratch
	// procs are the request's processors (LogitBias first); processed
	// holds a processed copy of one row of logits.
	procs     []sample.Processor
	processed []float32
	// Streaming (only with OnToken): dec turns the generated tokens' bytes
	// into complete UTF-8, out is its scratch for one token, and held is an
	// append-only chunk for the text OnToken gets that is not a vocabulary
	// piece as is (a character assembled from byte pieces, U+FFFD).
	dec  *tokenizer.TextDecoder
	out  []byte
	held strings.Builder
}

// heldChunk is the size of a session's chunks of assembled streamed text.
const heldChunk = 1 << 10

// New tokenizes a request. A request that cannot run comes back finished
// with Err set; it is never an error of the whole run. Options.Timeout bounds
// the request from now.
func New(req Request, tok tokenizer.Tokenizer, o Options) *Session {
	ctx := req.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	if o.Timeout > 0 {
		ctx, cancelT := context.WithTimeout(ctx, o.Timeout)
		s := newSession(ctx, req, tok, o)
		s.cancel = cancelT
		return s
	}
	return newSession(ctx, req, tok, o)
}

func newSession(ctx context.Context, req Request, tok tokenizer.Tokenizer, o Options) *Session {
	s := &Session{Req: req, Ctx: ctx, Seq: -1, Start: time.Now(), tok: tok, context: o.Context, noStop: o.NoStop}
	so := o.Sampling
	if req.Sampling != nil {
		so = *req.Sampling
	}
	s.maxNew = o.MaxNewTokens
	if req.MaxNewTokens > 0 {
		s.maxNew = req.MaxNewTokens
	}
	var err error
	if s.sampler, err = sample.New(so); err != nil {
		return s.fail(fmt.Errorf("request %s: %w", req.ID, err))
	}
	if len(req.LogitBias) > 0 {
		b := sample.LogitBias(req.LogitBias)
		if err := b.Validate(); err != nil {
			return s.fail(fmt.Errorf("request %s: %w", req.ID, err))
		}
		s.procs = append(s.procs, b)
	}
	s.procs = append(s.procs, req.Processors...)
	if err := s.checkHooks(so, o); err != nil {
		return s.fail(fmt.Errorf("request %s: %w", req.ID, err))
	}
	if req.Beam != nil && req.Beam.NumBeams == 1 {
		s.Req.Beam = nil // greedy: temperature 0, checked above
	}
	if len(req.Tokens) > 0 {
		s.Tokens = slices.Clone(req.Tokens)
	} else {
		s.Tokens = tok.Encode(req.Prompt, tokenizer.EncodeOptions{BOS: o.AddBOS})
	}
	s.NPrompt = len(s.Tokens)
	switch {
	case s.NPrompt == 0:
		return s.fail(fmt.Errorf("request %s: empty prompt and no BOS token", req.ID))
	case s.NPrompt > o.Context:
		return s.fail(fmt.Errorf("request %s: %w: %d tokens, the context holds %d", req.ID, ErrPromptTooLong, s.NPrompt, o.Context))
	}
	for i, t := range s.Tokens {
		if t < 0 || int(t) >= tok.VocabSize() {
			return s.fail(fmt.Errorf("request %s: prompt token %d is id %d, outside the vocabulary of %d", req.ID, i, t, tok.VocabSize()))
		}
	}
	if req.Grammar == nil {
		req.Grammar = o.Grammar
		s.Req.Grammar = o.Grammar
	}
	if req.Grammar != nil {
		if o.Grammars == nil {
			return s.fail(fmt.Errorf("request %s: it has a grammar and the engine has no grammar cache (session.Options.Grammars)", req.ID))
		}
		p, err := o.Grammars.Processor(*req.Grammar, s.NPrompt, req.StopTokens)
		if err != nil {
			return s.fail(fmt.Errorf("request %s: %w", req.ID, err))
		}
		s.procs = append(s.procs, p)
		// The grammar's value ends the output: its end token stops the
		// request even where NoStop (benchmarks) would run past EOS, since
		// nothing the grammar allows may follow it.
		s.noStop = false
		// Beams and best_of candidates fork the session's history and take
		// their tokens by their own rules; OnLogits must see each token's
		// row before the token (JumpForward).
		s.jump = !o.NoJumpForward && req.Beam == nil && req.BestOf <= 1 && req.OnLogits == nil
	}
	// Room for every token the sequence may reach (the context's slots plus
	// the one predicted at the last slot), so the decode loop never
	// reallocates.
	room := o.Context + 1
	if s.maxNew > 0 {
		room = min(room, s.NPrompt+s.maxNew)
	}
	s.Tokens = slices.Grow(s.Tokens, room-s.NPrompt)
	if req.OnToken != nil {
		s.dec = tokenizer.NewTextDecoderAfter(tok, s.Tokens[s.NPrompt-1])
		s.out = make([]byte, 0, 128)
		s.held.Grow(heldChunk)
	}
	return s
}

// checkHooks refuses what a beam search or a speculative pipeline would
// otherwise ignore: sampling options beam search does not apply, and
// OnLogits where rows are computed that belong to no one sequence.
func (s *Session) checkHooks(so sample.Options, o Options) error {
	if b := s.Req.Beam; b != nil {
		switch {
		case so.Temperature > 0:
			return fmt.Errorf("beam search does not sample (Hugging Face beam sampling, do_sample, is not supported): temperature = %g, want 0", so.Temperature)
		case so.RepeatPenalty != 0 && so.RepeatPenalty != 1:
			return fmt.Errorf("beam search applies no logits processor: repeat_penalty = %g, want 1 (off)", so.RepeatPenalty)
		case b.NumBeams > 1 && s.Req.OnLogits != nil:
			return errors.New("OnLogits is set, but beam search computes a row for each of its beams, not one sequence's: it would not be called")
		}
	}
	if o.Speculative && s.Req.OnLogits != nil {
		return errors.New("OnLogits is set, but this pipeline verifies drafts and samples accepted tokens from rows OnLogits would not see")
	}
	return nil
}

// Done reports whether s has finished (or failed).
func (s *Session) Done() bool { return s.Finish != "" }

// Generated is the number of new tokens.
func (s *Session) Generated() int { return len(s.Tokens) - s.NPrompt }

// Completion is the generated text: what OnToken was given, concatenated
// (tokenizer.Decode of the generated tokens after the prompt's last one). It
// is decoded on each call, not kept while generating.
func (s *Session) Completion() string {
	if s.NPrompt == 0 || s.Generated() == 0 {
		return ""
	}
	return tokenizer.Decode(s.tok, s.Tokens[s.NPrompt-1], s.Tokens[s.NPrompt:])
}

// Pending is how many tokens must go through the model before the next token
// can be sampled: the rest of the prompt, or the last sampled token.
func (s *Session) Pending() int { return len(s.Tokens) - s.Cached }

// Check ends s if its context was cancelled or timed out, and reports
// whether it is done. The scheduler calls it before every step.
func (s *Session) Check() bool {
	if s.Done() {
		return true
	}
	switch err := s.Ctx.Err(); {
	case err == nil:
		return false
	case errors.Is(err, context.DeadlineExceeded):
		s.end(FinishTimeout)
		s.Err = fmt.Errorf("request %s: %w", s.Req.ID, err)
	default:
		s.end(FinishCancelled)
		s.Err = fmt.Errorf("request %s: %w", s.Req.ID, err)
	}
	return true
}

// Logits hands s the logits computed at position pos (every output row of its
// rows in a pass, in order). At the last position of the sequence it samples
// the next token and applies the stop rules.
func (s *Session) Logits(pos int32, logits []float32) error {
	if s.Req.OnLogits != nil {
		s.Req.OnLogits(pos, logits)
	}
	if int(pos) != len(s.Tokens)-1 {
		return nil // a prompt position (AllLogits)
	}
	next, err := s.Sample(logits, s.Tokens)
	if err != nil {
		return fmt.Errorf("request %s: position %d: %w", s.Req.ID, pos, err)
	}
	if !s.Accept(next) {
		s.JumpForward()
	}
	return nil
}

// JumpForward appends the run of tokens the request's grammar forces after
// its tokens (Forced), each under the stop rules as Accept applies them, and
// returns how many it took. They need no draw and no logits of their own,
// so the next pass feeds them all as one span of rows (like a prompt chunk)
// and computes logits only at the last: a forced run of k tokens costs one
// target pass, not k (SGLang's jump-forward). The text is what one token
// per pass gives: Sample would return each of them without a draw (draws
// are keyed by position, so skipping them changes no other), and the run
// stops where that decoding would: at an end token (which ends the session
// with reason stop), at the length limit or the context's end (reason
// length), and as soon as the request's context is done (a stop string
// found by OnToken cancels it; one token per pass would stop there at the
// next step). A forced token's row of logits is never computed, so a row
// the sampler would have refused there (NaN from a broken model) goes
// unnoticed at that position; only the span's last row is checked.
func (s *Session) JumpForward() int {
	n := 0
	for !s.Done() && s.Ctx.Err() == nil {
		tok, ok := s.Forced(s.Tokens)
		if !ok {
			break
		}
		n++
		s.Jumped++
		if s.Accept(tok) {
			break
		}
	}
	return n
}

// Sample picks the token that follows history (the tokens up to and
// including the one the logits were computed at) from the request's
// processed logits (Process) by its sampler, with the uniform keyed by
// (seed, request, len(history)): the draw plain decoding makes at that
// position, so a verifier that calls it along a draft tree emits exactly the
// tokens plain decoding would.
func (s *Session) Sample(logits []float32, history []int32) (int32, error) {
	logits, err := s.Process(logits, history)
	if err != nil {
		return -1, err
	}
	if tok, ok := s.forced(history); ok && int(tok) < len(logits) && logits[tok] == logits[tok] && !math.IsInf(float64(logits[tok]), -1) {
		// The only token left (a finite logit: a NaN row still fails in
		// the sampler): the sampler would draw it whatever its options
		// and uniform (draws are keyed, so skipping one changes no
		// other), so it needs no draw.
		return tok, nil
	}
	return s.sampler.Next(logits, history, s.Req.Index, uint64(len(history)), s.sampleScratch())
}

// Forced is the token that must follow history whatever the pass would
// compute for it: the only one the request's grammar allows there, with no
// processor before the grammar able to refuse it (only a logit bias that
// does not ban it; a processor of the caller's could do anything with the
// row, so there is no jump-forward past one). ok is false with jump-forward
// off (session.Options.NoJumpForward, a beam or best_of request, OnLogits
// set). A draft tree adds such tokens without a draft pass, and
// JumpForward without a target pass.
func (s *Session) Forced(history []int32) (int32, bool) {
	if !s.jump {
		return -1, false
	}
	tok, ok := s.forced(history)
	if !ok {
		return -1, false
	}
	for _, p := range s.procs[:len(s.procs)-1] {
		b, isBias := p.(sample.LogitBias)
		if !isBias || math.IsInf(float64(b[tok]), -1) {
			return -1, false
		}
	}
	return tok, true
}

// forced is the one token the request's grammar allows after history, if
// there is one (the grammar is the last processor, so nothing after it
// lets another token back in).
func (s *Session) forced(history []int32) (int32, bool) {
	if len(s.procs) == 0 {
		return -1, false
	}
	f, ok := s.procs[len(s.procs)-1].(interface {
		Forced([]int32) (int32, bool)
	})
	if !ok {
		return -1, false
	}
	return f.Forced(history)
}

// Dist is the request's distribution after history (Process, then the
// sampler's transforms), living in sc: what a chain verifier compares a
// draft's proposals against, and the draft's own distribution it proposes
// from.
func (s *Session) Dist(logits []float32, history []int32, sc *sample.Scratch) (sample.Dist, error) {
	logits, err := s.Process(logits, history)
	if err != nil {
		return sample.Dist{}, err
	}
	return s.sampler.Dist(logits, history, sc)
}

// Process applies the request's processors (its logit bias, then
// Request.Processors) to one row of logits computed after history. Without
// processors it returns logits itself; otherwise a processed copy, valid
// until the next call, so that logits is never changed and a row may be
// processed any number of times with the same result. Every strategy reads
// a row through it (Sample, Dist), and SpecExec processes its draft rows too.
func (s *Session) Process(logits []float32, history []int32) ([]float32, error) {
	if len(s.procs) == 0 {
		return logits, nil
	}
	if cap(s.processed) < len(logits) {
		s.processed = make([]float32, len(logits))
	}
	out := s.processed[:len(logits)]
	copy(out, logits)
	for _, p := range s.procs {
		if err := p.Process(out, history); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Allows reports whether tok may follow history under the request's
// constraints (its grammar): a draft that was not drawn from a processed
// distribution (prompt lookup) is cut at the first token it does not allow.
// Processors without such a rule allow every token.
func (s *Session) Allows(history []int32, tok int32) (bool, error) {
	for _, p := range s.procs {
		if a, ok := p.(interface {
			Allows([]int32, int32) (bool, error)
		}); ok {
			if ok, err := a.Allows(history, tok); !ok || err != nil {
				return false, err
			}
		}
	}
	return true, nil
}

// Processes reports whether the request has processors (Process copies).
func (s *Session) Processes() bool { return len(s.procs) > 0 }

func (s *Session) sampleScratch() *sample.Scratch {
	if s.Scratch != nil {
		return s.Scratch
	}
	return &s.scratch
}

// Accept appends a sampled token, streams its text and applies the stop
// rules; it reports whether the session is now finished (a stop token is
// not appended).
func (s *Session) Accept(next int32) (done bool) {
	if s.Done() {
		return true
	}
	if s.FirstToken.IsZero() {
		s.FirstToken = time.Now()
	}
	if s.Stops(next) {
		s.end(FinishStop)
		return true
	}
	prev := s.Tokens[len(s.Tokens)-1]
	s.Tokens = append(s.Tokens, next)
	if s.Req.OnToken != nil {
		s.Req.OnToken(next, s.streamText(prev, next))
	}
	// The token predicted at the last slot of the context is emitted, as
	// llama2.c's run.c does, but cannot be fed back.
	if (s.maxNew > 0 && s.Generated() >= s.maxNew) || len(s.Tokens) > s.context {
		s.end(FinishLength)
	}
	return s.Done()
}

// IsStopToken is the stop rule of a session with stop_at_eos on (Stops):
// the vocabulary's end-of-generation tokens, BOS, and the request's stop
// tokens. A front end that gets finished hypotheses back (best_of, beams),
// whose tokens include the one that ended them, counts usage without it.
func IsStopToken(tok tokenizer.Tokenizer, t int32, stops []int32) bool {
	return tokenizer.IsEOG(tok, t) || t == tok.BOS() || slices.Contains(stops, t)
}

// CandidateTokens is the completion tokens of finished hypotheses as usage
// counts them: each one's length without the stop token that ended it.
func CandidateTokens(tok tokenizer.Tokenizer, hyps [][]int32, stops []int32) int {
	n := 0
	for _, h := range hyps {
		n += len(h)
		if len(h) > 0 && IsStopToken(tok, h[len(h)-1], stops) {
			n--
		}
	}
	return n
}

// Stops reports whether token t ends the session (finish reason stop): the
// vocabulary's end-of-generation tokens and BOS unless Options.NoStop is set
// (llama2.c stops at BOS too: its vocabularies use BOS to delimit texts), and
// Request.StopTokens always. EndIDs lists the same set.
func (s *Session) Stops(t int32) bool {
	return (!s.noStop && (tokenizer.IsEOG(s.tok, t) || t == s.tok.BOS())) || slices.Contains(s.Req.StopTokens, t)
}

// EndIDs lists, sorted and without repeats, the tokens Stops is true for: the
// end-of-sequence set of a decoding that sees whole hypotheses (beam search),
// which must end them on exactly the tokens plain decoding stops at.
func (s *Session) EndIDs() []int32 {
	ids := slices.Clone(s.Req.StopTokens)
	if !s.noStop {
		if g, ok := s.tok.(tokenizer.EOGer); ok {
			ids = append(ids, g.EOG()...)
		} else if t := s.tok.EOS(); t >= 0 {
			ids = append(ids, t)
		}
		if t := s.tok.BOS(); t >= 0 {
			ids = append(ids, t)
		}
	}
	ids = slices.DeleteFunc(ids, func(t int32) bool { return t < 0 })
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Keeps is how many of toks, accepted in order, s would keep: Accept
// appends tokens until one stops it (not kept) or the length or context is
// reached (that one kept). A verifier counts what a pass contributed with it.
func (s *Session) Keeps(toks []int32) int {
	if s.Done() {
		return 0
	}
	n := len(s.Tokens)
	for i, t := range toks {
		if s.Stops(t) {
			return i
		}
		n++
		if (s.maxNew > 0 && n-s.NPrompt >= s.maxNew) || n > s.context {
			return i + 1
		}
	}
	return len(toks)
}

// Sampler is the request's sampler (a verifier needs its options).
func (s *Session) Sampler() *sample.Sampler { return s.sampler }

// Context is the KV slots the session may fill.
func (s *Session) Context() int { return s.context }

// streamText is the text that token next (after prev) completes. Usually that
// is its vocabulary piece, returned as is; text the decoder had to assemble
// is held in an append-only chunk and handed out as a slice of it. Neither
// allocates per token, and OnToken may keep the string.
func (s *Session) streamText(prev, next int32) string {
	p := s.tok.Piece(prev, next)
	s.out = s.dec.AppendNext(s.out[:0], next)
	if string(s.out) == p {
		return p
	}
	return s.hold(s.out)
}

// hold copies b into s.held and returns it as a string that stays valid: a
// strings.Builder never changes bytes it has written. A full chunk is
// replaced by a new one; the strings cut from it keep it alive.
func (s *Session) hold(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s.held.Cap()-s.held.Len() < len(b) {
		s.held = strings.Builder{}
		s.held.Grow(max(heldChunk, len(b)))
	}
	n := s.held.Len()
	s.held.Write(b)
	return s.held.String()[n:]
}

// MaxNew is the most tokens the request may generate (0: the context).
func (s *Session) MaxNew() int { return s.maxNew }

// SetGenerated replaces the generated tokens (a beam search's best live
// beam), so that the next step feeds the last one.
func (s *Session) SetGenerated(gen []int32) {
	s.Tokens = append(s.Tokens[:s.NPrompt], gen...)
	s.Cached = len(s.Tokens) - 1
	if s.FirstToken.IsZero() {
		s.FirstToken = time.Now()
	}
}

// FinishBeams ends a beam search (or best_of) with its ranked hypotheses:
// Tokens become the prompt and the best one (without its end-of-sequence
// token), and Cached the prompt: Cached tokens of Tokens are always in the
// session's KV sequence, which held whichever hypothesis it last followed.
func (s *Session) FinishBeams(hyps []beamsearch.Hypothesis, eos func(int32) bool) {
	s.Beams = hyps
	reason := FinishLength
	var best []int32
	if len(hyps) > 0 {
		best = hyps[0].Tokens
		if n := len(best); n > 0 && eos(best[n-1]) {
			best, reason = best[:n-1], FinishStop
		}
	}
	s.Tokens = append(s.Tokens[:s.NPrompt], best...)
	// The session's KV sequence held whichever hypothesis it last followed:
	// only the prompt is sure to be the best one's history.
	s.Cached = min(s.Cached, s.NPrompt)
	if s.Req.OnToken != nil {
		for i, t := range best {
			s.Req.OnToken(t, s.streamText(s.Tokens[s.NPrompt+i-1], t))
		}
	}
	s.end(reason)
}

// Cancel ends s with finish reason cancelled (unless it is done already).
func (s *Session) Cancel(cause error) {
	if s.Done() {
		return
	}
	s.Err = fmt.Errorf("request %s: %w", s.Req.ID, cause)
	s.end(FinishCancelled)
}

// Fail ends s with err.
func (s *Session) Fail(err error) {
	if s.Done() {
		return
	}
	s.fail(err)
}

func (s *Session) fail(err error) *Session {
	s.Err = err
	s.end(FinishError)
	return s
}

func (s *Session) end(reason string) {
	s.Finish, s.End = reason, time.Now()
	if s.dec != nil && s.dec.Pending() > 0 {
		s.out = s.dec.AppendFlush(s.out[:0])
		s.Req.OnToken(-1, s.hold(s.out))
	}
	if s.cancel != nil {
		s.cancel()
	}
}

// Text is the text of tokens as llama2.c's run.c prints it (the space after
// BOS dropped, BOS and control tokens not printed), with byte pieces decoded
// into complete UTF-8 (tokenizer.Decode).
func Text(tok tokenizer.Tokenizer, tokens []int32) string {
	return tokenizer.Decode(tok, -1, tokens)
}
