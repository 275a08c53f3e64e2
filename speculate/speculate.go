// Package speculate runs speculative decoding inside the engine's step: before
// the target's forward pass it grows, for every generating session of the
// step, a draft (a SpecExec tree, a chain, or a prompt-lookup chain) with the
// draft model, and writes the draft's nodes into the step's batch; after the
// target's pass it verifies them and tells the scheduler which rows to keep
// and which tokens to accept (sched.Span.Keep/Accept).
//
// The algorithms are package spec's (tree search, chain verification, prompt
// lookup); this package owns what they leave to the engine: the draft model's
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
package speculate

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// Modes.
const (
	SpecExec = "specexec" // a draft tree by budgeted best-first search
	Chain    = "chain"    // γ draft tokens, accepted by min(1, p/q)
	Lookup   = "lookup"   // γ tokens from an n-gram match, no draft model
)

// ErrVocab marks a draft model whose vocabulary is not the target's.
var ErrVocab = errors.New("speculate: the draft's vocabulary differs from the target's")

// Options configure a Runner.
type Options struct {
	Mode     string
	Tree     spec.TreeOptions   // SpecExec
	DraftMax int                // Chain and Lookup: γ
	Lookup   spec.LookupOptions // Lookup (NumDraft is DraftMax)
	// MaxSeqs, Context and PageTokens size the draft's KV cache like the
	// target's (sched.Options).
	MaxSeqs, Context, PageTokens int
	// KVBudget bounds the draft's KV bytes in memory (0: none), spilling to
	// SpillDir as the target's cache does (sched.BudgetKV): the draft's
	// share of kv_budget (sluice.New splits it). A step then drafts for
	// the sessions, oldest first, whose draft pages fit its pass share; the
	// others decode without a draft that step.
	KVBudget int64
	SpillDir string
}

// DraftKV is the draft's KV cache for a draft model of arch a (no budget
// set), sized as the target's (sched.KVOptions): each sequence's context and
// draft headroom rounded up to whole pages.
func (o Options) DraftKV(a model.Arch) kvcache.Options {
	return sched.KVOptions(a, sched.Options{Context: o.Context, Headroom: o.draftRoom(), PageTokens: o.PageTokens, MaxSeqs: o.MaxSeqs})
}

// Rows is the most rows a draft adds to the target batch for one session.
func (o Options) Rows() int {
	if o.Mode == SpecExec {
		return o.Tree.Budget
	}
	return o.DraftMax
}

// draftRoom is the draft cache's KV slots per sequence past the context: a
// tree's expanded nodes all hold draft slots, including nodes the budget
// later pushed out, so growth stops before they would pass this.
func (o Options) draftRoom() int {
	if o.Mode == SpecExec {
		return o.Tree.Budget + o.Tree.MaxBeams + 1
	}
	return o.DraftMax + 1
}

// Depth is the most positions a draft reaches past its root.
func (o Options) Depth() int {
	if o.Mode == SpecExec {
		return o.Tree.MaxDepth
	}
	return o.DraftMax
}

