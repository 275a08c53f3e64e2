package pipelines

import (
	"context"
	"fmt"
	"reflect"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
)

// Built-in stage kinds.
const (
	KindTokenize          = "tokenize"
	KindScheduler         = "scheduler"
	KindEmbed             = "embed"
	KindTransformerLayers = "transformer_layers"
	KindHead              = "head"
	KindSample            = "sample"
	KindDetokenize        = "detokenize"
	KindDraftTree         = "draft_tree"
	KindVerify            = "verify"
	KindBeam              = "beam"
)

var (
	sessionType = reflect.TypeFor[*session.Session]()
	stepType    = reflect.TypeFor[*sched.Step]()
)

// Builtin returns a new registry holding the built-in kinds, which make the
// plain decoding chain
//
//	tokenize → scheduler ⟲ embed → transformer_layers → head → sample ⟳ → detokenize
//
// Default is one such registry; tests and embedders that add kinds should
// start from their own Builtin() so Default stays untouched.
func Builtin() *Registry {
	r := &Registry{}
	for _, k := range []Kind{
		{Name: KindTokenize, Doc: "text to token ids", Stateless: true,
			NewParams: func() any { return DefaultTokenizeParams() },
			In:        RequestType, Out: sessionType, Build: buildTokenize},
		{Name: KindScheduler, Doc: "continuous batching: one pass per step carries a row of every generating sequence plus prompt chunks, up to max_batch_tokens",
			Fusable:   true,
			NewParams: func() any { return DefaultSchedulerParams() },
			In:        sessionType, Out: stepType, Loop: LoopOpen, Build: buildScheduler},
		{Name: KindEmbed, Doc: "token ids to hidden states", Fusable: true,
			In: stepType, Out: stepType, Build: stepStage(func(e *stages.Env) graph.Stage[*sched.Step, *sched.Step] { return &stages.Embed{E: e} })},
		{Name: KindTransformerLayers, Doc: "transformer blocks, blocks_per_stage to a stage (auto: all in one), with weight prefetch",
			Fusable:   true,
			NewParams: func() any { return DefaultTransformerLayersParams() },
			In:        stepType, Out: stepType, Build: buildLayers},
		{Name: KindHead, Doc: "final norm and output projection to logits", Fusable: true,
			In: stepType, Out: stepType, Build: stepStage(func(e *stages.Env) graph.Stage[*sched.Step, *sched.Step] { return &stages.Head{E: e} })},
		{Name: KindSample, Doc: "picks the next token; feeds it back to the scheduler",
			Fusable:   true,
			NewParams: func() any { return DefaultSampleParams() },
			In:        stepType, Out: sessionType, Loop: LoopClose, Build: buildSample},
		{Name: KindDetokenize, Doc: "token ids to text",
			In: sessionType, Out: ResultType, Build: buildDetokenize},
		{Name: KindDraftTree, Doc: "speculative decoding: the step's strategy grows each generating sequence's draft (SpecExec tree, chain or prompt lookup) into the batch before the pass; before embed",
			Fusable:   true,
			NewParams: func() any { return DefaultDraftTreeParams() },
			Needs:     func(p any) decode.Needs { return p.(*DraftTreeParams).Options().Needs() },
			In:        stepType, Out: stepType, Build: buildDraftTree},
		{Name: KindVerify, Doc: "speculative decoding: marks where the drafts are verified against the target's logits (the draft_tree strategy settles them); after head", Fusable: true,
			In: stepType, Out: stepType, Build: buildVerify},
		{Name: KindBeam, Doc: "beam search, which every pipeline runs for the requests that ask for it (num_beams); accepted for files that name it, and adds nothing",
			Fusable: true,
			In:      stepType, Out: stepType, Build: passThrough},
	} {
		r.MustRegister(k)
	}
	return r
}

// paramsOf is the stage's params as the kind's own type.
func paramsOf[P any](b *BuildContext) (*P, error) {
	p, ok := b.Stage.Params.(*P)
	if !ok || p == nil {
		return nil, fmt.Errorf("params are %T, want *%v", b.Stage.Params, reflect.TypeFor[P]())
	}
	return p, nil
}

func buildTokenize(b *BuildContext) (graph.AnyPort, error) {
	tp, err := paramsOf[TokenizeParams](b)
	if err != nil {
		return graph.AnyPort{}, err
	}
	s := graph.Erase[session.Request, *session.Session](&stages.Tokenize{E: b.Env, AddBOS: tp.AddBOS})
	return graph.ThenAny(b.Stage.ID, b.In, s, append(b.Options(), graph.Ordered())...)
}

