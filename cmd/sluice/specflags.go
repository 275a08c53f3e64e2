package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/pipelines"
)

// specFlags are the speculative-decoding and beam-search flags of generate,
// run and bench.
type specFlags struct {
	fs                                           *flag.FlagSet
	draft, draftTok, mode, budget                *string
	draftMax, maxBudget, depth, branch, maxBeams *int
	maxPasses                                    *int
	beams, numReturn                             *int
	lengthPenalty                                *float64
	earlyStopping                                *string
}

func addSpecFlags(fs *flag.FlagSet) *specFlags {
	return &specFlags{
		fs:            fs,
		draft:         fs.String("draft", "", "draft model for speculative decoding (same vocabulary as the model)"),
		draftTok:      fs.String("draft-tokenizer", "", "llama2.c tokenizer.bin of a .bin draft (default: --tokenizer)"),
		mode:          fs.String("spec", "", "speculative decoding: specexec (a draft tree; same text as plain decoding), chain (min(1,p/q)), lookup (n-gram, no draft model)"),
		draftMax:      fs.Int("draft-max", 5, "chain and lookup: draft tokens per step"),
		budget:        fs.String("budget", "64", "specexec: tree nodes per sequence per step, or auto: picked as it runs for the most tokens/s (the target pass's measured cost per row and the draft's acceptance), up to --max-budget"),
		maxBudget:     fs.Int("max-budget", 128, "specexec with --budget auto: the largest budget it may pick (the engine is sized for it)"),
		depth:         fs.Int("max-depth", 8, "specexec: deepest tree node"),
		branch:        fs.Int("branch", 8, "specexec: children per expanded node"),
		maxBeams:      fs.Int("max-beams", 16, "specexec: nodes expanded per draft pass"),
		maxPasses:     fs.Int("max-passes", 0, "specexec: draft passes per tree, the root's included (SpecExec's max_beam_len; 0: no cap)"),
		beams:         fs.Int("beams", 0, "beam search with K beams (Hugging Face generate num_beams semantics); 0: off"),
		numReturn:     fs.Int("num-return", 1, "beam search: sequences returned (≤ --beams)"),
		lengthPenalty: fs.Float64("length-penalty", 1, "beam search: score = Σ log p / length^F"),
		earlyStopping: fs.String("early-stopping", "false", "beam search: true, false (the heuristic) or never, as HF's early_stopping"),
	}
}

// beam returns the beam-search options the flags ask for (nil: none).
func (f *specFlags) beam() (*beamsearch.Options, error) {
	set := setFlags(f.fs)
	if *f.beams == 0 {
		for _, k := range []string{"num-return", "length-penalty", "early-stopping"} {
			if set[k] {
				return nil, fmt.Errorf("--%s needs --beams: %w", k, errUsage)
			}
		}
		return nil, nil
	}
	o := &beamsearch.Options{NumBeams: *f.beams, NumReturn: *f.numReturn, LengthPenalty: *f.lengthPenalty}
	switch *f.earlyStopping {
	case "false":
		o.EarlyStopping = beamsearch.EarlyStopHeuristic
	case "true":
		o.EarlyStopping = beamsearch.EarlyStopTrue
	case "never":
		o.EarlyStopping = beamsearch.EarlyStopNever
	default:
		return nil, fmt.Errorf("--early-stopping %q: want true, false or never: %w", *f.earlyStopping, errUsage)
	}
	if o.NumBeams < 1 || o.NumReturn < 1 || o.NumReturn > o.NumBeams {
		return nil, fmt.Errorf("--beams %d --num-return %d: want 1 ≤ num-return ≤ beams: %w", o.NumBeams, o.NumReturn, errUsage)
	}
	if *f.mode != "" {
		return nil, fmt.Errorf("--beams and --spec do not go together: %w", errUsage)
	}
	return o, nil
}

// noBeams refuses the beam-search flags on a command that does not run beam
// search (run, bench: their requests are built without them), rather than
// ignoring them.
func (f *specFlags) noBeams(cmd string) error {
	set := setFlags(f.fs)
	for _, k := range []string{"beams", "num-return", "length-penalty", "early-stopping"} {
		if set[k] {
			return fmt.Errorf("%s: --%s: beam search runs in generate only: %w", cmd, k, errUsage)
		}
	}
	return nil
}

// apply adds the draft_tree and verify stages (unless the pipeline has
// them) and the [draft] model, and for beam search room for a KV sequence
// per beam, as the flags say. Beam search needs no stage: it is a request
// strategy every pipeline has (decode.Beam).
func (f *specFlags) apply(p *pipelines.Pipeline) error {
	set := setFlags(f.fs)
	if *f.beams > 0 {
		if p.Scheduler() != nil && p.Scheduler().MaxInFlight < *f.beams {
			p.Scheduler().MaxInFlight = *f.beams // one KV sequence per beam
		}
	}
	if *f.draft != "" {
		d := pipelines.ModelSpec{Path: *f.draft, Tokenizer: *f.draftTok, Threads: p.Model.Threads}
		if d.Tokenizer == "" && !strings.HasSuffix(d.Path, ".gguf") {
			d.Tokenizer = p.Model.Tokenizer // a llama2.c draft of the same vocabulary
		}
		p.Draft = &d
	}
	if *f.mode == "" {
		for _, k := range []string{"budget", "max-budget", "max-depth", "branch", "max-beams", "max-passes", "draft-max"} {
			if set[k] {
				return fmt.Errorf("--%s needs --spec: %w", k, errUsage)
			}
		}
		return nil
	}
	budget, err := pipelines.ParseTreeBudget(*f.budget)
	if err != nil {
		return fmt.Errorf("--budget: %w: %w", err, errUsage)
	}
	if set["max-budget"] && budget != pipelines.AutoBudget {
		return fmt.Errorf("--max-budget goes with --budget auto: %w", errUsage)
	}
	dp := pipelines.DefaultDraftTreeParams()
	dp.Mode, dp.DraftMax, dp.Budget, dp.MaxBudget, dp.MaxDepth, dp.Branch, dp.MaxBeams = *f.mode, *f.draftMax, budget, *f.maxBudget, *f.depth, *f.branch, *f.maxBeams
	if set["max-passes"] {
		dp.MaxPasses = *f.maxPasses
	}
	if err := dp.Validate(); err != nil {
		return fmt.Errorf("--spec: %w: %w", err, errUsage)
	}
	if dp.Mode != "lookup" && (p.Draft == nil || p.Draft.Path == "") {
		return fmt.Errorf("--spec %s needs a draft model: --draft MODEL (or [draft] path in the pipeline): %w", dp.Mode, errUsage)
	}
	if s, ok := p.StageOfKind(pipelines.KindDraftTree); ok {
		s.Params = dp
		return nil
	}
	at := func(kind string) int {
		return slices.IndexFunc(p.Stages, func(s pipelines.StageSpec) bool { return s.Kind == kind })
	}
	sch, head := at(pipelines.KindScheduler), at(pipelines.KindHead)
	if sch < 0 || head < 0 {
		return fmt.Errorf("--spec: %s has no scheduler or head stage to put the draft around", p.Source)
	}
	p.Stages = slices.Insert(p.Stages, head+1, pipelines.StageSpec{ID: "verify", Kind: pipelines.KindVerify, Buffer: 1, Workers: 1})
	p.Stages = slices.Insert(p.Stages, sch+1, pipelines.StageSpec{ID: "draft", Kind: pipelines.KindDraftTree, Buffer: 1, Workers: 1, Params: dp})
	return nil
}
