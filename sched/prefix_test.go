package sched_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/decode"

	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tensor"
)

// prefixSched is a scheduler over the tiny synthetic model with the prefix
// cache, and a step function running the model as the graph's stages do.
func prefixSched(t *testing.T, maxSeqs int) (*sched.Scheduler, *model.Loaded, func(st *sched.Step) error) {
	t.Helper()
	p, err := synth.LookupPreset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := synth.WriteFile(path, synth.Options{Preset: p, DType: tensor.Q8_0, Seed: 1, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	a := l.Model.Arch()
	sc, err := sched.New(a, sched.Options{MaxSeqs: maxSeqs, PrefillChunk: 16, Context: a.Context, PrefixCache: true, ModelID: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Cache.Close() })
	loop := decode.NewLoop(sc, decode.Options{Model: l.Model, Store: l.Store})
	step := func(st *sched.Step) error { return loop.Step(t.Context(), st) }
	return sc, l, step
}

// Sessions sharing a prompt's first pages with one being prefilled are held
// back (queued, not active) until its prompt is done, then start from its
// pages; a Shutdown meanwhile cancels the held ones too, and every session
// reaches the retired side once.
func TestPrefixHoldBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, shutdown := range []bool{false, true} {
		t.Run(fmt.Sprint("shutdown=", shutdown), func(t *testing.T) {
			sc, l, step := prefixSched(t, 4)
			prompt := make([]int32, 70) // 4 whole pages and a partial one
			for i := range prompt {
				prompt[i] = int32(1 + i%50)
			}
			so := session.Options{MaxNewTokens: 4, NoStop: true, Context: l.Model.Arch().Context}
			var qs []*session.Session
			for i := range 4 {
				toks := append(slices.Clone(prompt), int32(100+i))
				q := session.New(session.Request{ID: fmt.Sprint(i), Index: uint64(i), Tokens: toks}, l.Tokenizer, so)
				if err := sc.Admit(ctx, q); err != nil {
					t.Fatal(err)
				}
				qs = append(qs, q)
			}
			st := sched.NewStep()
			if err := step(st); err != nil {
				t.Fatal(err)
			}
			if s := sc.Stats(); s.Active != 1 || s.Queued != 3 {
				t.Fatalf("after the first step: %d active, %d queued; want the first active and 3 held", s.Active, s.Queued)
			}
			if shutdown {
				sc.Shutdown()
			}
			sc.Close()
			for n := 0; !st.Done; n++ {
				if n == 100 {
					t.Fatal("the sessions did not finish in 100 steps")
				}
				if err := step(st); err != nil {
					t.Fatal(err)
				}
			}
			retired := 0
			for q := range sc.Retired() {
				retired++
				switch {
				case shutdown && q.Finish != session.FinishCancelled:
					t.Errorf("session %s after Shutdown: %s (%v)", q.Req.ID, q.Finish, q.Err)
				case !shutdown && (q.Finish != session.FinishLength || q.Err != nil):
					t.Errorf("session %s: %s (%v)", q.Req.ID, q.Finish, q.Err)
				}
			}
			if retired != len(qs) {
				t.Fatalf("%d sessions retired, want %d", retired, len(qs))
			}
			if shutdown {
				return
			}
			if qs[0].CachedTokens != 0 {
				t.Errorf("the first session mapped %d tokens from an empty cache", qs[0].CachedTokens)
			}
			for _, q := range qs[1:] {
				if q.CachedTokens != 64 {
					t.Errorf("session %s mapped %d tokens, want the 4 shared pages (64)", q.Req.ID, q.CachedTokens)
				}
			}
			if st := sc.Stats().Cache; st.PagesInUse != 0 || st.Prefix.Hits != 3 {
				t.Errorf("after the sessions: %d pages in use, prefix counters %+v", st.PagesInUse, st.Prefix)
			}
		})
	}
}
