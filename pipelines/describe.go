package pipelines

import (
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/sluicehq/sluice/offload"
)

// Describe prints what the pipeline would build: its settings, the model
// options with their defaults spelled out, and each stage with its buffer,
// workers, fuse and every params value (defaults included), its ports and its part
// in the decode loop, then what opens and closes the loop. `sluice validate`
// prints this. Kinds come from the registry that parsed the pipeline.
func (p *Pipeline) Describe(w io.Writer) {
	fmt.Fprintf(w, "pipeline %q from %s\n", p.Name, p.Source)
	if p.Description != "" {
		fmt.Fprintf(w, "  %s\n", p.Description)
	}
	if p.Timeout > 0 {
		fmt.Fprintf(w, "timeout: %s per request\n", p.Timeout)
	} else {
		fmt.Fprintln(w, "timeout: none")
	}

	m := p.Model
	fmt.Fprintln(w, "model:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  path\t%s\n", orDefault(m.Path, "(not set: give one on the command line)"))
	fmt.Fprintf(tw, "  tokenizer\t%s\n", orDefault(m.Tokenizer, "(not set: from the model file)"))
	if m.TokenizerPre != "" {
		fmt.Fprintf(tw, "  tokenizer_pre\t%s\n", m.TokenizerPre)
	}
	fmt.Fprintf(tw, "  tier\t%s\n", orDefault(m.Tier, TierAuto+" (default)"))
	if m.MemBudget > 0 {
		fmt.Fprintf(tw, "  mem_budget\t%s\n", offload.FormatBytes(m.MemBudget))
	}
	fmt.Fprintf(tw, "  threads\t%s\n", intOrDefault(m.Threads, "GOMAXPROCS"))
	fmt.Fprintf(tw, "  context\t%s\n", intOrDefault(m.Context, "the model's context length"))
	fmt.Fprintf(tw, "  page_tokens\t%s\n", intOrDefault(m.PageTokens, "the KV cache's default"))
	tw.Flush()
	fmt.Fprintln(w, "cache:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  kv_type\t%s\n", p.Cache.KVDType())
	fmt.Fprintf(tw, "  prefix_cache\t%v\n", !p.Cache.NoPrefixCache)
	if c := p.Cache; !c.NoPrefixCache && c.PrefixCacheSize > 0 {
		fmt.Fprintf(tw, "  prefix_cache_size\t%s\n", offload.FormatBytes(c.PrefixCacheSize))
	}
	if c := p.Cache; c.KVBudget > 0 {
		fmt.Fprintf(tw, "  kv_budget\t%s\n", offload.FormatBytes(c.KVBudget))
		fmt.Fprintf(tw, "  spill_dir\t%s\n", orDefault(c.SpillDir, "the system's temp directory"))
	}
	tw.Flush()

	reg := p.Registry()
	fmt.Fprintf(w, "stages (%v → %v):\n", RequestType, ResultType)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tid\tkind\tin → out\tloop\tbuffer\tworkers\tfuse\tparams")
	var opener, closer *StageSpec
	var inside []string
	for i := range p.Stages {
		s := &p.Stages[i]
		ports, loop := "?", "-"
		if k, ok := reg.Lookup(s.Kind); ok {
			ports = fmt.Sprintf("%v → %v", k.In, k.Out)
			switch {
			case k.Loop == LoopOpen && opener == nil:
				opener, loop = s, "opens"
			case k.Loop == LoopClose && opener != nil && closer == nil:
				closer, loop = s, "closes"
			case opener != nil && closer == nil:
				inside, loop = append(inside, s.ID), "inside"
			}
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%d\t%v\t%s\n", i+1, s.ID, s.Kind, ports, loop, s.Buffer, s.Workers, s.Fuse, formatParams(s.Params))
	}
	tw.Flush()
	for _, s := range p.Stages {
		if k, ok := reg.Lookup(s.Kind); ok && k.Doc != "" {
			fmt.Fprintf(w, "  %s: %s\n", s.ID, k.Doc)
		}
	}
	if opener != nil && closer != nil {
		fmt.Fprintf(w, "decode loop: %s opens it; %s closes it and feeds each step back to %s", opener.ID, closer.ID, opener.ID)
		if len(inside) > 0 {
			fmt.Fprintf(w, "; %s run inside it, once per step", strings.Join(inside, ", "))
		}
		fmt.Fprintln(w)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func intOrDefault(n int, def string) string {
	if n == 0 {
		return def
	}
	return fmt.Sprint(n)
}

// formatParams renders a params struct as "key=value ..." in field order,
// using the toml keys; a nil pointer field prints as "unset", an empty
// omitempty field (an optional constraint) not at all.
func formatParams(params any) string {
	if params == nil {
		return "-"
	}
	v := reflect.ValueOf(params)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "-"
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return fmt.Sprint(params)
	}
	var parts []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" || opts == "omitempty" && v.Field(i).IsZero() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		val := "unset"
		if fv.Kind() == reflect.Pointer {
			if !fv.IsNil() {
				val = fmt.Sprint(fv.Elem().Interface())
			}
		} else {
			val = fmt.Sprint(fv.Interface())
		}
		parts = append(parts, name+"="+val)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
