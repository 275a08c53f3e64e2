// Package sched is continuous batching: it admits sessions, builds each
// step's batch from the rows of all active sessions under a token budget, and
// after the model has run the step, hands each session its logits and retires
// the finished ones.
//
// One step is one forward pass of one batch. A step's batch holds the decode
// rows of every session that is generating (its last token, after the forced
// tokens jump-forward took if any), then prefill chunks of sessions
// still reading their prompt (oldest first, each at most PrefillChunk rows),
// until MaxBatchTokens rows — vLLM's max_num_batched_tokens. A pass runs one
// LoRA adapter set, the oldest active session's: sessions on another set wait
// until the oldest active session is on theirs. Because the kernels fix the
// reduction order of every output element by shape alone, a session's logits
// do not depend on which other sessions shared its steps: its output is
// byte-identical whether it ran alone or among 63 others.
//
// The scheduler is driven by three calls per step, all made by the decode
// loop (package decode): Plan picks the rows, Reserve (after the decoding
// strategies have added theirs: draft nodes, other beams) takes their
// KV-cache pass, and EndPass ends it once the model has run; the strategies
// then turn each span's logits into tokens. Exactly one step is in flight at
// a time, so they never overlap; the kernel pool works on the rows of that
// one pass.
package sched

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tensor"
)

// Options size the scheduler.
type Options struct {
	MaxSeqs        int // sessions in flight at once (max_in_flight); ≥ 1
	MaxBatchTokens int // rows in one step; 0 = MaxSeqs·PrefillChunk, at least MaxSeqs
	PrefillChunk   int // prompt rows of one session in one step; 0 = 64
	Context        int // KV slots per session
	PageTokens     int // KV page size; 0 = 16
	// Headroom is KV slots per sequence beyond Context, for draft-tree nodes
	// that a verifying pass holds until it commits one path (their positions
	// stay within Context; their slots need not).
	Headroom int
	// KVBudget bounds the KV-cache bytes resident in memory (kv_budget);
	// 0 = none. Pages beyond it go to a spill file in SpillDir ("" = the
	// system's temp directory) and come back when a step needs them. A
	// step then holds only the sessions whose pages (one layer at a time)
	// fit the budget's pass share, oldest first; the others wait.
	KVBudget int64
	SpillDir string
	// KVType is the KV cache's element type (kv_type): tensor.F32 (the zero
	// value) or tensor.F16, binary16 pages of half the bytes.
	KVType tensor.DType
	// PrefixCache turns on prefix caching (prefix_cache, see prefix.go): a
	// session starts from the cached KV pages of the longest prefix of its
	// prompt that earlier or concurrent sessions computed. PrefixCacheBytes
	// bounds the cached pages no session holds (prefix_cache_size); 0 =
	// KVBudget when one is set, else the KV pool.
	PrefixCache      bool
	PrefixCacheBytes int64
	// ModelID names the model in the prefix cache's keys (its path).
	ModelID string
}

// ErrClosed is returned by Admit after Close, and is the error of sessions
// cancelled by Shutdown.
var ErrClosed = errors.New("sched: engine closed")

// Validate fills defaults and checks o, naming the pipeline keys.
func (o *Options) Validate() error {
	if o.PrefillChunk == 0 {
		o.PrefillChunk = 64
	}
	if o.MaxBatchTokens == 0 {
		o.MaxBatchTokens = max(o.MaxSeqs*o.PrefillChunk, o.MaxSeqs)
	}
	switch {
	case o.MaxSeqs < 1:
		return fmt.Errorf("sched: max_in_flight = %d, want ≥ 1", o.MaxSeqs)
	case o.PrefillChunk < 1:
		return fmt.Errorf("sched: prefill_chunk = %d, want ≥ 1", o.PrefillChunk)
	case o.MaxBatchTokens < o.PrefillChunk:
		return fmt.Errorf("sched: prefill_chunk = %d does not fit in max_batch_tokens = %d: one prompt chunk must fit in a step", o.PrefillChunk, o.MaxBatchTokens)
	case o.MaxBatchTokens < o.MaxSeqs:
		return fmt.Errorf("sched: max_batch_tokens = %d is less than max_in_flight = %d: every generating sequence needs its row in each step", o.MaxBatchTokens, o.MaxSeqs)
	case o.Context < 1:
		return fmt.Errorf("sched: context = %d, want ≥ 1", o.Context)
	case o.KVBudget < 0:
		return fmt.Errorf("sched: kv_budget = %d, want ≥ 0 (0 = none)", o.KVBudget)
	case o.KVType != tensor.F32 && o.KVType != tensor.F16:
		return fmt.Errorf("sched: kv_type = %v, want f32 or f16", o.KVType)
	case o.PrefixCacheBytes < 0:
		return fmt.Errorf("sched: prefix_cache_size = %d, want ≥ 0 (0 = the KV budget, or the KV pool)", o.PrefixCacheBytes)
	}
	return nil
}

