package decode

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/spec"
)

// Speculative decoding is the engine strategy of a pipeline with a
// draft_tree stage. Before the target's pass it grows, for every generating
// session of the step, a draft (a SpecExec tree, specexec.go; a chain,
// chain.go; a prompt-lookup chain, lookup.go) and writes the draft's nodes
// into the step's batch right after the session's root row; after the pass it
// verifies them, commits the accepted path's KV rows and hands the session
// the accepted tokens.
//
// The algorithms are package spec's (tree search, chain verification, prompt
// lookup); this file owns what they leave to the engine: the draft model's
// forward passes and KV cache, the mapping of draft nodes to KV slots and
// batch rows, and the statistics.
//
// Same seed, same text: SpecExec's emitted tokens are drawn by the session's
// own sampler at each accepted prefix (session.Sample), with the uniform plain
// decoding draws there, and the target's logits at a tree node are
// bit-identical to those of the same prefix decoded linearly (the kernels are
// batch-invariant and the tree mask shows a node only its ancestors). So its
// text is byte-identical to plain decoding whatever the draft. Chain decoding
// is exact in distribution (spec.VerifyChain) and byte-identical under greedy.

// Speculative modes.
const (
	SpecExec = "specexec" // a draft tree by budgeted best-first search
	Chain    = "chain"    // γ draft tokens, accepted by min(1, p/q)
	Lookup   = "lookup"   // γ tokens from an n-gram match, no draft model
)

// ErrVocab marks a draft model whose vocabulary is not the target's.
var ErrVocab = errors.New("decode: the draft's vocabulary differs from the target's")

// SpecOptions configure speculative decoding.
type SpecOptions struct {
	Mode string
	Tree spec.TreeOptions // SpecExec
	// AutoBudget (SpecExec) picks each round's tree budget, up to
	// Tree.Budget, for the most tokens per second (budget.go); Tree.Budget
	// still sizes the engine (Needs), so it is the largest budget the
	// chooser may pick.
	AutoBudget bool
	DraftMax   int                // Chain and Lookup: γ
	Lookup     spec.LookupOptions // Lookup (NumDraft is DraftMax)
	// MaxSeqs, Context and PageTokens size the draft's KV cache like the
	// target's (sched.Options).
	MaxSeqs, Context, PageTokens int
	// KVBudget bounds the draft's KV bytes in memory (0: none), spilling to
	// SpillDir as the target's cache does (sched.BudgetKV): the draft's
	// share of kv_budget (the engine splits it by Needs.DraftKV). A step
	// then drafts for the sessions, oldest first, whose draft pages fit its
	// pass share; the others decode without a draft that step.
	KVBudget int64
	SpillDir string
	// PrefixCache caches the draft's full KV pages as the target's cache
	// does (prefix_cache): a session's draft sequence starts from the pages
	// of the longest prompt prefix a finished session left, keyed by
	// DraftID (the draft model's identity) and the tokens, so the draft too
	// computes a shared prompt once.
	PrefixCache bool
	DraftID     string
}

// Needs is what the mode asks of the engine: headroom for its rows and, with
// a draft model, a share of the KV budget.
func (o SpecOptions) Needs() Needs {
	n := Needs{Rows: o.Rows(), Reach: o.Depth() + o.Rows() + o.Tree.MaxBeams*o.Tree.Branch}
	if o.Mode != Lookup {
		n.DraftKV = func(a model.Arch, so sched.Options) kvcache.Options {
			d := o
			d.MaxSeqs, d.Context, d.PageTokens = so.MaxSeqs, so.Context, so.PageTokens
			return d.DraftKV(a)
		}
	}
	return n
}

// DraftKV is the draft's KV cache for a draft model of arch a (no budget
// set), sized as the target's (sched.KVOptions): each sequence's context and
// draft headroom rounded up to whole pages.
func (o SpecOptions) DraftKV(a model.Arch) kvcache.Options {
	return sched.KVOptions(a, sched.Options{Context: o.Context, Headroom: o.draftRoom(), PageTokens: o.PageTokens, MaxSeqs: o.MaxSeqs})
}

