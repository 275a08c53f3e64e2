package pipelines

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// presetFS holds the pipelines shipped in the binary. A new preset is a new
// *.toml file in this directory; no code changes.
//
//go:embed *.toml
var presetFS embed.FS

// Presets lists the names of the embedded presets ("greedy", "sample").
func Presets() []string {
	entries, err := fs.ReadDir(presetFS, ".")
	if err != nil {
		return nil // cannot happen for an embed.FS root
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// Preset parses an embedded preset with the Default registry.
func Preset(name string) (*Pipeline, error) { return Default.Preset(name) }

// Preset parses the embedded preset name; its Source is "<preset name>".
func (r *Registry) Preset(name string) (*Pipeline, error) {
	if !slices.Contains(Presets(), name) {
		return nil, fmt.Errorf("pipelines: preset %q is not one of %s: %w", name, kindList(Presets()), ErrUnknownPreset)
	}
	data, err := presetFS.ReadFile(name + ".toml")
	if err != nil {
		return nil, fmt.Errorf("pipelines: preset %q: %w", name, err)
	}
	return r.Parse(data, "<preset "+name+">")
}

// Greedy is the greedy preset, for programs that drive the engine from Go and
// change a few params (Scheduler, Sampler) before starting it.
func Greedy() *Pipeline {
	p, err := Preset("greedy")
	if err != nil {
		panic(err) // the preset is embedded and tested
	}
	return p
}

// Scheduler is the scheduler stage's params (nil when there is none).
func (p *Pipeline) Scheduler() *SchedulerParams {
	if s, ok := p.StageOfKind(KindScheduler); ok {
		return s.Params.(*SchedulerParams)
	}
	return nil
}

// Sampler is the sample stage's params (nil when there is none).
func (p *Pipeline) Sampler() *SampleParams {
	if s, ok := p.StageOfKind(KindSample); ok {
		return s.Params.(*SampleParams)
	}
	return nil
}