// Span is the rows of one session in a step's batch.
type Span struct {
	S          *session.Session
	Start, Len int // batch rows [Start, Start+Len)
	Out        int // index of its first output row in Batch.Outputs; -1 = none
	NOut       int // its output rows
}

// Step is one forward pass: the batch, the model's activations for it and
// which session owns which rows. The scheduler reuses one Step for every pass.
type Step struct {
	State *model.State
	Spans []Span
	// Done is set by Plan when the scheduler has closed and no session is
	// left: the loop ends.
	Done bool
	// Err is set by a stage whose work on the step failed; Finish then fails
	// every session of the step instead of sampling.
	Err error
	// Room is how many more rows a strategy may add to the batch before
	// Reserve (max_batch_tokens less the rows Plan chose).
	Room int
	// Vocab is the length of one row of logits.
	Vocab int
}

// Logits is the row of logits of output row j (an index into
// State.Batch.Outputs), valid once the pass has ended.
func (st *Step) Logits(j int) []float32 {
	return st.State.Logits[j*st.Vocab : (j+1)*st.Vocab]
}

// NewStep returns an empty step.
func NewStep() *Step { return &Step{State: &model.State{Batch: &input.Batch{}}} }

// Stats is a snapshot for metrics.
type Stats struct {
	Queued, Active int
	Steps          int64
	Rows           int64 // rows of every step so far
	MaxSeqs        int   // the most sessions one step has carried
	Cache          kvcache.Stats
}

// Scheduler admits sessions and plans steps.
type Scheduler struct {
	o     Options
	Cache *kvcache.Cache

	vocab   int
	scratch sample.Scratch        // the sampler's, lent to every session (Finish samples one at a time)
	queue   chan *session.Session // admitted, not yet active
	retired chan *session.Session // finished, for the results side
	stop    chan struct{}         // closed by Close: no more admissions
	space   chan struct{}         // a queued session was taken: room to admit
	once    sync.Once

	mu       sync.Mutex
	closed   bool               // under mu, so that no Admit slips in after the last Plan
	ended    bool               // Retired has been closed
	active   []*session.Session // oldest first
	held     []*session.Session // taken from the queue, waiting for a shared prefix (prefix.go)
	keys     map[*session.Session][]kvcache.PrefixKey
	salts    map[*session.Session][]byte
	freeSeqs []int32
	shutdown bool // Shutdown: cancel everything at the next Plan
	steps    int64
	rows     int64
	maxSeqs  int
}

