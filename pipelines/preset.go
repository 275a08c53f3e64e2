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
