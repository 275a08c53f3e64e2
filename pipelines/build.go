package pipelines

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
)

// SchedOptions maps the scheduler stage's params onto the scheduler's options.
// Context and PageTokens come from [model] (0 = the model's context).
func (p *Pipeline) SchedOptions() sched.Options {
	o := sched.Options{Context: p.Model.Context, PageTokens: p.Model.PageTokens, MaxSeqs: 1}
	if s, ok := p.StageOfKind(KindScheduler); ok {
		ps := s.Params.(*SchedulerParams)
		o.MaxSeqs, o.PrefillChunk, o.MaxBatchTokens = ps.MaxInFlight, ps.PrefillChunk, ps.MaxBatchTokens
	}
	return o
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
		}
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

// Build wires the pipeline's stages into a graph:
//
//	requests → tokenize → admit ⇢ (queue) ⇢ scheduler → embed → layers… → head → sample ─┐
//	                          loop: one step in flight ▲────────────────────────────────────┘
//	retired sessions → detokenize → results
//
// One Step circulates in the loop for the engine's lifetime; each turn is one
// forward pass of every active sequence. Finished sessions leave through the
// scheduler's retired side.
func Build(p *Pipeline, o BuildOptions) (*graph.Graph, error) {
	e := o.Env
	if e == nil || e.Sched == nil || o.Requests == nil || o.Results == nil {
		return nil, fmt.Errorf("pipelines: Build needs an engine, a request source and a result sink")
	}
	opts := func(s *Stage) []graph.NodeOption {
		return []graph.NodeOption{graph.Buffer(s.Buffer), graph.Workers(s.Workers)}
	}
	stage := func(kind string) *Stage {
		s, _ := p.StageOfKind(kind)
		return s
	}
	for _, k := range []string{KindTokenize, KindScheduler, KindEmbed, KindTransformerLayers, KindHead, KindSample, KindDetokenize} {
		if stage(k) == nil {
			return nil, fmt.Errorf("pipelines: %s: no %q stage", p.Source, k)
		}
	}
	g := graph.New(graph.Options{Name: p.Name, Logger: o.Logger})
	reqs := graph.Source(g, "requests", o.Requests)

	st := stage(KindTokenize)
	tp := st.Params.(*TokenizeParams)
	seqs := graph.Then(st.ID, reqs, &stages.Tokenize{E: e, AddBOS: tp.AddBOS}, append(opts(st), graph.Ordered())...)

	sch := stage(KindScheduler)
	first := graph.Then(sch.ID+".admit", seqs, &stages.Admit{E: e})
	loop := graph.NewLoop[*sched.Step](g, "decode", 1)
	steps := graph.Then(sch.ID, loop.Enter(first), &stages.Schedule{E: e})
	live, done := graph.Split("live", steps, func(s *sched.Step) bool { return !s.Done })
	graph.Sink("end", loop.Exit(done), func(context.Context, *sched.Step) error { return nil })

	st = stage(KindEmbed)
	live = graph.Then(st.ID, live, &stages.Embed{E: e}, graph.Buffer(st.Buffer))

	st = stage(KindTransformerLayers)
	lp := st.Params.(*TransformerLayersParams)
	blocks := e.Model.Blocks()
	per := lp.BlocksPerStage
	if per <= 0 {
		per = len(blocks)
	}
	for lo := 0; lo < len(blocks); lo += per {
		hi := min(lo+per, len(blocks))
		layer := &stages.Layers{E: e, Blocks: blocks[lo:hi]}
		if a := lp.PrefetchAhead; a > 0 && hi-1+a < len(blocks) && per == 1 {
			layer.Ahead = blocks[hi-1+a]
		}
		name := fmt.Sprintf("%s.%02d", st.ID, lo)
		if hi-lo > 1 {
			name = fmt.Sprintf("%s.%02d-%02d", st.ID, lo, hi-1)
		}
		live = graph.Then(name, live, layer, graph.Buffer(st.Buffer))
	}

	st = stage(KindHead)
	live = graph.Then(st.ID, live, &stages.Head{E: e}, graph.Buffer(st.Buffer))

	st = stage(KindSample)
	loop.Return(graph.Then(st.ID, live, &stages.Sample{E: e}, graph.Buffer(st.Buffer)))

	st = stage(KindDetokenize)
	retired := graph.Source(g, sch.ID+".retired", stages.Retired(e))
	res := graph.Then(st.ID, retired, &stages.Detokenize{E: e}, opts(st)...)
	graph.Sink("results", res, o.Results)
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w", p.Source, err)
	}
	return g, nil
}