// Validate checks o.
func (o *Options) Validate() error {
	switch o.Mode {
	case SpecExec:
		return o.Tree.Validate()
	case Chain, Lookup:
		if o.DraftMax < 1 {
			return fmt.Errorf("speculate: draft_max = %d, want ≥ 1", o.DraftMax)
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
	return fmt.Errorf("speculate: mode %q, want %q, %q or %q", o.Mode, SpecExec, Chain, Lookup)
}

// Stats count what speculation did.
type Stats struct {
	Rounds      int64 // target passes that verified a draft (one per session per step)
	Emitted     int64 // tokens those passes emitted that the sessions kept (not cut by a stop or the length)
	DraftNodes  int64 // draft rows put into target batches
	DraftPasses int64 // draft model forward passes
	MaxDepth    int   // deepest accepted path
	// KV is the draft cache's budget counters (zero without a budget).
	KV           kvcache.SpillStats
	DraftTime    time.Duration
	AcceptedRows int64 // draft rows kept
}

// TokensPerPass is the mean tokens one target pass emitted per session.
func (s Stats) TokensPerPass() float64 {
	if s.Rounds == 0 {
		return 0
	}
	return float64(s.Emitted) / float64(s.Rounds)
}

// Runner drafts and verifies for one engine. Draft and Verify are called by
// one stage each, for the one step in flight, so they never overlap.
type Runner struct {
	o     Options
	m     model.Model // nil for Lookup
	store offload.Store
	kv    *kvcache.Cache
	st    *model.State
	vocab int

	seqs map[*session.Session]*seqState
	next input.Batch // the rewritten target batch
	sc   sample.Scratch

	mu    sync.Mutex
	stats Stats
}

// seqState is one session's draft.
type seqState struct {
	seq     int32 // the draft cache's sequence: the session's KV id when it started
	fed     int32 // tokens of the session in the draft cache (linear history)
	tree    *spec.Tree
	slot    []int32 // draft KV slot per node id; -1 = not fed
	row     []int32 // target batch row per node id
	rootRow int32
	// chain
	chain []int32
	q     []sample.Dist
	open  bool // a draft tree is open in the draft cache
	// fedNodes counts this round's tree nodes fed to the draft (each holds
	// a draft slot, even once the budget pushes it out).
	fedNodes int
}

// New builds a runner over the draft model (nil for Lookup).
func New(draft *model.Loaded, o Options) (*Runner, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	r := &Runner{o: o, seqs: map[*session.Session]*seqState{}}
	if o.Mode == Lookup {
		return r, nil
	}
	if draft == nil {
		return nil, fmt.Errorf("speculate: %s needs a draft model ([draft] path, or --draft)", o.Mode)
	}
	a := draft.Model.Arch()
	ko := o.DraftKV(a)
	if o.KVBudget > 0 {
		if err := sched.BudgetKV(&ko, o.KVBudget, o.SpillDir, o.MaxSeqs); err != nil {
			return nil, fmt.Errorf("speculate: the draft's share of the KV budget: %w", err)
		}
	}
	kv, err := kvcache.New(ko)
	if err != nil {
		return nil, fmt.Errorf("speculate: draft KV cache: %w", err)
	}
	r.m, r.store, r.kv, r.vocab = draft.Model, draft.Store, kv, a.Vocab
	r.st = &model.State{Batch: &input.Batch{}}
	return r, nil
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

// Close releases the draft cache's budget (its spill file and ristretto);
// Stats still reports its final counters.
func (r *Runner) Close() error {
	if r.kv == nil {
		return nil
	}
	return r.kv.Close()
}

// Stats returns a snapshot.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	st := r.stats
	r.mu.Unlock()
	if r.kv != nil {
		st.KV = r.kv.Stats().Spill
	}
	return st
}

// drafts lists the spans of st that get a draft: a session generating (its
// one row is its last sampled token), while the step has room for its rows.
func (r *Runner) drafts(st *sched.Step) []int {
	var idx []int
	room := st.Room
	frames := -1 // under a budget: what the draft's pass may still pin per layer
	if r.kv != nil {
		frames = r.kv.MaxPassFrames()
	}
	for i, sp := range st.Spans {
		q := sp.S
		if sp.Len != 1 || q.Pending() != 1 || q.Req.AllLogits || room < r.o.Rows() {
			continue
		}
		// The draft's positions must fit the context; near its end decode
		// plainly. (Its KV slots may pass the context: the caches have
		// Rows() slots of headroom.)
		if q.Cached+1+r.o.Depth() > q.Context() {
			continue
		}
		// Under the draft's KV budget its pass pins one layer of every
		// drafted sequence's pages, up to the tree's slots past the root.
		if frames >= 0 {
			need := r.kv.PassNeed(q.Cached + 1 + r.o.draftRoom())
			if need > frames {
				continue
			}
			frames -= need
		}
		room -= r.o.Rows()
		idx = append(idx, i)
	}
	return idx
}

// forget drops the draft state of sessions that have finished.
func (r *Runner) forget() {
	for q, s := range r.seqs {
		if q.Done() {
			// By now the scheduler has released q.KV (it is -1): free the
			// draft sequence by the id it had.
			if r.kv != nil {
				r.kv.Free(s.seq)
			}
			delete(r.seqs, q)
		}
	}
}

func (r *Runner) state(q *session.Session) *seqState {
	s := r.seqs[q]
	if s == nil {
		s = &seqState{seq: q.KV}
		if r.o.Mode == SpecExec {
			s.tree, _ = spec.NewTree(0, r.o.Tree) // options validated in New
		}
		r.seqs[q] = s
		if r.kv != nil {
			r.kv.Free(q.KV) // a KV id reused from a finished session
		}
	}
	return s
}

// Draft grows the drafts of st's generating sessions and writes their nodes
// into st's batch, before the target's pass reserves its KV slots.
func (r *Runner) Draft(ctx context.Context, st *sched.Step) error {
	if st.Err != nil {
		return nil
	}
	r.forget()
	idx := r.drafts(st)
	if len(idx) == 0 {
		return nil
	}
	t0 := time.Now()
	var err error
	switch r.o.Mode {
	case SpecExec:
		err = r.growTrees(ctx, st, idx)
	case Chain:
		err = r.growChains(ctx, st, idx)
	case Lookup:
		r.lookupChains(st, idx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.Err = fmt.Errorf("speculate: draft: %w", err)
		return nil
	}
	r.mu.Lock()
	r.stats.DraftTime += time.Since(t0)
	r.mu.Unlock()
	r.rewrite(st, idx)
	return nil
}

// catchUp adds, for each drafted session, the tokens the draft has not seen
// (the accepted ones of the last round, then the root) as linear rows, the
// root's with logits.
func (r *Runner) catchUp(b *input.Batch, st *sched.Step, idx []int) {
	for _, i := range idx {
		q := st.Spans[i].S
		s := r.state(q)
		root := int32(q.Cached) // the root's position = its slot
		for p := s.fed; p <= root; p++ {
			b.Add(q.Tokens[p], p, q.KV, p == root)
		}
		s.fed = root + 1
	}
}

// forward runs the draft model over b and ends the pass; slots, when not
// nil, gets every row's KV slot.
func (r *Runner) forward(ctx context.Context, b *input.Batch, slots *[]int32) error {
	pass, err := r.kv.Begin(ctx, b)
	if err != nil {
		return err
	}
	st := r.st
	st.Batch, st.KV, st.Mask = b, pass, pass.Mask()
	err = func() error {
		if err := r.m.Embed(ctx, st, r.store); err != nil {
			return err
		}
		for _, blk := range r.m.Blocks() {
			if err := blk.Forward(ctx, st, r.store); err != nil {
				return err
			}
		}
		return r.m.Head(ctx, st, r.store)
	}()
	if err != nil {
		pass.Abort()
		return err
	}
	if slots != nil {
		*slots = append((*slots)[:0], pass.Slots()...)
	}
	r.mu.Lock()
	r.stats.DraftPasses++
	r.mu.Unlock()
	return pass.End()
}

// softmax is the draft's plain distribution over the children of a node
// (temperature 1, or the request's when it samples), which the tree search
// ranks by.
func softmax(logits []float32, temp float32, dst []float32) sample.Dist {
	if temp <= 0 {
		temp = 1
	}
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range logits {
		e := math.Exp(float64((v - mx) / temp))
		dst[i] = float32(e)
		sum += e
	}
	for i := range dst {
		dst[i] = float32(float64(dst[i]) / sum)
	}
	return sample.Dist{Probs: dst}
}

func (r *Runner) growTrees(ctx context.Context, st *sched.Step, idx []int) error {
	b := &input.Batch{}
	r.catchUp(b, st, idx)
	var slots []int32
	if err := r.forward(ctx, b, &slots); err != nil {
		return err
	}
	vocab := r.vocab
	probs := make([]float32, len(idx)*vocab)
	var dists []sample.Dist
	for k, i := range idx {
		q := st.Spans[i].S
		s := r.state(q)
		s.tree.Reset(q.Tokens[q.Cached])
		s.slot = append(s.slot[:0], int32(q.Cached)) // the root
		s.fedNodes = 0
		s.open = false
		if ids, err := s.tree.Expand(); err != nil || len(ids) != 1 || ids[0] != 0 {
			return fmt.Errorf("request %s: tree expansion of the root gave %v, %v", q.Req.ID, ids, err)
		}
		d := softmax(st0Logits(r.st, k, vocab), q.Sampler().Options().Temperature, probs[k*vocab:(k+1)*vocab])
		if err := s.tree.Add([]sample.Dist{d}); err != nil {
			return err
		}
	}
	for {
		b.Reset()
		type exp struct {
			s   *seqState
			q   *session.Session
			ids []int32
		}
		var round []exp
		for _, i := range idx {
			q := st.Spans[i].S
			s := r.seqs[q]
			// Stop growing before the expanded nodes' draft slots would
			// pass the cache (near the context's end; the tree is then
			// finished early).
			if q.Cached+1+s.fedNodes+r.o.Tree.MaxBeams > q.Context()+r.o.draftRoom() {
				continue
			}
			ids, err := s.tree.Expand()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				continue
			}
			s.fedNodes += len(ids)
			root := int32(q.Cached)
			for _, id := range ids {
				n := s.tree.Node(id)
				b.AddChild(n.Token, root+int32(n.Depth), q.KV, -1, s.slot[n.Parent], true)
			}
			round = append(round, exp{s, q, ids})
		}
		if len(round) == 0 {
			return nil
		}
		if err := r.forward(ctx, b, &slots); err != nil {
			return err
		}
		if need := b.Len() * vocab; cap(probs) < need {
			probs = make([]float32, need)
		}
		row := 0
		for _, e := range round {
			e.s.open = true
			dists = dists[:0]
			for _, id := range e.ids {
				for int(id) >= len(e.s.slot) {
					e.s.slot = append(e.s.slot, -1)
				}
				e.s.slot[id] = slots[row]
				dists = append(dists, softmax(st0Logits(r.st, row, vocab), e.q.Sampler().Options().Temperature, probs[row*vocab:(row+1)*vocab]))
				row++
			}
			if err := e.s.tree.Add(dists); err != nil {
				return err
			}
		}
	}
}

func st0Logits(st *model.State, j, vocab int) []float32 { return st.Logits[j*vocab : (j+1)*vocab] }

// growChains drafts γ tokens per session, one draft pass per token, each
// drawn from the draft's processed distribution with the draft stream.
func (r *Runner) growChains(ctx context.Context, st *sched.Step, idx []int) error {
	b := &input.Batch{}
	r.catchUp(b, st, idx)
	vocab := r.vocab
	for k := 0; k < r.o.DraftMax; k++ {
		if k > 0 {
			b.Reset()
			for _, i := range idx {
				q := st.Spans[i].S
				s := r.seqs[q]
				x := s.chain[len(s.chain)-1]
				b.Add(x, s.fed, q.KV, true)
				s.fed++
			}
		}
		if err := r.forward(ctx, b, nil); err != nil {
			return err
		}
		for j, i := range idx {
			q := st.Spans[i].S
			s := r.seqs[q]
			if k == 0 {
				s.chain, s.q = s.chain[:0], s.q[:0]
			}
			hist := append(slices.Clone(q.Tokens), s.chain...)
			d, err := q.Sampler().Dist(st0Logits(r.st, j, vocab), hist, &r.sc)
			if err != nil {
				return err
			}
			d = sample.Dist{IDs: slices.Clone(d.IDs), Probs: slices.Clone(d.Probs)}
			o := q.Sampler().Options()
			u := spec.KeyedUniforms(o.Seed, q.Req.Index, uint64(len(q.Tokens)))
			s.q = append(s.q, d)
			s.chain = append(s.chain, spec.Draw(d, u(k, spec.StreamDraft)))
		}
	}
	return nil
}

// lookupChains proposes up to γ tokens per session from an n-gram match over
// its prompt and output; a session with no match decodes plainly.
func (r *Runner) lookupChains(st *sched.Step, idx []int) {
	for _, i := range idx {
		q := st.Spans[i].S
		s := r.state(q)
		s.chain, _ = spec.PromptLookup(s.chain[:0], q.Tokens, r.o.Lookup)
		s.q = s.q[:0]
		for _, x := range s.chain {
			s.q = append(s.q, sample.Dist{IDs: []int32{x}, Probs: []float32{1}})
		}
	}
}

// rewrite rebuilds st's batch with the draft rows placed right after their
// session's root row, keeping every span contiguous.
func (r *Runner) rewrite(st *sched.Step, idx []int) {
	old := st.State.Batch
	nb := &r.next
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
		s := r.seqs[q]
		s.rootRow = start
		root := int32(q.Cached)
		switch r.o.Mode {
		case SpecExec:
			nodes, parents := s.tree.Order()
			for int(slices.Max(append(nodes, 0))) >= len(s.row) {
				s.row = append(s.row, -1)
			}
			s.row[0] = start
			for k, id := range nodes {
				n := s.tree.Node(id)
				parent := start
				if parents[k] >= 0 {
					parent = start + 1 + parents[k]
				}
				s.row[id] = int32(nb.AddChild(n.Token, root+int32(n.Depth), q.KV, parent, -1, true))
			}
			sp.Len += len(nodes)
			sp.NOut += len(nodes)
			added += len(nodes)
		default:
			for k, x := range s.chain {
				nb.AddChild(x, root+1+int32(k), q.KV, -1, -1, true)
			}
			sp.Len += len(s.chain)
			sp.NOut += len(s.chain)
			added += len(s.chain)
		}
	}
	// Swap the batches: the old one becomes the next rewrite's buffer.
	*old, *nb = *nb, *old
	st.Room -= added
	r.mu.Lock()
	r.stats.DraftNodes += int64(added)
	r.mu.Unlock()
}

// Verify checks the drafts against the target's logits and sets each drafted
// span's Keep and Accept.
func (r *Runner) Verify(st *sched.Step) error {
	if st.Err != nil {
		return nil
	}
	b := st.State.Batch
	vocab := len(st.State.Logits) / max(1, len(b.Outputs))
	for i := range st.Spans {
		sp := &st.Spans[i]
		q := sp.S
		s := r.seqs[q]
		if s == nil || sp.Len == 1 || sp.S.Pending() != 1 {
			continue // no draft this step: the scheduler samples as usual
		}
		logits := func(row int32) []float32 {
			j := sp.Out + int(row) - sp.Start // every row of a drafted span is an output
			return st.State.Logits[j*vocab : (j+1)*vocab]
		}
		var err error
		switch r.o.Mode {
		case SpecExec:
			err = r.verifyTree(sp, s, logits)
		default:
			err = r.verifyChain(sp, s, logits)
		}
		if err != nil {
			q.Fail(fmt.Errorf("speculate: request %s: %w", q.Req.ID, err))
			sp.Keep, sp.Accept = nil, nil
		}
	}
	return nil
}

func (r *Runner) verifyTree(sp *sched.Span, s *seqState, logits func(int32) []float32) error {
	q := sp.S
	hist := slices.Clone(q.Tokens)
	base := len(hist)
	path, emitted, err := s.tree.Verify(func(node int32) (int32, error) {
		hist = s.tree.Path(hist[:base], node)
		return q.Sample(logits(s.row[node]), hist)
	})
	if err != nil {
		return err
	}
	sp.Keep = append(sp.Keep[:0], int32(sp.Start))
	for _, id := range path {
		sp.Keep = append(sp.Keep, s.row[id])
	}
	sp.Accept = append(sp.Accept[:0], emitted...)
	// The draft keeps the accepted nodes it has K/V for (the expanded ones,
	// a prefix of the path); the rest it is fed next round.
	var keep []int32
	for _, id := range path {
		if int(id) >= len(s.slot) || s.slot[id] < 0 {
			break
		}
		keep = append(keep, s.slot[id])
	}
	if s.open {
		if err := r.kv.CommitPath(q.KV, keep); err != nil {
			return fmt.Errorf("draft cache: %w", err)
		}
	}
	s.fed = int32(q.Cached) + 1 + int32(len(keep))
	r.count(q.Keeps(emitted), len(path))
	return nil
}

func (r *Runner) verifyChain(sp *sched.Span, s *seqState, logits func(int32) []float32) error {
	q := sp.S
	hist := slices.Clone(q.Tokens)
	p := make([]sample.Dist, 0, len(s.chain)+1)
	for k := 0; k <= len(s.chain); k++ {
		d, err := q.Sampler().Dist(logits(int32(sp.Start+k)), hist, &r.sc)
		if err != nil {
			return err
		}
		p = append(p, sample.Dist{IDs: slices.Clone(d.IDs), Probs: slices.Clone(d.Probs)})
		if k < len(s.chain) {
			hist = append(hist, s.chain[k])
		}
	}
	o := q.Sampler().Options()
	var acc int
	var next int32
	var err error
	if o.Temperature == 0 {
		// Greedy: the target's own choice at each prefix (with its repetition
		// penalty), exactly plain decoding's; accept while the draft agrees.
		hist = hist[:len(q.Tokens)]
		for acc = 0; ; acc++ {
			if next, err = q.Sample(logits(int32(sp.Start+acc)), hist); err != nil {
				return err
			}
			if acc == len(s.chain) || next != s.chain[acc] {
				break
			}
			hist = append(hist, next)
		}
	} else {
		u := spec.KeyedUniforms(o.Seed, q.Req.Index, uint64(len(q.Tokens)))
		if acc, next, err = spec.VerifyChain(p, s.q, s.chain, u, nil); err != nil {
			return err
		}
	}
	sp.Keep = append(sp.Keep[:0], int32(sp.Start))
	for k := range acc {
		sp.Keep = append(sp.Keep, int32(sp.Start+1+k))
	}
	sp.Accept = append(append(sp.Accept[:0], s.chain[:acc]...), next)
	if r.kv != nil {
		// The draft was fed the root and the first γ-1 proposals.
		fedDraft := min(acc, len(s.chain)-1)
		if err := r.kv.Truncate(q.KV, int32(q.Cached)+1+int32(fedDraft)); err != nil {
			return fmt.Errorf("draft cache: %w", err)
		}
		s.fed = int32(q.Cached) + 1 + int32(fedDraft)
	}
	r.count(q.Keeps(sp.Accept), acc)
	return nil
}

func (r *Runner) count(emitted, accepted int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Rounds++
	r.stats.Emitted += int64(emitted)
	r.stats.AcceptedRows += int64(accepted)
	r.stats.MaxDepth = max(r.stats.MaxDepth, accepted)
}