// New sizes the KV cache for MaxSeqs sessions of Context slots each.
func New(a model.Arch, o Options) (*Scheduler, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ko := KVOptions(a, o)
	if o.KVBudget > 0 {
		if err := budgetOptions(&ko, o); err != nil {
			return nil, err
		}
	}
	kv, err := kvcache.New(ko)
	if err != nil {
		return nil, fmt.Errorf("sched: max_in_flight = %d × context = %d: %w", o.MaxSeqs, o.Context, err)
	}
	// The pages one step can fill (its rows over at most MaxSeqs sequences,
	// each ending in a partial page) get their memory now, not in the first
	// request's first step.
	pt := ko.PageTokens
	if pt == 0 {
		pt = kvcache.DefaultPageTokens
	}
	kv.Reserve((o.MaxBatchTokens+pt-1)/pt + min(o.MaxSeqs, o.MaxBatchTokens) - 1)
	// One collection now sets the heap goal from what the engine holds
	// (weights are off the heap; these pages, the model's tables). Without
	// it the first prefill's scratch (about 2.5 MB on a 15M model) crossed
	// the goal left by loading, and the collection's mark worker took one
	// of the step's two threads for a few milliseconds: 15M prefill at 2
	// threads on an AMD EPYC (Zen 5) held to AVX2, fresh processes,
	// medians of 8 alternating runs: F32 8.6k -> 10.2k tok/s, F16 (6 runs)
	// 8.2k -> 10.4k. llama.cpp likewise allocates its compute buffers when
	// it creates a context, not in the first decode.
	runtime.GC()
	s := &Scheduler{
		o: o, Cache: kv, vocab: a.Vocab,
		space:   make(chan struct{}, 1),
		queue:   make(chan *session.Session, o.MaxSeqs),
		retired: make(chan *session.Session, o.MaxSeqs),
		stop:    make(chan struct{}),
		keys:    map[*session.Session][]kvcache.PrefixKey{},
		salts:   map[*session.Session][]byte{},
	}
	for i := o.MaxSeqs - 1; i >= 0; i-- {
		s.freeSeqs = append(s.freeSeqs, int32(i))
	}
	return s, nil
}

// budgetOptions sets the KV cache's budget from o.KVBudget (BudgetKV).
func budgetOptions(ko *kvcache.Options, o Options) error {
	return BudgetKV(ko, o.KVBudget, o.SpillDir, o.MaxSeqs)
}

// BudgetKV sets the budget of a KV cache sized by ko (for maxSeqs
// sequences of ko.MaxSeqLen tokens) to budget bytes, spilling to spillDir:
// the pass share is half the budget's frames, or what one step of a single
// session at its full length needs if that is more; a budget that cannot
// hold even that is an error naming the minimum. A budget that holds every
// page is none. (The scheduler's cache and a draft model's use it.)
func BudgetKV(ko *kvcache.Options, budget int64, spillDir string, maxSeqs int) error {
	sh := shapeOf(*ko)
	minimum, all := KVNeed(*ko, maxSeqs)
	if budget >= all {
		return nil // everything fits: no spill file
	}
	frames := budget / sh.frameBytes
	minFrames := sh.pagesPerSeq + 2 // one layer of one full sequence, and two frames for copies
	if frames < minFrames {
		return fmt.Errorf("sched: kv_budget = %d bytes (%s) is below one step's need: a step of one sequence of %d tokens pins %d KV pages of one layer (%d bytes each: %d tokens × %d KV heads × %d dims × K and V × %d bytes) plus 2 for copies; the minimum is %d bytes (%s)",
			budget, offload.FormatBytes(budget), ko.MaxSeqLen, sh.pagesPerSeq, sh.frameBytes, sh.pt, ko.KVHeads, ko.HeadDim, sh.elem, minimum, offload.FormatBytes(minimum))
	}
	ko.Budget, ko.SpillDir = budget, spillDir
	ko.PassFrames = int(min(max(frames/2, minFrames), frames))
	return nil
}

// KVNeed is what BudgetKV accepts at least for a cache sized by ko for
// maxSeqs sequences (one layer of one full-length sequence, and two frames
// for copies) and what holds every page, in bytes.
func KVNeed(ko kvcache.Options, maxSeqs int) (minimum, all int64) {
	sh := shapeOf(ko)
	return (sh.pagesPerSeq + 2) * sh.frameBytes, sh.pagesPerSeq * int64(maxSeqs) * int64(ko.Layers) * sh.frameBytes
}

// kvShape is a cache's page tokens, element bytes, frame bytes and pages
// per sequence.
type kvShape struct{ pt, elem, frameBytes, pagesPerSeq int64 }

func shapeOf(ko kvcache.Options) kvShape {
	sh := kvShape{pt: int64(ko.PageTokens), elem: 4}
	if sh.pt == 0 {
		sh.pt = kvcache.DefaultPageTokens
	}
	if ko.DType == tensor.F16 {
		sh.elem = 2
	}
	sh.frameBytes = 2 * sh.pt * int64(ko.KVHeads) * int64(ko.HeadDim) * sh.elem
	sh.pagesPerSeq = (int64(ko.MaxSeqLen) + sh.pt - 1) / sh.pt
	return sh
}

