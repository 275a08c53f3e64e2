package pipelines

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
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

func beamRegistry(t *testing.T) *Registry {
	t.Helper()
	r := Builtin()
	if err := r.Register(Kind{Name: "beam", Doc: "beam search", NewParams: func() any { return &beamParams{Beams: 4, Return: 1} }}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterChain(Chain{Name: "beam", Kinds: []string{
		KindTokenize, KindScheduler, KindEmbed, KindTransformerLayers, KindHead, "beam", KindDetokenize,
	}}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegistryRegister(t *testing.T) {
	tests := []struct {
		name string
		kind Kind
		want error
	}{
		{"duplicate", Kind{Name: KindSample}, ErrDuplicateKind},
		{"empty name", Kind{Name: ""}, ErrInvalid},
		{"not lower_snake", Kind{Name: "DraftTree"}, ErrInvalid},
		{"params not a pointer", Kind{Name: "x", NewParams: func() any { return beamParams{} }}, ErrInvalid},
		{"params nil", Kind{Name: "x", NewParams: func() any { return nil }}, ErrInvalid},
		{"new kind", Kind{Name: "draft_tree"}, nil},
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
	if err := r.Register(Kind{Name: "only"}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterChain(Chain{Name: "c", Kinds: []string{"only"}}); err != nil {
		t.Fatal(err)
	}
	p, err := r.Parse([]byte("name = \"z\"\n[[stage]]\nid = \"o\"\nkind = \"only\"\n"), "z.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Chain != "c" || len(p.Stages) != 1 || p.Stages[0].Params != nil {
		t.Errorf("Parse = %+v", p)
	}
	if diff := cmp.Diff([]string{"only"}, r.Kinds()); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
}

func TestRegistryRegisterChain(t *testing.T) {
	tests := []struct {
		name  string
		chain Chain
		want  error
	}{
		{"unregistered kind", Chain{Name: "spec", Kinds: []string{KindTokenize, "verify"}}, ErrUnknownKind},
		{"kind twice", Chain{Name: "x", Kinds: []string{KindHead, KindHead}}, ErrInvalid},
		{"duplicate name", Chain{Name: ChainSample, Kinds: []string{KindHead}}, ErrDuplicateKind},
		{"empty", Chain{Name: "e"}, ErrInvalid},
		{"ok", Chain{Name: "short", Kinds: []string{KindTokenize, KindDetokenize}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Builtin().RegisterChain(tc.chain)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("RegisterChain = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRegistryChains(t *testing.T) {
	r := Builtin()
	cs := r.Chains()
	cs[0].Kinds[0] = "mutated"
	if got := r.Chains()[0].Kinds[0]; got != KindTokenize {
		t.Errorf("Chains returned shared storage: first kind now %q", got)
	}
	want := []string{KindTokenize, KindScheduler, KindEmbed, KindTransformerLayers, KindHead, KindSample, KindDetokenize}
	if diff := cmp.Diff(want, r.Kinds()); diff != "" {
		t.Errorf("Kinds (-want +got):\n%s", diff)
	}
}

func TestSecondChain(t *testing.T) {
	r := beamRegistry(t)
	src := edit(t, "kind = \"sample\"\n  [stage.params]\n  top_k = 10", "kind = \"beam\"\n  [stage.params]\n  beams = 8")
	p, err := r.Parse([]byte(src), "beam.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Chain != "beam" {
		t.Errorf("Chain = %q, want beam", p.Chain)
	}
	if diff := cmp.Diff(&beamParams{Beams: 8, Return: 1}, p.Stages[5].Params); diff != "" {
		t.Errorf("beam params (-want +got):\n%s", diff)
	}
	// The same file is an unknown kind for Default.
	if _, err := Parse([]byte(src), "beam.toml"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("Default.Parse = %v, want ErrUnknownKind", err)
	}
	// The sample chain still works in the extended registry.
	if p, err := r.Parse([]byte(baseTOML), "base.toml"); err != nil || p.Chain != ChainSample {
		t.Errorf("base with beam registry: %v, chain %q", err, p.Chain)
	}
}

func TestSecondChainErrors(t *testing.T) {
	r := beamRegistry(t)
	t.Run("both sample and beam", func(t *testing.T) {
		src := edit(t, `kind = "detokenize"`, "kind = \"detokenize\"\n\n[[stage]]\nid = \"b\"\nkind = \"beam\"")
		_, err := r.Parse([]byte(src), "t.toml")
		if !errors.Is(err, ErrStageOrder) {
			t.Fatalf("err = %v, want ErrStageOrder", err)
		}
		want := `pipelines: t.toml:33: stage "b": kind "beam" does not belong in chain "sample"; closest chain "sample": ` +
			`want exactly one stage of each kind, in this order: tokenize → scheduler → embed → transformer_layers → head → sample → detokenize; ` +
			`known chains: sample (tokenize → scheduler → embed → transformer_layers → head → sample → detokenize); ` +
			`beam (tokenize → scheduler → embed → transformer_layers → head → beam → detokenize)`
		if diff := cmp.Diff(want, err.Error()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("joined validate errors each get a line", func(t *testing.T) {
		src := edit(t, "kind = \"sample\"\n  [stage.params]\n  top_k = 10", "kind = \"beam\"\n  [stage.params]\n  beams = 0\n  return = -1")
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
	if err := r.Register(Kind{Name: "raw", NewParams: func() any { return &rawParams{} }}); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterChain(Chain{Name: "raw", Kinds: []string{"raw"}}); err != nil {
		t.Fatal(err)
	}
	src := "name = \"r\"\n[[stage]]\nid = \"x\"\nkind = \"raw\"\n[stage.params.draft]\nanything = 1\n"
	if _, err := r.Parse([]byte(src), "r.toml"); err != nil {
		t.Errorf("Parse = %v", err)
	}
}
