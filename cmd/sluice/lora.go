package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/modelfile"
	"github.com/sluicehq/sluice/pipelines"
)

// loraSpec is one adapter directory with its options.
type loraSpec struct {
	Dir  string
	Name string // the directory's base name
	Opt  model.AdapterOptions
}

// parseLoraSpec reads "DIR[:scale]". The scale multiplies the adapter's α/r;
// a suffix after the last colon that is not a number is part of the path.
func parseLoraSpec(s string) (loraSpec, error) {
	dir, scale := s, float32(0)
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if v, err := strconv.ParseFloat(s[i+1:], 32); err == nil {
			if math.IsNaN(v) || math.IsInf(v, 0) || v == 0 {
				return loraSpec{}, fmt.Errorf("%s: scale %s must be a finite non-zero number (leave a disabled adapter out)", s, s[i+1:])
			}
			dir, scale = s[:i], float32(v)
		}
	}
	if dir == "" {
		return loraSpec{}, fmt.Errorf("--lora %q: want DIR[:scale]", s)
	}
	return loraSpec{Dir: dir, Name: model.AdapterName(dir), Opt: model.AdapterOptions{Scale: scale}}, nil
}

// loraList is the repeatable --lora flag.
type loraList []loraSpec

func (l *loraList) String() string {
	var s []string
	for _, x := range *l {
		s = append(s, x.Dir)
	}
	return strings.Join(s, ",")
}

func (l *loraList) Set(v string) error {
	sp, err := parseLoraSpec(v)
	if err != nil {
		return err
	}
	*l = append(*l, sp)
	return nil
}

// loraFlags are --lora and --lora-permute-qk, for commands that serve adapters.
type loraFlags struct {
	list      loraList
	permuteQK *bool
}

func addLoraFlags(fs *flag.FlagSet, what string) *loraFlags {
	f := &loraFlags{}
	fs.Var(&f.list, "lora", "PEFT LoRA adapter directory DIR[:scale], served unmerged; repeatable ("+what+")")
	f.permuteQK = fs.Bool("lora-permute-qk", false, permuteQKHelp)
	return f
}

const permuteQKHelp = "permute the adapters' q_proj/k_proj rows as llama.cpp's HF→GGUF converter permuted the base Q/K " +
	"(set for GGUFs converted from Hugging Face models; never for llama2.c checkpoints or GGUFs made from them)"

// specs returns the adapters with the shared options applied.
func (f *loraFlags) specs() []loraSpec {
	out := make([]loraSpec, len(f.list))
	for i, s := range f.list {
		s.Opt.PermuteQK = *f.permuteQK
		out[i] = s
	}
	return out
}

// loraSet is a named group of adapters registered together: a request that
// names it gets the sum of their updates.
type loraSet struct {
	Name  string
	Specs []loraSpec
}

// oneSet groups every adapter under one name ("a+b"): generate applies all.
func oneSet(specs []loraSpec) []loraSet {
	if len(specs) == 0 {
		return nil
	}
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	return []loraSet{{Name: strings.Join(names, "+"), Specs: specs}}
}

// eachSet registers every adapter under its own name: run picks one per line.
func eachSet(specs []loraSpec) ([]loraSet, error) {
	var sets []loraSet
	seen := map[string]string{}
	for _, s := range specs {
		if prev, dup := seen[s.Name]; dup {
			return nil, fmt.Errorf("--lora %s and %s have the same name %q (the directory's base name): %w", prev, s.Dir, s.Name, errUsage)
		}
		seen[s.Name] = s.Dir
		sets = append(sets, loraSet{Name: s.Name, Specs: []loraSpec{s}})
	}
	return sets, nil
}

// loadAdapters reads, fits and registers adapter sets on l.
func loadAdapters(l *model.Loaded, sets []loraSet) error {
	if len(sets) == 0 {
		return nil
	}
	am, ok := l.Model.(model.Adaptable)
	if !ok {
		return fmt.Errorf("%s: the %s architecture cannot serve LoRA adapters", l.Source.Path, l.Model.Arch().Name)
	}
	for _, set := range sets {
		var ads []*lora.Adapter
		for _, s := range set.Specs {
			ad, err := model.LoadAdapter(s.Dir, l.Source, l.Model.Arch(), s.Opt)
			if err != nil {
				return err
			}
			ads = append(ads, ad)
		}
		if err := am.AddAdapter(set.Name, ads...); err != nil {
			return err
		}
	}
	return nil
}

// cmdLora is "sluice lora merge": write BASE with adapters merged into its
// weights, in BASE's format.
func cmdLora(ctx context.Context, e *env, args []string) error {
	fs := e.flags("lora")
	mf := addModelFlags(fs, "m")
	var adapters loraList
	fs.Var(&adapters, "adapter", "PEFT LoRA adapter directory DIR[:scale]; repeatable, merged in order")
	out := fs.String("o", "", "output model file (same format as the base)")
	scale := fs.Float64("scale", 1, "multiplies every adapter's α/r (times its own :scale)")
	permute := fs.Bool("permute-qk", false, permuteQKHelp)
	if len(args) == 0 || args[0] != "merge" {
		fs.Usage()
		if len(args) == 0 {
			return errUsage
		}
		if args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
			return flag.ErrHelp
		}
		return fmt.Errorf("lora: unknown subcommand %q (want merge): %w", args[0], errUsage)
	}
	pos, err := parse(fs, args[1:])
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return fmt.Errorf("lora merge: unexpected arguments %q: %w", pos, errUsage)
	case *out == "" || len(adapters) == 0:
		return fmt.Errorf("lora merge: -m, --adapter and -o are required: %w", errUsage)
	case math.IsNaN(*scale) || math.IsInf(*scale, 0) || *scale == 0:
		return fmt.Errorf("lora merge: --scale %v must be a finite non-zero number: %w", *scale, errUsage)
	}
	p := &pipelines.Pipeline{Source: "the command line"}
	mf.apply(p)
	l, err := loadModel(ctx, e, p)
	if err != nil {
		return err
	}
	defer l.Close()
	var ads []*lora.Adapter
	for _, s := range adapters {
		o := s.Opt
		if o.Scale == 0 {
			o.Scale = 1
		}
		o.Scale *= float32(*scale)
		o.PermuteQK = *permute
		ad, err := model.LoadAdapter(s.Dir, l.Source, l.Model.Arch(), o)
		if err != nil {
			return err
		}
		ads = append(ads, ad)
	}
	if err := modelfile.WriteMerged(ctx, l, *out, ads...); err != nil {
		return err
	}
	n := 0
	for _, ad := range ads {
		n += len(ad.Modules)
	}
	fmt.Fprintf(e.stdout, "merged %d adapter(s), %d module(s), into %s\n", len(ads), n, *out)
	return nil
}