// KVOptions is the KV cache New makes for a model of arch a under o (no
// budget set). The pool holds MaxSeqs sequences at their full length, each
// rounded up to whole pages: a sequence's last page is its own even when
// partly empty, so a pool of (Context+Headroom)·MaxSeqs slots would run out
// of pages before its sequences reached their context.
func KVOptions(a model.Arch, o Options) kvcache.Options {
	seqLen := o.Context + o.Headroom
	pt := o.PageTokens
	if pt == 0 {
		pt = kvcache.DefaultPageTokens
	}
	return kvcache.Options{
		Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
		PageTokens: o.PageTokens, MaxTokens: (seqLen + pt - 1) / pt * pt * o.MaxSeqs, MaxSeqLen: seqLen,
		Window: a.SlidingWindow, DType: o.KVType,
		PrefixCache: o.PrefixCache, PrefixBytes: o.PrefixCacheBytes,
	}
}

// Options returns the options with defaults filled in.
func (s *Scheduler) Options() Options { return s.o }

// Admit queues a session. It blocks while the queue is full (backpressure to
// the request source) and fails after Close or when ctx ends. A session that
// is already finished (it failed to tokenize) is queued too and goes straight
// to the retired side, in order.
func (s *Scheduler) Admit(ctx context.Context, q *session.Session) error {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return ErrClosed
		}
		select {
		case s.queue <- q:
			room := len(s.queue) < cap(s.queue)
			s.mu.Unlock()
			if room {
				s.signalSpace() // pass the wake-up on to another waiting Admit
			}
			return nil
		default:
		}
		s.mu.Unlock()
		select {
		case <-s.space:
		case <-s.stop:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Scheduler) signalSpace() {
	select {
	case s.space <- struct{}{}:
	default:
	}
}

// Close ends admission: once the queued and active sessions have finished,
// Plan marks its step Done and Retired is closed. Idempotent.
func (s *Scheduler) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.once.Do(func() { close(s.stop) })
}

// Shutdown cancels every queued and active session at the next step, and
// every session admitted after it (finish reason cancelled). Admission stays
// open so that each still reaches the retired side; Close ends it.
func (s *Scheduler) Shutdown() {
	s.mu.Lock()
	s.shutdown = true
	s.mu.Unlock()
}

// Retired delivers finished sessions, each once, and is closed after the last
// one once the scheduler is closed and idle.
func (s *Scheduler) Retired() <-chan *session.Session { return s.retired }

// Stats returns a snapshot.
func (s *Scheduler) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Queued: len(s.queue) + len(s.held), Active: len(s.active), Steps: s.steps, Rows: s.rows, MaxSeqs: s.maxSeqs, Cache: s.Cache.Stats()}
}

// Plan builds the next step's batch into st (Reserve then takes its KV
// slots). It waits while there is nothing to run. It returns an error only
// when ctx ends.
func (s *Scheduler) Plan(ctx context.Context, st *Step) error {
	st.Spans, st.Err, st.Done = st.Spans[:0], nil, false
	for {
		if err := s.activate(ctx); err != nil {
			return err
		}
		if st.Done = s.idleAndClosed(); st.Done {
			return nil
		}
		if s.build(ctx, st) {
			return nil
		}
		// Every active session was cancelled while planning: try again.
	}
}

