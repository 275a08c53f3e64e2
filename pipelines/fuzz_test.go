package pipelines

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzPipelineTOML feeds arbitrary text to Parse. It must never panic; a
// failure must be *Error values naming the source, and a success must
// satisfy every rule the loader promises.
func FuzzPipelineTOML(f *testing.F) {
	for _, name := range Presets() {
		data, err := presetFS.ReadFile(name + ".toml")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.toml"))
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	f.Add(baseTOML)
	f.Add(strings.Replace(baseTOML, "top_k", "top_pp", 1))
	f.Add("name = \"x\"\nstage = [{id=\"a\", kind=\"tokenize\", params={add_bos=1}}]\n")
	f.Add("name = \"x\"\n[stage]\n[[stage.params]]\n")
	f.Add("[[stage]]\nparams = [1, {a = 2}]\nkind = \"sample\"\n[stage.params]\nseed = -9\n")
	f.Add("timeout = 1979-05-27T07:32:00Z\n[model]\ntier = [\"x\"]\n")
	f.Add("a = \"\"\"\n[[stage]]\n\"\"\"\n")
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Parse([]byte(src), "fuzz.toml")
		if err != nil {
			if p != nil {
				t.Fatal("Parse returned both a pipeline and an error")
			}
			errs := []error{err}
			if _, ok := err.(*Error); !ok {
				if j, ok := err.(interface{ Unwrap() []error }); ok {
					errs = j.Unwrap() // errors.Join of several *Error
				}
			}
			for _, e := range errs {
				pe, ok := e.(*Error)
				if !ok {
					t.Fatalf("error %T %v is not a *Error", e, e)
				}
				if !strings.HasPrefix(pe.Error(), "pipelines: fuzz.toml") || pe.Kind == nil {
					t.Fatalf("error %q lacks the source or a kind", pe)
				}
				if pe.Line < 0 || pe.Line > strings.Count(src, "\n")+1 {
					t.Fatalf("error %q: line %d outside the file", pe, pe.Line)
				}
			}
			return
		}
		if p.Name == "" || len(p.Stages) == 0 || p.Timeout < 0 {
			t.Fatalf("accepted pipeline with name %q, %d stages, timeout %v", p.Name, len(p.Stages), p.Timeout)
		}
		ids := map[string]bool{}
		for _, s := range p.Stages {
			if s.ID == "" || ids[s.ID] || s.Buffer < 1 || s.Workers < 1 {
				t.Fatalf("accepted bad stage %+v", s)
			}
			ids[s.ID] = true
			k, ok := Default.Lookup(s.Kind)
			if !ok || (k.NewParams == nil) != (s.Params == nil) {
				t.Fatalf("stage %q: kind %q, params %T", s.ID, s.Kind, s.Params)
			}
			if v, ok := s.Params.(interface{ Validate() error }); ok && v.Validate() != nil {
				t.Fatalf("stage %q: accepted invalid params: %v", s.ID, v.Validate())
			}
		}
		p.Describe(io.Discard)
	})
}
