package decode_test

import (
	"context"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/internal/testutil/synthfile"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tensor"
)

// recorder is an engine strategy that records what the loop hands it and
// settles plainly.
type recorder struct {
	expand [][]string // session ids per step
	settle []string
	closed bool
}

func (r *recorder) Owns(*session.Session) bool { return false }

func (r *recorder) Expand(_ context.Context, st *sched.Step, spans []int) error {
	var ids []string
	for _, i := range spans {
		ids = append(ids, st.Spans[i].S.Req.ID)
	}
	r.expand = append(r.expand, ids)
	return nil
}

func (r *recorder) Settle(_ context.Context, st *sched.Step, i int) error {
	r.settle = append(r.settle, st.Spans[i].S.Req.ID)
	return decode.SettlePlain(st, i)
}

func (r *recorder) Close() error { r.closed = true; return nil }

// The loop hands each strategy its own sessions: a beam request goes to beam
// search (a request strategy), the others to the engine strategy, whose
// Expand sees their spans and whose Settle runs once per span in batch
// order; Step runs plan to settle on the caller's goroutine and Close
// closes the strategies.
func TestLoopOwnership(t *testing.T) {
	ctx := context.Background()
	l, err := model.Load(ctx, model.LoadOptions{Path: synthfile.Path(t, synthfile.Options{DType: tensor.F32, Seed: 3}), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := l.Model.Arch()
	sc, err := sched.New(a, sched.Options{MaxSeqs: 4, Context: a.Context})
	if err != nil {
		t.Fatal(err)
	}
	loop := decode.NewLoop(sc, decode.Options{Model: l.Model, Store: l.Store})
	rec := &recorder{}
	loop.SetEngine(rec)
	mk := func(id string, beam *beamsearch.Options) *session.Session {
		q := session.New(session.Request{ID: id, Tokens: []int32{1, 20, 30}, Beam: beam}, l.Tokenizer, session.Options{Context: a.Context, MaxNewTokens: 3, NoStop: true})
		if err := sc.Admit(ctx, q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	p1, bq, p2 := mk("p1", nil), mk("beam", &beamsearch.Options{NumBeams: 2}), mk("p2", nil)
	st := sched.NewStep()
	for range 3 {
		if err := loop.Step(ctx, st); err != nil || st.Err != nil {
			t.Fatal(err, st.Err)
		}
	}
	for i, ids := range rec.expand {
		if !slices.Equal(ids, []string{"p1", "p2"}) {
			t.Errorf("step %d: the engine strategy expanded %v, want p1 and p2", i, ids)
		}
	}
	if len(rec.expand) != 3 || !slices.Equal(rec.settle[:2], []string{"p1", "p2"}) || len(rec.settle) != 6 {
		t.Errorf("expand %v, settle %v: want 3 steps of p1, p2", rec.expand, rec.settle)
	}
	if p1.Generated() != 3 || p2.Generated() != 3 || !p1.Done() {
		t.Errorf("plain sessions: %d and %d tokens, done %v", p1.Generated(), p2.Generated(), p1.Done())
	}
	if bq.Generated() == 0 {
		t.Errorf("the beam session did not advance")
	}
	if err := loop.Close(); err != nil || !rec.closed {
		t.Errorf("Close: %v, engine strategy closed %v", err, rec.closed)
	}
}
