package pipelines_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tensor"
)

// countPrompt passes sessions through, adding up their prompt tokens.
type countPrompt struct{ n *atomic.Int64 }

func (c countPrompt) Process(ctx context.Context, q *session.Session, emit graph.Emit[*session.Session]) error {
	c.n.Add(int64(len(q.Tokens)))
	return emit(ctx, q)
}

// countRows passes steps through, adding up the rows of each pass.
type countRows struct{ n *atomic.Int64 }

func (c countRows) Process(ctx context.Context, st *sched.Step, emit graph.Emit[*sched.Step]) error {
	c.n.Add(int64(len(st.State.Batch.Tokens)))
	return emit(ctx, st)
}

// passThrough is a kind whose stage is s, from T to T.
func passThrough[T any](name string, s graph.Stage[T, T]) pipelines.Kind {
	t := reflect.TypeFor[T]()
	return pipelines.Kind{
		Name: name, Doc: "counts what goes by", In: t, Out: t,
		Build: func(b *pipelines.BuildContext) (graph.AnyPort, error) {
			return graph.ThenAny(b.Stage.ID, b.In, graph.Erase(s), b.Options()...)
		},
	}
}

const countingTOML = `name = "counting"

[[stage]]
id   = "tokenize"
kind = "tokenize"

[[stage]]
id   = "prompt_tokens"
kind = "count_prompt"

[[stage]]
id   = "scheduler"
kind = "scheduler"
  [stage.params]
  max_in_flight  = 4
  prefill_chunk  = 8
  max_new_tokens = 12
  stop_at_eos    = false

[[stage]]
id   = "embed"
kind = "embed"

[[stage]]
id   = "layers"
kind = "transformer_layers"

[[stage]]
id   = "head"
kind = "head"

[[stage]]
id   = "rows"
kind = "count_rows"

[[stage]]
id   = "sample"
kind = "sample"
  [stage.params]
  temperature = 0.0

[[stage]]
id   = "detokenize"
kind = "detokenize"
`

// TestPassThroughKinds registers two kinds outside package pipelines, a
// session one between tokenize and the scheduler and a step one between head
// and sample, runs them from a TOML file, and checks what they counted and
// that the text is the built-in chain's.
func TestPassThroughKinds(t *testing.T) {
	var prompt, rows atomic.Int64
	r := pipelines.Builtin()
	r.MustRegister(passThrough[*session.Session]("count_prompt", countPrompt{&prompt}))
	r.MustRegister(passThrough[*sched.Step]("count_rows", countRows{&rows}))
	path := filepath.Join(t.TempDir(), "counting.toml")
	if err := os.WriteFile(path, []byte(countingTOML), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := r.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pipelines.Load(path); err == nil || !strings.Contains(err.Error(), `unknown kind "count_prompt"`) {
		t.Errorf("the Default registry accepted the file: %v", err)
	}

	l := enginetest.Synth(t, 1, tensor.F32, 0)
	prompts := enginetest.Prompts32()[:6]
	run := func(p *pipelines.Pipeline) ([]sluice.Result, *sluice.Engine) {
		e := enginetest.Engine(t, l, p)
		res := make([]sluice.Result, len(prompts))
		for i, pr := range prompts {
			var err error
			if res[i], err = e.Complete(context.Background(), sluice.Request{Prompt: pr}); err != nil {
				t.Fatal(err)
			}
		}
		return res, e
	}
	got, e := run(p)
	want, _ := run(enginetest.Pipeline(t, 0, 4, 8, 12))

	var promptTokens int64
	for i := range got {
		if got[i].Text != want[i].Text || got[i].CompletionTokens != 12 {
			t.Errorf("prompt %d: text %q (%d new tokens), want %q", i, got[i].Text, got[i].CompletionTokens, want[i].Text)
		}
		promptTokens += int64(got[i].PromptTokens)
	}
	if promptTokens == 0 || prompt.Load() != promptTokens {
		t.Errorf("count_prompt counted %d tokens, the results have %d", prompt.Load(), promptTokens)
	}
	if st := e.Stats(); rows.Load() != st.Rows || st.Rows < promptTokens {
		t.Errorf("count_rows counted %d rows, the scheduler planned %d (prompts %d)", rows.Load(), st.Rows, promptTokens)
	}
	var names []string
	for _, s := range e.NodeStats() {
		names = append(names, s.Name)
	}
	if g := strings.Join(names, " "); !strings.Contains(g, "tokenize prompt_tokens scheduler.admit") || !strings.Contains(g, "head rows sample") {
		t.Errorf("nodes: %s", g)
	}
}
