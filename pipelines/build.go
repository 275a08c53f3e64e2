package pipelines

import (
	"context"
	"fmt"
	"runtime"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/stages"
)

// EngineOptions maps the pipeline's stage params onto the decode engine's
// options. The model's [model] table is the caller's to apply (it loads the model).
func (p *Pipeline) EngineOptions() decode.Options {
	o := decode.Options{AddBOS: true, Context: p.Model.Context, PageTokens: p.Model.PageTokens}
	for _, s := range p.Stages {
		switch ps := s.Params.(type) {
		case *TokenizeParams:
			o.AddBOS = ps.AddBOS
		case *SchedulerParams:
			o.MaxSeqs, o.PrefillChunk, o.MaxNewTokens, o.NoStop = ps.MaxInFlight, ps.PrefillChunk, ps.MaxNewTokens, !ps.StopAtEOS
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

// BuildOptions are the ends of the graph: where requests come from and where
// results go.
type BuildOptions struct {
	Engine   *decode.Engine
	Requests func(ctx context.Context, emit graph.Emit[decode.Request]) error
	Results  func(ctx context.Context, r stages.Result) error
	Logger   zerolog.Logger
}

// Build wires the pipeline's stages into a graph: tokenize → [scheduler →
// embed → layer × L → head → sample →(loop back)] → detokenize, with the
// decode loop bounded by the scheduler's max_in_flight.
func Build(p *Pipeline, o BuildOptions) (*graph.Graph, error) {
	e := o.Engine
	if e == nil || o.Requests == nil || o.Results == nil {
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
	seqs := graph.Then(st.ID, reqs, &stages.Tokenize{E: e}, append(opts(st), graph.Ordered())...)

	sched := stage(KindScheduler)
	loop := graph.NewLoop[*decode.Seq](g, "decode", e.Opt.MaxSeqs)
	steps := graph.Then(sched.ID, loop.Enter(seqs), &stages.Schedule{E: e}, opts(sched)...)

	st = stage(KindEmbed)
	steps = graph.Then(st.ID, steps, &stages.Embed{E: e}, opts(st)...)

	st = stage(KindTransformerLayers)
	lp := st.Params.(*TransformerLayersParams)
	blocks := e.Model.Blocks()
	per := blocksPerStage(lp.BlocksPerStage, len(blocks), e.Opt.MaxSeqs)
	for lo := 0; lo < len(blocks); lo += per {
		hi := min(lo+per, len(blocks))
		layer := &stages.Layers{E: e, Blocks: blocks[lo:hi]}
		if a := lp.PrefetchAhead; a > 0 && lo+a < len(blocks) {
			layer.Ahead = blocks[lo+a]
		}
		name := fmt.Sprintf("%s.%02d", st.ID, lo)
		if hi-lo > 1 {
			name = fmt.Sprintf("%s.%02d-%02d", st.ID, lo, hi-1)
		}
		steps = graph.Then(name, steps, layer, graph.Buffer(st.Buffer))
	}

	st = stage(KindHead)
	steps = graph.Then(st.ID, steps, &stages.Head{E: e}, opts(st)...)

	st = stage(KindSample)
	back := graph.Then(st.ID, steps, &stages.Sample{E: e}, graph.Buffer(st.Buffer))
	done, more := graph.Split("finished", back, (*decode.Seq).Done)
	loop.Return(more)
	out := loop.Exit(done)

	st = stage(KindDetokenize)
	res := graph.Then(st.ID, out, &stages.Detokenize{E: e}, opts(st)...)
	graph.Sink("results", res, o.Results)
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("pipelines: %s: %w", p.Source, err)
	}
	return g, nil
}

// blocksPerStage resolves the blocks_per_stage param: 0 spreads the blocks
// over as many stages as can actually run at once, min(in flight, cores).
func blocksPerStage(param, blocks, inFlight int) int {
	if param > 0 {
		return param
	}
	depth := max(1, min(inFlight, runtime.GOMAXPROCS(0), blocks))
	return (blocks + depth - 1) / depth
}
