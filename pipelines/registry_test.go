package pipelines

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/graph"
)

// beamParams is a params type for a test-only kind.
type beamParams struct {
	Beams  int `toml:"beams"`
	Return int `toml:"return"`
}

// Validate reports every bad field, joined, to check that the loader gives
// each its own line.
func (p *beamParams) Validate() error {
	return errors.Join(atLeast("beams", p.Beams, 1), atLeast("return", p.Return, 1))
}

// noBuild is the builder of test kinds that are parsed, never built.
func noBuild(*BuildContext) (graph.AnyPort, error) { return graph.AnyPort{}, errors.ErrUnsupported }

// beamRegistry adds a kind that can stand in for sample: it closes the loop.
func beamRegistry(t *testing.T) *Registry {
	t.Helper()
	r := Builtin()
	if err := r.Register(Kind{Name: "beam_close", Doc: "beam search", NewParams: func() any { return &beamParams{Beams: 4, Return: 1} },
		In: stepType, Out: sessionType, Loop: LoopClose, Build: noBuild}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryRegister(t *testing.T) {
	step := func(k Kind) Kind {
		k.In, k.Out, k.Build = stepType, stepType, noBuild
		return k
	}
	tests := []struct {
		name string
		kind Kind
		want error
	}{
		{"duplicate", step(Kind{Name: KindSample}), ErrDuplicateKind},
		{"empty name", step(Kind{Name: ""}), ErrInvalid},
		{"not lower_snake", step(Kind{Name: "DraftTree"}), ErrInvalid},
		{"params not a pointer", step(Kind{Name: "x", NewParams: func() any { return beamParams{} }}), ErrInvalid},
		{"params nil", step(Kind{Name: "x", NewParams: func() any { return nil }}), ErrInvalid},
		{"no ports", Kind{Name: "x", Build: noBuild}, ErrInvalid},
		{"no builder", Kind{Name: "x", In: stepType, Out: stepType}, ErrInvalid},
		{"bad loop role", step(Kind{Name: "x", Loop: 7}), ErrInvalid},
		{"new kind", step(Kind{Name: "beam_search"}), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Builtin()
			err := r.Register(tc.kind)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Register(%q) = %v, want %v", tc.kind.Name, err, tc.want)
			}
			if err == nil {
				if _, ok := r.Lookup(tc.kind.Name); !ok {
					t.Errorf("Lookup(%q) after Register: not found", tc.kind.Name)
				}
				if _, ok := Default.Lookup(tc.kind.Name); ok {
					t.Errorf("registering into Builtin() changed Default")
				}
			}
		})
	}
}

func TestRegistryZeroValue(t *testing.T) {
	var r Registry
	for _, k := range []Kind{
		{Name: "open", In: RequestType, Out: stepType, Loop: LoopOpen, Build: noBuild},
		{Name: "close", In: stepType, Out: ResultType, Loop: LoopClose, Build: noBuild},
	} {
		if err := r.Register(k); err != nil {
			t.Fatal(err)
		}
	}
	p, err := r.Parse([]byte("name = \"z\"\n[[stage]]\nid = \"o\"\nkind = \"open\"\n[[stage]]\nid = \"c\"\nkind = \"close\"\n"), "z.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Registry() != &r || len(p.Stages) != 2 || p.Stages[0].Params != nil {
		t.Errorf("Parse = %+v", p)
	}
	if diff := cmp.Diff([]string{"open", "close"}, r.Kinds()); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
}