// activate moves queued sessions into the active set while there is room; with
// none active it blocks for the first one (or for Close). With the prefix
// cache it first publishes what the active sessions computed, starts each
// admitted session from its cached prefix, and holds back a session whose
// shared prefix an active one is still computing (prefix.go).
func (s *Scheduler) activate(ctx context.Context) error {
	if s.o.PrefixCache {
		s.mu.Lock()
		s.publishActive()
		s.mu.Unlock()
	}
	for {
		s.mu.Lock()
		s.cancelAll()
		n := len(s.active)
		room := n < s.o.MaxSeqs
		var q *session.Session
		if room {
			q = s.unheld() // held back earlier, free to go now
		}
		full := len(s.held) >= s.o.MaxSeqs
		s.mu.Unlock()
		if !room {
			return nil
		}
		switch {
		case q != nil:
		case full:
			return nil // as many held back as can run at once: the queue waits
		case n > 0:
			select {
			case q = <-s.queue:
				s.signalSpace()
			default:
				return nil
			}
		default:
			select {
			case q = <-s.queue:
			case <-s.stop:
				select {
				case q = <-s.queue:
				default:
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			s.signalSpace()
		}
		if q.Check() {
			s.mu.Lock()
			s.forgetKeys(q)
			s.mu.Unlock()
			s.retired <- q
			continue
		}
		s.mu.Lock()
		if s.o.PrefixCache && s.waits(q) {
			s.held = append(s.held, q)
			s.mu.Unlock()
			continue
		}
		q.Seq = s.freeSeqs[len(s.freeSeqs)-1]
		q.Scratch = &s.scratch
		s.freeSeqs = s.freeSeqs[:len(s.freeSeqs)-1]
		s.mapPrefix(q)
		s.active = append(s.active, q)
		s.mu.Unlock()
	}
}

// cancelAll cancels every session after Shutdown. s.mu held.
func (s *Scheduler) cancelAll() {
	if !s.shutdown {
		return
	}
	for {
		select {
		case q := <-s.queue:
			q.Cancel(ErrClosed)
			s.retired <- q
			s.signalSpace()
			continue
		default:
		}
		break
	}
	for _, q := range s.active {
		q.Cancel(ErrClosed)
	}
	for _, q := range s.held {
		q.Cancel(ErrClosed)
	}
}

// idleAndClosed reports whether the scheduler is closed with nothing left,
// and then closes Retired (once).
func (s *Scheduler) idleAndClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.active) > 0 || len(s.queue) > 0 || len(s.held) > 0 || !s.closed {
		return false
	}
	if !s.ended {
		s.ended = true
		close(s.retired)
	}
	return true
}

// build fills st from the active sessions; false when none was left to run.
func (s *Scheduler) build(ctx context.Context, st *Step) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Retire what finished or was cancelled since the last step.
	live := s.active[:0]
	for _, q := range s.active {
		if q.Check() {
			s.release(q)
			s.retired <- q
			continue
		}
		live = append(live, q)
	}
	clear(s.active[len(live):])
	s.active = live
	if len(live) == 0 {
		return false
	}
	b := st.State.Batch
	b.Reset()
	st.State.Logits = st.State.Logits[:0] // the head writes this step's
	// One LoRA adapter per pass: the oldest session's.
	adapter := live[0].Req.Adapter
	budget := s.o.MaxBatchTokens
	// Under a KV budget a pass pins one layer of its sequences' pages: take
	// sessions, oldest first, while theirs fit (the oldest always does).
	frames := s.Cache.MaxPassFrames()
	fits := func(q *session.Session, n int) bool {
		if frames < 0 {
			return true
		}
		need := s.Cache.PassNeed(q.Cached + n + s.o.Headroom)
		if need > frames {
			return false
		}
		frames -= need
		return true
	}
	add := func(q *session.Session, n int) {
		sp := Span{S: q, Start: b.Len(), Len: n, Out: -1}
		end := q.Cached + n
		for i := q.Cached; i < end; i++ {
			out := i == len(q.Tokens)-1 || q.Req.AllLogits
			if out && sp.Out < 0 {
				sp.Out = len(b.Outputs)
			}
			if out {
				sp.NOut++
			}
			b.Add(q.Tokens[i], int32(i), q.Seq, out)
		}
		st.Spans = append(st.Spans, sp)
		budget -= n
	}
	// Decode rows first, so generating sessions never wait on prompts. A
	// generating session's rows are its last sampled token, after the run
	// of forced tokens jump-forward appended before it if there is one
	// (session.JumpForward): the run goes in as one span, a chunk at most.
	generating := func(q *session.Session) bool { return q.Pending() == 1 || q.Cached >= q.NPrompt }
	for _, q := range live {
		if q.Req.Adapter == adapter && generating(q) && budget > 0 {
			if n := min(q.Pending(), s.o.PrefillChunk, budget); n > 0 && fits(q, n) {
				add(q, n)
			}
		}
	}
	for _, q := range live {
		if q.Req.Adapter == adapter && !generating(q) && budget > 0 {
			if n := min(q.Pending(), s.o.PrefillChunk, budget); fits(q, n) {
				add(q, n)
			}
		}
	}
	st.State.Adapter = adapter
	st.Room = budget
	st.Vocab = s.vocab
	return true
}