// buildScheduler opens the decode loop: admission, the loop's entry, the
// step planner, and the loop's exit for the last (Done) step. The sessions
// it retires leave the loop through its retired side. With fuse = true the
// planner runs on the loop entry's goroutine and the live/done split on the
// planner's; admission keeps its own (it waits for room in the scheduler).
func buildScheduler(b *BuildContext) (graph.AnyPort, error) {
	seqs, err := graph.PortOf[*session.Session](b.In)
	if err != nil {
		return graph.AnyPort{}, err
	}
	e, id := b.Env, b.Stage.ID
	var fuse []graph.NodeOption
	if b.Stage.Fuse {
		fuse = append(fuse, graph.Fused())
	}
	first := graph.Then(id+".admit", seqs, &stages.Admit{E: e})
	loop := graph.NewLoop[*sched.Step](b.Graph, "decode", 1)
	steps := graph.Then(id, loop.Enter(first), &stages.Schedule{E: e}, fuse...)
	live, done := graph.Split("live", steps, func(s *sched.Step) bool { return !s.Done }, fuse...)
	graph.Sink("end", loop.Exit(done), func(context.Context, *sched.Step) error { return nil })
	err = b.OpenLoop(loop, func() graph.AnyPort {
		return graph.Source(b.Graph, id+".retired", stages.Retired(e)).Any()
	})
	return live.Any(), err
}

// stepStage builds a one-node kind inside the loop.
func stepStage(mk func(*stages.Env) graph.Stage[*sched.Step, *sched.Step]) func(*BuildContext) (graph.AnyPort, error) {
	return func(b *BuildContext) (graph.AnyPort, error) {
		return graph.ThenAny(b.Stage.ID, b.In, graph.Erase(mk(b.Env)), b.Options()...)
	}
}

// buildLayers expands into one stage per blocks_per_stage blocks (the
// number of blocks comes from the model), named id.lo or id.lo-hi.
func buildLayers(b *BuildContext) (graph.AnyPort, error) {
	lp, err := paramsOf[TransformerLayersParams](b)
	if err != nil {
		return graph.AnyPort{}, err
	}
	live, err := graph.PortOf[*sched.Step](b.In)
	if err != nil {
		return graph.AnyPort{}, err
	}
	blocks := b.Env.Model.Blocks()
	per := lp.BlocksPerStage
	if per <= 0 {
		per = len(blocks)
	}
	for lo := 0; lo < len(blocks); lo += per {
		hi := min(lo+per, len(blocks))
		layer := &stages.Blocks{E: b.Env, Blocks: blocks[lo:hi], All: blocks, Ahead: lp.PrefetchAhead}
		name := fmt.Sprintf("%s.%02d", b.Stage.ID, lo)
		if hi-lo > 1 {
			name = fmt.Sprintf("%s.%02d-%02d", b.Stage.ID, lo, hi-1)
		}
		live = graph.Then(name, live, layer, b.Options()...)
	}
	return live.Any(), nil
}

// buildSample closes the decode loop: the step goes back to the scheduler,
// and what follows reads the sessions it retires.
func buildSample(b *BuildContext) (graph.AnyPort, error) {
	in, err := graph.PortOf[*sched.Step](b.In)
	if err != nil {
		return graph.AnyPort{}, err
	}
	return b.CloseLoop(graph.Then(b.Stage.ID, in, &stages.Settle{E: b.Env}, b.Options()...))
}

func buildDetokenize(b *BuildContext) (graph.AnyPort, error) {
	s := graph.Erase[*session.Session, stages.Result](&stages.Detokenize{E: b.Env})
	return graph.ThenAny(b.Stage.ID, b.In, s, b.Options()...)
}

// buildDraftTree makes speculative decoding the engine's strategy, over the
// engine's draft model. It adds no node: the strategy runs inside the step
// (decode.Loop).
func buildDraftTree(b *BuildContext) (graph.AnyPort, error) {
	dp, err := paramsOf[DraftTreeParams](b)
	if err != nil {
		return graph.AnyPort{}, err
	}
	so := b.Env.Sched.Options()
	o := dp.Options()
	o.MaxSeqs, o.Context, o.PageTokens = so.MaxSeqs, so.Context, so.PageTokens
	o.KVBudget, o.SpillDir = b.Env.DraftKVBudget, so.SpillDir
	if d := b.Env.Draft; d != nil {
		o.PrefixCache, o.DraftID = so.PrefixCache, d.Source.Path
	}
	s, err := decode.NewSpeculative(b.Env.Draft, b.Env.Sched.Cache, o)
	if err != nil {
		return graph.AnyPort{}, err
	}
	b.Env.Loop.SetEngine(s)
	return b.In, nil
}

// buildVerify checks that a draft_tree stage made the strategy whose
// verification this stage marks; it adds no node.
func buildVerify(b *BuildContext) (graph.AnyPort, error) {
	if _, ok := b.Env.Loop.Engine().(*decode.Speculative); !ok {
		return graph.AnyPort{}, fmt.Errorf("verify needs a draft_tree stage before it")
	}
	return b.In, nil
}

// passThrough adds no node.
func passThrough(b *BuildContext) (graph.AnyPort, error) { return b.In, nil }
