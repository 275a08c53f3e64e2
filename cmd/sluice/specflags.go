package main

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/pipelines"
)

// specFlags are the speculative-decoding flags of generate, run and bench.
type specFlags struct {
	fs                                        *flag.FlagSet
	draft, draftTok, mode                     *string
	draftMax, budget, depth, branch, maxBeams *int
}

func addSpecFlags(fs *flag.FlagSet) *specFlags {
	return &specFlags{
		fs:       fs,
		draft:    fs.String("draft", "", "draft model for speculative decoding (same vocabulary as the model)"),
		draftTok: fs.String("draft-tokenizer", "", "llama2.c tokenizer.bin of a .bin draft (default: --tokenizer)"),
		mode:     fs.String("spec", "", "speculative decoding: specexec (a draft tree; same text as plain decoding), chain (min(1,p/q)), lookup (n-gram, no draft model)"),
		draftMax: fs.Int("draft-max", 5, "chain and lookup: draft tokens per step"),
		budget:   fs.Int("budget", 64, "specexec: tree nodes per sequence per step"),
		depth:    fs.Int("max-depth", 8, "specexec: deepest tree node"),
		branch:   fs.Int("branch", 8, "specexec: children per expanded node"),
		maxBeams: fs.Int("max-beams", 16, "specexec: nodes expanded per draft pass"),
	}
}

// apply adds the draft_tree and verify stages (unless the pipeline has
// them) and the [draft] model, as the flags say.
func (f *specFlags) apply(p *pipelines.Pipeline) error {
	set := setFlags(f.fs)
	if *f.draft != "" {
		d := pipelines.ModelSpec{Path: *f.draft, Tokenizer: *f.draftTok, Threads: p.Model.Threads}
		if d.Tokenizer == "" && !strings.HasSuffix(d.Path, ".gguf") {
			d.Tokenizer = p.Model.Tokenizer // a llama2.c draft of the same vocabulary
		}
		p.Draft = &d
	}
	if *f.mode == "" {
		for _, k := range []string{"budget", "max-depth", "branch", "max-beams", "draft-max"} {
			if set[k] {
				return fmt.Errorf("--%s needs --spec: %w", k, errUsage)
			}
		}
		return nil
	}
	dp := pipelines.DefaultDraftTreeParams()
	dp.Mode, dp.DraftMax, dp.Budget, dp.MaxDepth, dp.Branch, dp.MaxBeams = *f.mode, *f.draftMax, *f.budget, *f.depth, *f.branch, *f.maxBeams
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
