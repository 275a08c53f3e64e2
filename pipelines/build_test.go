package pipelines

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/stages"
)

// buildOpts are ends for Build tests that fail before anything runs.
func buildOpts() BuildOptions {
	return BuildOptions{
		Env:      &stages.Env{Sched: &sched.Scheduler{}},
		Requests: func(context.Context, graph.Emit[session.Request]) error { return nil },
		Results:  func(context.Context, stages.Result) error { return nil },
	}
}

// TestBuildChecksWiring: a pipeline edited in Go after parsing is checked
// again, as Parse would.
func TestBuildChecksWiring(t *testing.T) {
	p := Greedy()
	p.Stages[1], p.Stages[2] = p.Stages[2], p.Stages[1]
	_, err := Build(p, buildOpts())
	if !errors.Is(err, ErrStageOrder) {
		t.Fatalf("Build = %v, want ErrStageOrder", err)
	}
	want := `pipelines: <preset greedy>:27: stage "embed": kind "embed" takes *sched.Step, but the stage before it, "tokenize" (kind "tokenize", line 11), gives *session.Session`
	if !strings.Contains(err.Error(), want) {
		t.Errorf("Build = %v\nwant it to include %s", err, want)
	}
}

// TestBuildChecksKinds: a kind whose builder breaks its own declaration
// fails Build with the stage named.
func TestBuildChecksKinds(t *testing.T) {
	mapTo := func(out reflect.Type) func(b *BuildContext) (graph.AnyPort, error) {
		return func(b *BuildContext) (graph.AnyPort, error) {
			in, err := graph.PortOf[session.Request](b.In)
			if err != nil {
				return graph.AnyPort{}, err
			}
			if out == stepType {
				return graph.Then(b.Stage.ID, in, graph.Map(func(context.Context, session.Request) (*sched.Step, error) { return nil, nil })).Any(), nil
			}
			return graph.Then(b.Stage.ID, in, graph.Map(func(context.Context, session.Request) (*session.Session, error) { return nil, nil })).Any(), nil
		}
	}
	// x, of the kind under test, replaces tokenize, or tokenize and the scheduler.
	afterTok := []StageSpec{{ID: "sc", Kind: KindScheduler, Params: DefaultSchedulerParams()}}
	rest := []StageSpec{{ID: "s", Kind: KindSample, Params: DefaultSampleParams()}, {ID: "d", Kind: KindDetokenize}}
	tests := []struct {
		name string
		kind Kind
		want string
	}{
		{"wrong output type", Kind{Name: "k", In: RequestType, Out: sessionType, Build: mapTo(stepType)},
			`pipelines: k.toml: stage "x" (kind "k"): Build returned a port of *sched.Step; the kind declares *session.Session`},
		{"opens without OpenLoop", Kind{Name: "k", In: RequestType, Out: stepType, Loop: LoopOpen, Build: mapTo(stepType)},
			`pipelines: k.toml: stage "x" (kind "k"): the kind opens the decode loop, but its Build did not call OpenLoop`},
		{"builder fails", Kind{Name: "k", In: RequestType, Out: sessionType, Build: noBuild},
			`pipelines: k.toml: stage "x" (kind "k"): unsupported operation`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Builtin()
			r.MustRegister(tc.kind)
			p := &Pipeline{Source: "k.toml", reg: r, Stages: []StageSpec{{ID: "x", Kind: "k"}}}
			if tc.kind.Out == sessionType {
				p.Stages = append(p.Stages, afterTok...)
			}
			p.Stages = append(p.Stages, rest...)
			for i := range p.Stages {
				p.Stages[i].Buffer, p.Stages[i].Workers = 1, 1
			}
			_, err := Build(p, buildOpts())
			if err == nil || err.Error() != tc.want {
				t.Errorf("Build = %v\nwant %s", err, tc.want)
			}
		})
	}
}

func TestBuildUnknownKind(t *testing.T) {
	p := Greedy()
	p.Stages[5].Kind = "lookahead"
	_, err := Build(p, buildOpts())
	want := `pipelines: <preset greedy>:44: stage "sample": unknown kind "lookahead"; known kinds: "tokenize", "scheduler", "embed", "transformer_layers", "head", "sample", "detokenize", "draft_tree", "verify", "beam"`
	if !errors.Is(err, ErrUnknownKind) || err.Error() != want {
		t.Errorf("Build = %v\nwant %s", err, want)
	}
}
