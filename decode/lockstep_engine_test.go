package decode_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/pipelines"
)

// Sixteen SpecExec sequences in lock step (one prompt) run to the end of a
// 60-token context together: every one drafts up to the last positions a
// tree fits, so the draft's KV pool must hold each sequence's whole pages
// (context plus the tree's headroom, rounded up to pages, as the target's
// pool is sized), not context × sequences slots, or it runs out of pages
// near the end. The text is plain decoding's.
func TestSpecExecLockStepToContextEnd(t *testing.T) {
	dir := testutil.Models(t)
	const seqs, ctx = 16, 60
	open := func(spec bool) *sluice.Engine {
		p, err := pipelines.Preset("greedy")
		if spec {
			p, err = pipelines.Preset("specexec")
		}
		if err != nil {
			t.Fatal(err)
		}
		p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = seqs, 0 // until the context is full
		p.Model.Context, p.Model.PageTokens, p.Model.Threads = ctx, 16, 2
		for i := range p.Stages {
			if dp, ok := p.Stages[i].Params.(*pipelines.DraftTreeParams); ok {
				dp.Budget, dp.MaxDepth = 21, 4 // 21 + 16 + 1 slots of headroom: 60 + 38 is no multiple of 16
			}
		}
		if spec {
			p.Draft = &pipelines.ModelSpec{Path: filepath.Join(dir, "llama2xs-260k", "llama2xs_model.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: 2}
		}
		e, err := sluice.Open(context.Background(), sluice.Options{Pipeline: p,
			Model: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	run := func(e *sluice.Engine) []sluice.Result {
		res := make([]sluice.Result, seqs)
		var wg sync.WaitGroup
		for i := range seqs {
			wg.Add(1)
			req := sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: "Once upon a time"}
			if err := e.Submit(context.Background(), req, func(r sluice.Result) { res[i] = r; wg.Done() }); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		return res
	}
	want := run(open(false))
	e := open(true)
	got := run(e)
	for i := range got {
		if got[i].Err != nil || got[i].Text != want[i].Text || got[i].Finish != want[i].Finish {
			t.Fatalf("sequence %d: %v %s %q; plain %s %q", i, got[i].Err, got[i].Finish, got[i].Text, want[i].Finish, want[i].Text)
		}
	}
	if want[0].Finish != sluice.FinishLength || len(want[0].Tokens) != ctx+1 {
		t.Fatalf("plain decoding ended with %s at %d tokens; the test needs the context filled", want[0].Finish, len(want[0].Tokens))
	}
	if st := e.SpecStats(); st.Rounds == 0 || st.TokensPerPass() <= 1 {
		t.Fatalf("%d rounds, %.2f tokens per pass: the draft did nothing", st.Rounds, st.TokensPerPass())
	}
}