// Rows is the most rows a draft adds to the target batch for one session.
func (o SpecOptions) Rows() int {
	if o.Mode == SpecExec {
		return o.Tree.Budget
	}
	return o.DraftMax
}

// draftRoom is the draft cache's KV slots per sequence past the context: a
// tree's expanded nodes all hold draft slots, including nodes the budget
// later pushed out, so growth stops before they would pass this.
func (o SpecOptions) draftRoom() int {
	if o.Mode == SpecExec {
		return o.Tree.Budget + o.Tree.MaxBeams + 1
	}
	return o.DraftMax + 1
}

// Depth is the most positions a draft reaches past its root.
func (o SpecOptions) Depth() int {
	if o.Mode == SpecExec {
		return o.Tree.MaxDepth
	}
	return o.DraftMax
}

// Validate checks o.
func (o *SpecOptions) Validate() error {
	switch o.Mode {
	case SpecExec:
		return o.Tree.Validate()
	case Chain, Lookup:
		if o.DraftMax < 1 {
			return fmt.Errorf("decode: draft_max = %d, want ≥ 1", o.DraftMax)
		}
		if o.Mode == Lookup {
			o.Lookup.NumDraft = o.DraftMax
			if o.Lookup.MaxNgram == 0 {
				o.Lookup.MaxNgram = 3
			}
			if o.Lookup.MinNgram == 0 {
				o.Lookup.MinNgram = 1
			}
		}
		return nil
	}
	return fmt.Errorf("decode: mode %q, want %q, %q or %q", o.Mode, SpecExec, Chain, Lookup)
}

// SpecStats count what speculative decoding did.
type SpecStats struct {
	Rounds      int64 // target passes that verified a draft (one per session per step)
	Emitted     int64 // tokens those passes emitted that the sessions kept (not cut by a stop or the length)
	DraftNodes  int64 // draft rows put into target batches
	DraftPasses int64 // draft model forward passes
	// ForcedNodes are draft nodes a grammar forced (jump-forward): they
	// entered the tree without a draft pass of their own (chain drafts:
	// the chain, likewise).
	ForcedNodes int64
	// ForcedMissed counts verifications that reached a forced node's
	// parent and took another token: never, unless the forced token was
	// wrong (verification still emits the target's, so the text is right;
	// the tests hold this at 0).
	ForcedMissed int64
	MaxDepth     int // deepest accepted path
	// KV is the draft cache's budget counters (zero without a budget);
	// Prefix its prefix cache's (zero without one).
	KV           kvcache.SpillStats
	Prefix       kvcache.PrefixStats
	DraftTime    time.Duration
	AcceptedRows int64 // draft rows kept
	// Budgets counts SpecExec rounds by tree budget (one key without
	// AutoBudget); Budget is the last round's.
	Budgets map[int]int64
	Budget  int
	// Passes times the target passes by their row count: the wall time
	// from the end of the draft's growth to the first verification (the
	// target's forward pass and the stages around it).
	Passes map[int]PassTime
}

// PassTime is the number and the total wall time of target passes of one
// row count.
type PassTime struct {
	N     int64
	Total time.Duration
}

// Mean is the mean time of one pass.
func (p PassTime) Mean() time.Duration {
	if p.N == 0 {
		return 0
	}
	return p.Total / time.Duration(p.N)
}

// TokensPerPass is the mean tokens one target pass emitted per session.
func (s SpecStats) TokensPerPass() float64 {
	if s.Rounds == 0 {
		return 0
	}
	return float64(s.Emitted) / float64(s.Rounds)
}

// draftMode is what differs between the speculative modes: how a draft is
// grown, how its nodes enter the target batch, and how it is verified.
type draftMode interface {
	// grow drafts for the sessions of spans idx of st.
	grow(ctx context.Context, d *Speculative, st *sched.Step, idx []int) error
	// rows appends s's draft nodes to b after the root at batch row root
	// and returns how many it added.
	rows(b *input.Batch, s *seqState, q *session.Session, root int32) int
	// verify checks s's draft against the target's logits by batch row and
	// returns the batch rows to keep (the root first) and the tokens to
	// accept.
	verify(d *Speculative, sp *sched.Span, s *seqState, logits func(row int32) []float32) (keep, accept []int32, err error)
}

