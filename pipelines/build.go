package pipelines

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
)

// SchedOptions maps the scheduler stage's params onto the scheduler's options.
// Context and PageTokens come from [model] (0 = the model's context), the
// KV budget from [cache].
func (p *Pipeline) SchedOptions() sched.Options {
	o := sched.Options{Context: p.Model.Context, PageTokens: p.Model.PageTokens, MaxSeqs: 1,
		KVBudget: p.Cache.KVBudget, SpillDir: p.Cache.SpillDir, KVType: p.Cache.KVDType(),
		PrefixCache: !p.Cache.NoPrefixCache, PrefixCacheBytes: p.Cache.PrefixCacheSize, ModelID: p.Model.Path}
	if s, ok := p.StageOfKind(KindScheduler); ok {
		ps := s.Params.(*SchedulerParams)
		o.MaxSeqs, o.PrefillChunk, o.MaxBatchTokens = ps.MaxInFlight, ps.PrefillChunk, ps.MaxBatchTokens
	}
	return o
}

// Needs is what the pipeline's decoding strategies ask of the engine
// before it sizes itself: the most draft rows one sequence adds to a step,
// and a draft model's KV cache (the kinds' Kind.Needs).
func (p *Pipeline) Needs() decode.Needs {
	var n decode.Needs
	reg := p.Registry()
	for _, s := range p.Stages {
		k, ok := reg.Lookup(s.Kind)
		if !ok || k.Needs == nil {
			continue
		}
		kn := k.Needs(s.Params)
		n.Rows, n.Reach = max(n.Rows, kn.Rows), max(n.Reach, kn.Reach)
		if kn.DraftKV != nil {
			n.DraftKV = kn.DraftKV
		}
	}
	return n
}

// AddBOS is the tokenize stage's add_bos (true when there is none).
func (p *Pipeline) AddBOS() bool {
	if s, ok := p.StageOfKind(KindTokenize); ok {
		return s.Params.(*TokenizeParams).AddBOS
	}
	return true
}

// SessionOptions maps the tokenize, scheduler and sample params onto the
// per-request defaults. Context is the caller's to fill (it knows the model).
func (p *Pipeline) SessionOptions() session.Options {
	o := session.Options{AddBOS: true, Timeout: p.Timeout}
	for _, s := range p.Stages {
		switch ps := s.Params.(type) {
		case *TokenizeParams:
			o.AddBOS = ps.AddBOS
		case *SchedulerParams:
			o.MaxNewTokens, o.NoStop = ps.MaxNewTokens, !ps.StopAtEOS
		case *SampleParams:
			o.Sampling = ps.Options()
			o.Grammar = ps.Constraint()
			o.NoJumpForward = ps.NoJumpForward
		}
		o.Speculative = o.Speculative || s.Kind == KindDraftTree
	}
	return o
}

// Options converts the TOML params to the sampler's. A missing seed is 0; the
// CLI picks and logs one before building.
func (ps *SampleParams) Options() sample.Options {
	o := sample.Options{
		Temperature: float32(ps.Temperature), TopK: ps.TopK, TopP: float32(ps.TopP), MinP: float32(ps.MinP),
		RepeatPenalty: float32(ps.RepeatPenalty), RepeatLastN: ps.RepeatLastN,
	}
	if ps.Seed != nil {
		o.Seed = *ps.Seed
	}
	return o
}

// BuildOptions are the engine's parts and the ends of the graph: where
// requests come from and where results go.
type BuildOptions struct {
	Env      *stages.Env
	Requests func(ctx context.Context, emit graph.Emit[session.Request]) error
	Results  func(ctx context.Context, r stages.Result) error
	Logger   zerolog.Logger
}

// Build wires the pipeline's stages into a graph with the registry that
// parsed the pipeline: a source of requests, each stage's nodes as its kind
// builds them, and a sink of results. For the built-in kinds:
//
//	requests → tokenize → admit ⇢ (queue) ⇢ scheduler → embed → layers… → head → sample ─┐
//	                          loop: one step in flight ▲────────────────────────────────────┘
//	retired sessions → detokenize → results
//
// One Step circulates in the loop for the engine's lifetime; each turn is one
// forward pass of every active sequence. Finished sessions leave through the
// scheduler's retired side. The stages are checked as Parse checks them, so a
// pipeline edited in Go after parsing fails here, before anything runs.
func Build(p *Pipeline, o BuildOptions) (*graph.Graph, error) {
	if o.Env == nil || o.Env.Sched == nil || o.Requests == nil || o.Results == nil {
		return nil, fmt.Errorf("pipelines: Build needs an engine, a request source and a result sink")
	}
	reg := p.Registry()
	if errs := reg.wiring(p.Stages); len(errs) > 0 {
		l := &loader{source: p.Source}
		for _, e := range errs {
			l.add(e)
		}
		return nil, l.err()
	}
	g := graph.New(graph.Options{Name: p.Name, Logger: o.Logger})
	b := &BuildContext{Graph: g, Env: o.Env, Logger: o.Logger, In: graph.Source(g, "requests", o.Requests).Any()}
	for i := range p.Stages {
		s := &p.Stages[i]
		k, _ := reg.Lookup(s.Kind)
		b.Stage = s
		out, err := k.Build(b)
		at := fmt.Sprintf("pipelines: %s: stage %q (kind %q)", p.Source, s.ID, s.Kind)
		switch {
		case err != nil:
			return nil, fmt.Errorf("%s: %w", at, err)
		case out.Type() != k.Out:
			return nil, fmt.Errorf("%s: Build returned a port of %v; the kind declares %v", at, out.Type(), k.Out)
		case k.Loop == LoopOpen && b.loop == nil:
			return nil, fmt.Errorf("%s: the kind opens the decode loop, but its Build did not call OpenLoop", at)
		case k.Loop == LoopClose && b.Loop() != nil:
			return nil, fmt.Errorf("%s: the kind closes the decode loop, but its Build did not call CloseLoop", at)
		}
		b.In = out
	}
	res, err := graph.PortOf[stages.Result](b.In)
	if err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w", p.Source, err)
	}
	graph.Sink("results", res, o.Results)
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w", p.Source, err)
	}
	return g, nil
}
