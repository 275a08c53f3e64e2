package sched_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer"
)

var arch = model.Arch{Name: "llama", Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, HeadDim: 4, Vocab: 512, Context: 256, BytesPerKVValue: 4}

func tok512(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.LoadLlama2C(filepath.Join(testutil.Models(t), "stories260K", "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// prompt is a session of n prompt tokens.
func prompt(t *testing.T, tk tokenizer.Tokenizer, id string, n int, adapter string) *session.Session {
	t.Helper()
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(10 + i%400)
	}
	q := session.New(session.Request{ID: id, Tokens: toks, Adapter: adapter}, tk, session.Options{Context: arch.Context})
	if q.Done() {
		t.Fatal(q.Err)
	}
	return q
}

func TestOptionsValidate(t *testing.T) {
	for _, c := range []struct {
		o    sched.Options
		want string
	}{
		{sched.Options{MaxSeqs: 0, Context: 8}, "max_in_flight"},
		{sched.Options{MaxSeqs: 1, Context: 8, PrefillChunk: 64, MaxBatchTokens: 8}, "prefill_chunk"},
		{sched.Options{MaxSeqs: 4, Context: 8, PrefillChunk: 2, MaxBatchTokens: 3}, "max_batch_tokens"},
		{sched.Options{MaxSeqs: 1, Context: 0}, "context"},
		{sched.Options{MaxSeqs: 1, Context: 8, KVBudget: -1}, "kv_budget"},
	} {
		if err := c.o.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

// Plan puts every generating session's decode row first, then prompt
// chunks oldest first, each at most prefill_chunk rows, until
// max_batch_tokens; a pass runs one adapter set, the oldest session's; the
// batch's output rows are the rows at each session's end.
func TestPlanRows(t *testing.T) {
	tk := tok512(t)
	ctx := context.Background()
	sc, err := sched.New(arch, sched.Options{MaxSeqs: 4, PrefillChunk: 8, MaxBatchTokens: 12, Context: arch.Context})
	if err != nil {
		t.Fatal(err)
	}
	gen := prompt(t, tk, "gen", 3, "")
	long := prompt(t, tk, "long", 20, "")
	short := prompt(t, tk, "short", 5, "")
	other := prompt(t, tk, "other", 4, "lora")
	for _, q := range []*session.Session{gen, long, short, other} {
		if err := sc.Admit(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	gen.Cached = 2 // its prompt is in: one decode row
	st := sched.NewStep()
	if err := sc.Plan(ctx, st); err != nil || st.Done {
		t.Fatal(err, st.Done)
	}
	type span struct {
		id         string
		start, len int
	}
	var got []span
	for _, sp := range st.Spans {
		got = append(got, span{sp.S.Req.ID, sp.Start, sp.Len})
	}
	want := []span{{"gen", 0, 1}, {"long", 1, 8}, {"short", 9, 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("spans %+v, want %+v (the lora session waits for its own pass)", got, want)
	}
	b := st.State.Batch
	if b.Len() != 12 || st.Room != 0 || !slices.Equal(b.Outputs, []int32{0}) {
		t.Errorf("batch of %d rows, room %d, outputs %v: want 12, 0, [0]", b.Len(), st.Room, b.Outputs)
	}
	if b.Positions[1] != 0 || b.Positions[8] != 7 || b.Seq[1] != long.Seq {
		t.Errorf("long's rows: positions %v, seq %d", b.Positions[1:9], b.Seq[1])
	}
}

// A generating session whose last token follows a run jump-forward took
// (several tokens pending after its prompt) goes in ahead of the prompt
// chunks, the whole run as one span with logits at its last row only.
func TestPlanJumpedRun(t *testing.T) {
	tk := tok512(t)
	ctx := context.Background()
	sc, err := sched.New(arch, sched.Options{MaxSeqs: 4, PrefillChunk: 8, MaxBatchTokens: 12, Context: arch.Context})
	if err != nil {
		t.Fatal(err)
	}
	long := prompt(t, tk, "long", 20, "")
	gen := prompt(t, tk, "gen", 3, "")
	for _, q := range []*session.Session{long, gen} {
		if err := sc.Admit(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	gen.Cached = 3 // its prompt is in; a sampled token and two forced ones follow
	for _, tok := range []int32{40, 41, 42} {
		gen.Accept(tok)
	}
	st := sched.NewStep()
	if err := sc.Plan(ctx, st); err != nil || st.Done {
		t.Fatal(err, st.Done)
	}
	if len(st.Spans) != 2 || st.Spans[0].S != gen || st.Spans[0].Len != 3 || st.Spans[1].S != long || st.Spans[1].Len != 8 {
		t.Fatalf("spans %+v: want gen's 3 rows, then long's chunk of 8", st.Spans)
	}
	b := st.State.Batch
	if !slices.Equal(b.Tokens[:3], []int32{40, 41, 42}) || !slices.Equal(b.Positions[:3], []int32{3, 4, 5}) || !slices.Equal(b.Outputs, []int32{2}) {
		t.Errorf("gen's rows: tokens %v positions %v, outputs %v: want [40 41 42] at [3 4 5], output row 2", b.Tokens[:3], b.Positions[:3], b.Outputs)
	}
}

// Close ends the loop once every session has finished: Plan retires the
// finished ones onto Retired, then marks its step Done and closes Retired.
func TestCloseDrains(t *testing.T) {
	tk := tok512(t)
	ctx := context.Background()
	sc, err := sched.New(arch, sched.Options{MaxSeqs: 2, Context: arch.Context})
	if err != nil {
		t.Fatal(err)
	}
	q := prompt(t, tk, "a", 3, "")
	if err := sc.Admit(ctx, q); err != nil {
		t.Fatal(err)
	}
	sc.Close()
	if err := sc.Admit(ctx, prompt(t, tk, "late", 3, "")); err == nil {
		t.Error("Admit after Close succeeded")
	}
	st := sched.NewStep()
	if err := sc.Plan(ctx, st); err != nil || st.Done || len(st.Spans) != 1 {
		t.Fatalf("first plan: %v done=%v spans=%d", err, st.Done, len(st.Spans))
	}
	q.Fail(context.Canceled) // it ends between steps
	if err := sc.Plan(ctx, st); err != nil || !st.Done {
		t.Fatalf("after the last session: %v done=%v", err, st.Done)
	}
	var retired []string
	for r := range sc.Retired() {
		retired = append(retired, r.Req.ID)
	}
	if !slices.Equal(retired, []string{"a"}) {
		t.Errorf("retired %v", retired)
	}
	if n := sc.FreeSeqs(); n != 2 {
		t.Errorf("%d KV sequences free after the end, want 2", n)
	}
}

// TakeSeqs lends all it is asked for or nothing, and GiveSeq takes them back.
func TestTakeSeqs(t *testing.T) {
	sc, err := sched.New(arch, sched.Options{MaxSeqs: 4, Context: arch.Context})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sc.TakeSeqs(5); ok || sc.FreeSeqs() != 4 {
		t.Fatalf("took 5 of 4, or took some: %d free", sc.FreeSeqs())
	}
	ids, ok := sc.TakeSeqs(3)
	if !ok || len(ids) != 3 || sc.FreeSeqs() != 1 {
		t.Fatalf("took %v, %d free", ids, sc.FreeSeqs())
	}
	for _, id := range ids {
		sc.GiveSeq(id)
	}
	if sc.FreeSeqs() != 4 {
		t.Errorf("%d free after giving back", sc.FreeSeqs())
	}
}