// Speculative is the engine strategy of speculative decoding (one of the
// modes above). Expand and Settle run on the goroutine of the step in flight;
// Stats may be read from any goroutine.
type Speculative struct {
	o     SpecOptions
	mode  draftMode
	m     model.Model // nil for Lookup
	store offload.Store
	kv    *kvcache.Cache // the draft's; nil for Lookup
	cache *kvcache.Cache // the target's, where verified rows are committed
	st    *model.State
	vocab int

	seqs map[*session.Session]*seqState
	salt []byte      // the draft cache's prefix key salt
	next input.Batch // the rewritten target batch
	sc   sample.Scratch

	mu    sync.Mutex
	stats SpecStats
	auto  *budgetChooser // AutoBudget; under mu
	// marks holds each step's target pass start (the end of Expand) and
	// rows until its first Settle; under mu.
	marks map[*sched.Step]passMark
	probs []float64
}

type passMark struct {
	at   time.Time
	rows int
}

// seqState is one session's draft.
type seqState struct {
	seq     int32 // the draft cache's sequence: the session's KV id when it started
	fed     int32 // tokens of the session in the draft cache (linear history)
	tree    *spec.Tree
	slot    []int32 // draft KV slot per node id; -1 = not fed
	row     []int32 // target batch row per node id
	rootRow int32
	// chain and lookup
	chain []int32
	q     []sample.Dist
	// chainFed is how many of chain the draft has seen (chain mode);
	// chainForced marks the chain's forced tokens.
	chainFed    int
	chainForced []bool
	open        bool // a draft tree is open in the draft cache
	// fedNodes counts this round's tree nodes fed to the draft (each holds
	// a draft slot, even once the budget pushes it out).
	fedNodes int
	// budget is this round's tree budget; predicted the tree's expected
	// accepted length (AutoBudget).
	budget    int
	predicted float64
	chainBuf  []int32
}

// slotOf is tree node id's draft slot, -1 when the draft has not seen it.
func (s *seqState) slotOf(id int32) int32 {
	if int(id) >= len(s.slot) {
		return -1
	}
	return s.slot[id]
}

// unfed is the nodes from the highest ancestor of id the draft has not seen
// down to id: id alone, unless id ends a forced chain (spec.Tree.Force),
// whose nodes and the node it hangs from entered without a draft pass.
func (s *seqState) unfed(id int32) []int32 {
	c := s.chainBuf[:0]
	for n := id; n > 0 && s.slotOf(n) < 0; n = s.tree.Node(n).Parent {
		c = append(c, n)
	}
	slices.Reverse(c)
	s.chainBuf = c
	return c
}

// NewSpeculative builds the strategy over the draft model (nil for Lookup),
// committing verified rows to the target's cache.
func NewSpeculative(draft *model.Loaded, target *kvcache.Cache, o SpecOptions) (*Speculative, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	d := &Speculative{o: o, cache: target, seqs: map[*session.Session]*seqState{}, marks: map[*sched.Step]passMark{}}
	d.stats.Budgets, d.stats.Passes = map[int]int64{}, map[int]PassTime{}
	switch o.Mode {
	case SpecExec:
		d.mode = treeMode{}
		if o.AutoBudget {
			d.auto = newBudgetChooser(o.Tree.Budget)
		}
	case Chain:
		d.mode = chainMode{}
	case Lookup:
		d.mode = lookupMode{}
		return d, nil
	}
	if draft == nil {
		return nil, fmt.Errorf("decode: %s needs a draft model ([draft] path, or --draft)", o.Mode)
	}
	a := draft.Model.Arch()
	ko := o.DraftKV(a)
	ko.PrefixCache = o.PrefixCache
	if o.KVBudget > 0 {
		if err := sched.BudgetKV(&ko, o.KVBudget, o.SpillDir, o.MaxSeqs); err != nil {
			return nil, fmt.Errorf("decode: the draft's share of the KV budget: %w", err)
		}
	}
	kv, err := kvcache.New(ko)
	if err != nil {
		return nil, fmt.Errorf("decode: draft KV cache: %w", err)
	}
	d.m, d.store, d.kv, d.vocab = draft.Model, draft.Store, kv, a.Vocab
	d.salt = fmt.Appendf(nil, "draft=%q kv=%v", o.DraftID, ko.DType)
	d.st = &model.State{Batch: &input.Batch{}}
	return d, nil
}