func TestBuiltinKinds(t *testing.T) {
	want := []string{"tokenize session.Request → *session.Session none",
		"scheduler *session.Session → *sched.Step opens the loop",
		"embed *sched.Step → *sched.Step none",
		"transformer_layers *sched.Step → *sched.Step none",
		"head *sched.Step → *sched.Step none",
		"sample *sched.Step → *session.Session closes the loop",
		"detokenize *session.Session → stages.Result none",
		"draft_tree *sched.Step → *sched.Step none",
		"verify *sched.Step → *sched.Step none",
		"beam *sched.Step → *sched.Step none"}
	var got []string
	for _, n := range Builtin().Kinds() {
		k, _ := Default.Lookup(n)
		got = append(got, fmt.Sprintf("%s %v → %v %v", n, k.In, k.Out, k.Loop))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
}

func TestNewKind(t *testing.T) {
	r := beamRegistry(t)
	src := edit(t, "kind = \"sample\"\n  [stage.params]\n  top_k = 10", "kind = \"beam_close\"\n  [stage.params]\n  beams = 8")
	p, err := r.Parse([]byte(src), "beam.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Registry() != r {
		t.Error("the pipeline does not remember its registry")
	}
	if diff := cmp.Diff(&beamParams{Beams: 8, Return: 1}, p.Stages[5].Params); diff != "" {
		t.Errorf("beam params (-want +got):\n%s", diff)
	}
	// The same file is an unknown kind for Default.
	if _, err := Parse([]byte(src), "beam.toml"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("Default.Parse = %v, want ErrUnknownKind", err)
	}
	// The built-in chain still works in the extended registry.
	if _, err := r.Parse([]byte(baseTOML), "base.toml"); err != nil {
		t.Errorf("base with beam registry: %v", err)
	}
}

func TestNewKindErrors(t *testing.T) {
	r := beamRegistry(t)
	t.Run("both sample and beam", func(t *testing.T) {
		src := edit(t, "[[stage]]\nid   = \"detok\"", "[[stage]]\nid = \"b\"\nkind = \"beam_close\"\n\n[[stage]]\nid   = \"detok\"")
		_, err := r.Parse([]byte(src), "t.toml")
		if !errors.Is(err, ErrStageOrder) {
			t.Fatalf("err = %v, want ErrStageOrder", err)
		}
		want := `pipelines: t.toml:29: stage "b": kind "beam_close" takes *sched.Step, but the stage before it, "samp" (kind "sample", line 23), gives *session.Session; kinds that take *session.Session: "scheduler", "detokenize"` + "\n" +
			`pipelines: t.toml:29: stage "b": kind "beam_close" closes the decode loop, but stage "samp" (kind "sample", line 23) closed it already; a pipeline has one loop`
		if diff := cmp.Diff(want, err.Error()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("joined validate errors each get a line", func(t *testing.T) {
		src := edit(t, "kind = \"sample\"\n  [stage.params]\n  top_k = 10", "kind = \"beam_close\"\n  [stage.params]\n  beams = 0\n  return = -1")
		_, err := r.Parse([]byte(src), "t.toml")
		want := "pipelines: t.toml:27: stage \"samp\": beams: 0 is less than 1\n" +
			"pipelines: t.toml:28: stage \"samp\": return: -1 is less than 1"
		if err == nil || err.Error() != want {
			t.Errorf("err = %v\nwant %s", err, want)
		}
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Key != "beams" {
			t.Errorf("the *ParamError is not reachable: %v", pe)
		}
	})
}

// A kind that is both stateless and fusable may take workers or fuse, not both.
func TestFuseWithWorkers(t *testing.T) {
	r := Builtin()
	if err := r.Register(Kind{Name: "relay", Stateless: true, Fusable: true, In: stepType, Out: stepType, Build: noBuild}); err != nil {
		t.Fatal(err)
	}
	src := edit(t, "[[stage]]\nid   = \"head\"", "[[stage]]\nid = \"r\"\nkind = \"relay\"\nworkers = 2\nfuse = true\n\n[[stage]]\nid   = \"head\"")
	_, err := r.Parse([]byte(src), "t.toml")
	want := `pipelines: t.toml:23: stage "r": fuse = true runs the stage on the goroutine of the stage before it, so it takes one worker, not workers = 2`
	if !errors.Is(err, ErrInvalid) || err.Error() != want {
		t.Errorf("err = %v\nwant %s", err, want)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		name string
		err  Error
		want string
	}{
		{"file only", Error{Source: "a.toml", Msg: "m"}, "pipelines: a.toml: m"},
		{"line", Error{Source: "a.toml", Line: 3, Msg: "m"}, "pipelines: a.toml:3: m"},
		{"line and col", Error{Source: "a.toml", Line: 3, Col: 9, Msg: "m"}, "pipelines: a.toml:3:9: m"},
		{"col without line is dropped", Error{Source: "a.toml", Col: 9, Msg: "m"}, "pipelines: a.toml: m"},
		{"stage", Error{Source: "a.toml", Line: 3, Stage: "s", Msg: "m"}, `pipelines: a.toml:3: stage "s": m`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Errorf("Error() = %q, want %q", got, tc.want)
			}
		})
	}
	e := &Error{Kind: ErrInvalid, Cause: errors.ErrUnsupported}
	if !errors.Is(e, ErrInvalid) || !errors.Is(e, errors.ErrUnsupported) {
		t.Error("Unwrap does not expose both the kind and the cause")
	}
	if got := (&Error{}).Unwrap(); len(got) != 0 {
		t.Errorf("Unwrap of an empty Error = %v", got)
	}
}

func TestKindDocs(t *testing.T) {
	for _, name := range Default.Kinds() {
		k, _ := Default.Lookup(name)
		if k.Doc == "" || strings.HasSuffix(k.Doc, ".") {
			t.Errorf("kind %q: Doc %q; want one line without a final period", name, k.Doc)
		}
		if k.NewParams != nil {
			a, b := k.NewParams(), k.NewParams()
			if a == b {
				t.Errorf("kind %q: NewParams returns shared params", name)
			}
		}
	}
	if !slices.Equal(Default.Kinds(), Builtin().Kinds()) {
		t.Error("Default differs from Builtin()")
	}
}

func TestPrimitiveParamsField(t *testing.T) {
	// A kind whose params keep a sub-table raw (toml.Primitive) owns those
	// keys: the loader must not call them unknown.
	type rawParams struct {
		Draft toml.Primitive `toml:"draft"`
	}
	r := Builtin()
	if err := r.Register(Kind{Name: "raw", NewParams: func() any { return &rawParams{} }, In: stepType, Out: stepType, Build: noBuild}); err != nil {
		t.Fatal(err)
	}
	src := edit(t, "[[stage]]\nid   = \"head\"", "[[stage]]\nid = \"x\"\nkind = \"raw\"\n[stage.params.draft]\nanything = 1\n\n[[stage]]\nid   = \"head\"")
	if _, err := r.Parse([]byte(src), "r.toml"); err != nil {
		t.Errorf("Parse = %v", err)
	}
}