// Reserve takes the step's KV-cache pass: every row of the batch gets its
// slot. It runs after Plan and after any stage that adds rows (a drafter's
// tree), at the model's door (the embed stage). A batch the cache cannot take
// fails the step's sessions (Err is set), not the engine.
func (s *Scheduler) Reserve(ctx context.Context, st *Step) error {
	if st.State.Pass != nil || st.Err != nil {
		return nil
	}
	b := st.State.Batch
	pass, err := s.Cache.Begin(ctx, b)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// The cache is sized for MaxSeqs full contexts, so this is a bug or
		// a tree too large; fail the step's sessions rather than the engine.
		st.Err = fmt.Errorf("sched: %w", err)
		return nil
	}
	st.State.Pass, st.State.Mask = pass, pass.Mask()
	s.mu.Lock()
	s.steps++
	s.rows += int64(b.Len())
	s.maxSeqs = max(s.maxSeqs, len(st.Spans))
	s.mu.Unlock()
	return nil
}

// EndPass ends the step's pass: its rows become cached history. It reports
// whether the step's spans are to be settled (each by its decoding
// strategy, package decode); if a stage set st.Err, or the pass cannot end,
// or the head left fewer logits than output rows, every session of the step
// fails instead and it reports false.
func (s *Scheduler) EndPass(st *Step) bool {
	kv := st.State.Pass
	st.State.Pass, st.State.Mask = nil, nil
	if st.Err != nil {
		if kv != nil {
			kv.Abort()
		}
		for _, sp := range st.Spans {
			sp.S.Fail(fmt.Errorf("request %s: %w", sp.S.Req.ID, st.Err))
		}
		return false
	}
	if kv == nil {
		return false
	}
	if err := kv.End(); err != nil {
		for _, sp := range st.Spans {
			sp.S.Fail(err)
		}
		return false
	}
	b := st.State.Batch
	if len(st.State.Logits) < len(b.Outputs)*s.vocab {
		// A pipeline without a head stage, or one that dropped the logits.
		for _, sp := range st.Spans {
			sp.S.Fail(fmt.Errorf("sched: request %s: the step reached sampling with %d logits for %d output rows of %d: is there a head stage?", sp.S.Req.ID, len(st.State.Logits), len(b.Outputs), s.vocab))
		}
		return false
	}
	return true
}

// TakeSeqs lends n free KV-cache sequence ids beyond a session's own (a
// beam search's other beams, best_of's other candidates), all or none:
// false, and nothing taken, when fewer are free. GiveSeq returns each, its
// sequence freed in the cache.
func (s *Scheduler) TakeSeqs(n int) ([]int32, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.freeSeqs) < n {
		return nil, false
	}
	ids := slices.Clone(s.freeSeqs[len(s.freeSeqs)-n:])
	slices.Reverse(ids) // the order the ids were taken one at a time before
	s.freeSeqs = s.freeSeqs[:len(s.freeSeqs)-n]
	return ids, true
}

// GiveSeq returns an id from TakeSeqs.
func (s *Scheduler) GiveSeq(id int32) {
	s.Cache.Free(id)
	s.mu.Lock()
	s.freeSeqs = append(s.freeSeqs, id)
	s.mu.Unlock()
}

// FreeSeqs is the number of free KV-sequence ids.
func (s *Scheduler) FreeSeqs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.freeSeqs)
}

// release frees q's KV sequence. s.mu held.
func (s *Scheduler) release(q *session.Session) {
	defer s.forgetKeys(q)
	if q.Seq < 0 {
		return
	}
	s.publish(q)
	s.Cache.Free(q.Seq)
	s.freeSeqs = append(s.freeSeqs, q.Seq)
	q.Seq = -1
	q.Scratch = nil
}