// CheckVocab reports whether the draft's vocabulary equals the target's,
// naming both files and the first token that differs.
func CheckVocab(target, draft *model.Loaded) error {
	tt, dt := target.Tokenizer, draft.Tokenizer
	if tt.VocabSize() != dt.VocabSize() || target.Model.Arch().Vocab != draft.Model.Arch().Vocab {
		return fmt.Errorf("%w: %s has %d tokens, the draft %s has %d", ErrVocab, target.Source.Path, tt.VocabSize(), draft.Source.Path, dt.VocabSize())
	}
	for id := range int32(tt.VocabSize()) {
		// llama2.c's tokenizer.bin spells BOS and EOS "\n<s>\n" and
		// "\n</s>\n", a GGUF "<s>" and "</s>": the same control tokens.
		if (id == tt.BOS() && id == dt.BOS()) || (id == tt.EOS() && id == dt.EOS()) {
			continue
		}
		// SentencePiece GGUFs write a space as "▁", tokenizer.bin as " ".
		if a, b := tt.Token(id), dt.Token(id); strings.ReplaceAll(a, "▁", " ") != strings.ReplaceAll(b, "▁", " ") {
			return fmt.Errorf("%w: token %d is %q in %s but %q in the draft %s", ErrVocab, id, a, target.Source.Path, b, draft.Source.Path)
		}
	}
	return nil
}

// Owns is never asked: speculative decoding is an engine strategy.
func (d *Speculative) Owns(*session.Session) bool { return false }

// Close releases the draft cache's budget (its spill file and ristretto);
// Stats still reports its final counters.
func (d *Speculative) Close() error {
	if d.kv == nil {
		return nil
	}
	return d.kv.Close()
}

// Stats returns a snapshot.
func (d *Speculative) Stats() SpecStats {
	d.mu.Lock()
	st := d.stats
	st.Budgets, st.Passes = maps.Clone(st.Budgets), maps.Clone(st.Passes)
	d.mu.Unlock()
	if d.kv != nil {
		ks := d.kv.Stats()
		st.KV, st.Prefix = ks.Spill, ks.Prefix
	}
	return st
}

// drafts lists the spans of st that get a draft: a session generating (its
// one row is its last sampled token), while the step has room for its rows.
func (d *Speculative) drafts(st *sched.Step, spans []int) []int {
	var idx []int
	room := st.Room
	frames := -1 // under a budget: what the draft's pass may still pin per layer
	if d.kv != nil {
		frames = d.kv.MaxPassFrames()
	}
	for _, i := range spans {
		sp := st.Spans[i]
		q := sp.S
		if sp.Len != 1 || q.Pending() != 1 || q.Req.AllLogits || room < d.o.Rows() {
			continue
		}
		// The draft's positions must fit the context; near its end decode
		// plainly. (Its KV slots may pass the context: the caches have
		// Rows() slots of headroom.)
		if q.Cached+1+d.o.Depth() > q.Context() {
			continue
		}
		// Under the draft's KV budget its pass pins one layer of every
		// drafted sequence's pages, up to the tree's slots past the root.
		if frames >= 0 {
			need := d.kv.PassNeed(q.Cached + 1 + d.o.draftRoom())
			if need > frames {
				continue
			}
			frames -= need
		}
		room -= d.o.Rows()
		idx = append(idx, i)
	}
	return idx
}

// forget drops the draft state of sessions that have finished, leaving the
// full pages of their draft history in the draft's prefix cache.
func (d *Speculative) forget() {
	for q, s := range d.seqs {
		if q.Done() {
			// By now the scheduler has released q.Seq (it is -1): free the
			// draft sequence by the id it had. Its first s.fed slots hold
			// the session's first tokens: the root is fed before any draft
			// node, and only an accepted path is committed.
			if d.kv != nil {
				d.kv.Publish(s.seq, d.salt, q.Tokens[:min(int(s.fed), len(q.Tokens))])
				d.kv.Free(s.seq)
			}
			delete(d.seqs, q)
		}
	}
}

func (d *Speculative) state(q *session.Session) *seqState {
	s := d.seqs[q]
	if s == nil {
		s = &seqState{seq: q.Seq}
		if d.o.Mode == SpecExec {
			s.tree, _ = spec.NewTree(0, d.o.Tree) // options validated in New
		}
		d.seqs[q] = s
		if d.kv != nil {
			d.kv.Free(q.Seq) // a KV id reused from a finished session
			// The draft starts from its cached pages of the prompt, if any
			// (MapPrefix maps nothing without the prefix cache; its error,
			// a sequence not empty, leaves the draft computing it all).
			if n, err := d.kv.MapPrefix(q.Seq, d.salt, q.Tokens[:q.NPrompt]); err == nil {
				s.fed = n
			}
		}
	}
	return s
}

// Expand grows the drafts of the step's generating sessions and writes their
// nodes into the batch, before the target's pass reserves its KV slots.
func (d *Speculative) Expand(ctx context.Context, st *sched.Step, spans []int) error {
	if st.Err != nil {
		return nil
	}
	d.forget()
	idx := d.drafts(st, spans)
	if len(idx) == 0 {
		d.mark(st)
		return nil
	}
	t0 := time.Now()
	if err := d.mode.grow(ctx, d, st, idx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("speculative decoding: draft: %w", err)
	}
	took := time.Since(t0)
	d.mu.Lock()
	d.stats.DraftTime += took
	if d.o.Mode == SpecExec {
		nodes := 0
		for _, i := range idx {
			s := d.seqs[st.Spans[i].S]
			nodes += s.budget
			if d.auto != nil {
				d.probs = s.tree.Probs(d.probs[:0])
				s.predicted = d.auto.tree(d.probs, s.budget)
			}
		}
		if d.auto != nil {
			d.auto.drafted(nodes, took)
		}
	}
	d.mu.Unlock()
	d.rewrite(st, idx)
	d.mark(st)
	return nil
}

// treeBudget is the budget of this round's trees, for n drafted sequences.
func (d *Speculative) treeBudget(n int) int {
	if d.auto == nil {
		return d.o.Tree.Budget
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.auto.budget(n)
}

// mark notes the start of st's target pass (its batch is final).
func (d *Speculative) mark(st *sched.Step) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.marks) > 64 { // steps that never settled (errors)
		clear(d.marks)
	}
	d.marks[st] = passMark{time.Now(), st.State.Batch.Len()}
}

// passDone records st's target pass at its first Settle.
func (d *Speculative) passDone(st *sched.Step) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, ok := d.marks[st]
	if !ok {
		return
	}
	delete(d.marks, st)
	took := time.Since(m.at)
	pt := d.stats.Passes[m.rows]
	pt.N++
	pt.Total += took
	d.stats.Passes[m.rows] = pt
	if d.auto != nil {
		d.auto.pass(m.rows, took)
	}
}

// catchUp adds, for each drafted session, the tokens the draft has not seen
// (the accepted ones of the last round, then the root) as linear rows, the
// root's with logits.
func (d *Speculative) catchUp(b *input.Batch, st *sched.Step, idx []int) {
	for _, i := range idx {
		q := st.Spans[i].S
		s := d.state(q)
		root := int32(q.Cached) // the root's position = its slot
		for p := s.fed; p <= root; p++ {
			b.Add(q.Tokens[p], p, q.Seq, p == root)
		}
		s.fed = root + 1
	}
}

// forward runs the draft model over b and ends the pass; slots, when not
// nil, gets every row's KV slot.
func (d *Speculative) forward(ctx context.Context, b *input.Batch, slots *[]int32) error {
	pass, err := d.kv.Begin(ctx, b)
	if err != nil {
		return err
	}
	st := d.st
	st.Batch, st.Pass, st.Mask = b, pass, pass.Mask()
	if err := model.Forward(ctx, d.m, st, d.store, 0); err != nil {
		pass.Abort()
		return err
	}
	if slots != nil {
		*slots = append((*slots)[:0], pass.Slots()...)
	}
	d.mu.Lock()
	d.stats.DraftPasses++
	d.mu.Unlock()
	return pass.End()
}

// draftLogits is row j of the draft's last pass.
func (d *Speculative) draftLogits(j int) []float32 {
	return d.st.Logits[j*d.vocab : (j+1)*d.vocab]
}

// rewrite rebuilds st's batch with the draft rows placed right after their
// session's root row, keeping every span contiguous.
func (d *Speculative) rewrite(st *sched.Step, idx []int) {
	old := st.State.Batch
	nb := &d.next
	nb.Reset()
	drafted := map[int]bool{}
	for _, i := range idx {
		drafted[i] = true
	}
	added, j := 0, 0 // j walks old.Outputs, ascending like the spans' rows
	for i := range st.Spans {
		sp := &st.Spans[i]
		start := int32(nb.Len())
		out := len(nb.Outputs)
		for row := int32(sp.Start); row < int32(sp.Start+sp.Len); row++ {
			for j < len(old.Outputs) && old.Outputs[j] < row {
				j++
			}
			isOut := j < len(old.Outputs) && old.Outputs[j] == row
			nb.AddChild(old.Tokens[row], old.Positions[row], old.Seq[row], -1, -1, isOut)
		}
		sp.Start = int(start)
		if sp.NOut > 0 {
			sp.Out = out
		}
		if !drafted[i] {
			continue
		}
		q := sp.S
		s := d.seqs[q]
		s.rootRow = start
		n := d.mode.rows(nb, s, q, start)
		sp.Len += n
		sp.NOut += n
		added += n
	}
	// Swap the batches: the old one becomes the next rewrite's buffer.
	*old, *nb = *nb, *old
	st.Room -= added
	d.mu.Lock()
	d.stats.DraftNodes += int64(added)
	d.mu.Unlock()
}

// Settle verifies span i's draft against the target's logits, commits the
// kept rows to the KV cache and hands the session the accepted tokens, each
// under its stop rules. A span without a draft this step settles plainly.
func (d *Speculative) Settle(_ context.Context, st *sched.Step, i int) error {
	d.passDone(st)
	sp := &st.Spans[i]
	q := sp.S
	s := d.seqs[q]
	if s == nil || sp.Len == 1 || q.Pending() != 1 {
		return SettlePlain(st, i) // no draft this step
	}
	logits := func(row int32) []float32 {
		return st.Logits(sp.Out + int(row) - sp.Start) // every row of a drafted span is an output
	}
	keep, accept, err := d.mode.verify(d, sp, s, logits)
	if err != nil {
		return fmt.Errorf("speculative decoding: request %s: %w", q.Req.ID, err)
	}
	if err := d.cache.Commit(q.Seq, keep); err != nil {
		return fmt.Errorf("request %s: commit of %d verified rows: %w", q.Req.ID, len(keep), err)
	}
	q.Cached += len(keep)
	for _, t := range accept {
		if q.Accept(t) {
			break
		}
	}
	return nil
}

func (d *Speculative) count(emitted, accepted int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Rounds++
	d.stats.Emitted += int64(emitted)
	d.stats.AcceptedRows += int64(accepted)
	d.stats.MaxDepth = max(d.stats.MaxDepth, accepted)
}
