package session_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer"
)

// jumpText is a grammar with fixed text, a choice in it, and an end. On
// the 512-token vocabulary "{", "_" and "}" have no piece of their own
// (only their byte token): forced, as is the end token after the value.
const jumpText = `root ::= "{\"record_type_identifier\":\"" ("a bedtime story" | "the end_of_it") "\",\"next_one\":{}}"`

// model is a fake target: the row after history, a deterministic function
// of it, whose argmax under the mask varies with the position.
func model(history []int32) []float32 {
	row := make([]float32, 512)
	for i := range row {
		row[i] = float32((i*7 + len(history)*13) % 31)
	}
	return row
}

// decode runs q to its end as the engine would, one pass at a time: each
// pass feeds the tokens not yet fed and samples after the last (through
// Logits, which jumps forward when it may). It returns the passes.
func decode(t *testing.T, q *session.Session) int {
	t.Helper()
	passes := 0
	for !q.Check() {
		passes++
		q.Cached = len(q.Tokens) - 1
		if err := q.Logits(int32(len(q.Tokens)-1), model(q.Tokens)); err != nil {
			t.Fatal(err)
		}
	}
	return passes
}

// Jump-forward takes exactly the tokens one pass per token takes, with the
// same finish reason, wherever max_tokens, the context's end, a cancelled
// context or the grammar's end cuts the output, and saves one pass per
// jumped token.
func TestJumpForward(t *testing.T) {
	tk := tok512(t)
	cache := grammar.NewCache(tk)
	g := &grammar.Spec{GBNF: jumpText}
	run := func(o session.Options, req session.Request, jump bool) (*session.Session, int) {
		o.NoJumpForward = !jump
		o.Grammars = cache
		q := session.New(req, tk, o)
		if q.Err != nil {
			t.Fatal(q.Err)
		}
		return q, decode(t, q)
	}
	type cut struct {
		name   string
		o      session.Options
		cancel int // cancel the request's context at this generated token (0: never)
	}
	var cuts []cut
	for n := 1; n <= 60; n++ {
		cuts = append(cuts, cut{name: fmt.Sprintf("max_tokens %d", n), o: session.Options{AddBOS: true, Context: 128, MaxNewTokens: n}})
	}
	for c := 8; c <= 60; c += 3 {
		cuts = append(cuts, cut{name: fmt.Sprintf("context %d", c), o: session.Options{AddBOS: true, Context: c}})
	}
	for k := 1; k <= 50; k += 2 {
		cuts = append(cuts, cut{name: fmt.Sprintf("cancelled at token %d", k), o: session.Options{AddBOS: true, Context: 128}, cancel: k})
	}
	totalJumped := 0
	for _, c := range cuts {
		var got [2]*session.Session
		var passes [2]int
		for k, jump := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			req := session.Request{ID: c.name, Ctx: ctx, Prompt: "Lily", Grammar: g}
			n := 0
			req.OnToken = func(tok int32, _ string) {
				if tok >= 0 {
					n++
				}
				if n == c.cancel {
					cancel()
				}
			}
			got[k], passes[k] = run(c.o, req, jump)
			cancel()
		}
		ref, q := got[0], got[1]
		if !slices.Equal(q.Tokens, ref.Tokens) || q.Finish != ref.Finish {
			t.Fatalf("%s: jump-forward gave %q (%s), one pass per token %q (%s)", c.name,
				session.Text(tk, q.Tokens), q.Finish, session.Text(tk, ref.Tokens), ref.Finish)
		}
		if ref.Jumped != 0 || passes[1] != passes[0]-q.Jumped {
			t.Errorf("%s: %d passes with %d jumped, %d without (%d jumped there)", c.name, passes[1], q.Jumped, passes[0], ref.Jumped)
		}
		totalJumped += q.Jumped
	}
	if totalJumped == 0 {
		t.Fatal("no token was forced: the test cannot tell jump-forward from none")
	}
	// The whole text: it ends with the grammar (stop) and jumps.
	q, _ := run(session.Options{AddBOS: true, Context: 128}, session.Request{ID: "whole", Prompt: "Lily", Grammar: g}, true)
	if q.Finish != session.FinishStop || q.Jumped == 0 {
		t.Errorf("whole text: %q finished %s with %d jumped", session.Text(tk, q.Tokens), q.Finish, q.Jumped)
	}
	t.Logf("%q: %d of %d tokens jumped", tokenizer.Decode(tk, -1, q.Tokens[q.NPrompt:]), q.Jumped, q.Generated())
}

// No jump-forward where a forced token could be refused or watched: a
// logit bias that bans it, OnLogits (it would see a token before its row),
// beams. A bias that does not ban the token leaves it forced.
func TestJumpForwardOff(t *testing.T) {
	tk := tok512(t)
	cache := grammar.NewCache(tk)
	g := &grammar.Spec{GBNF: `root ::= "Once upon a time"`}
	o := session.Options{AddBOS: true, Context: 64, Grammars: cache}
	q := session.New(session.Request{ID: "a", Prompt: "Lily", Grammar: g}, tk, o)
	// Find a prefix after which a token is forced.
	var hist []int32
	var forced int32 = -1
	for hist = slices.Clone(q.Tokens); len(hist) < 40; {
		if f, ok := q.Forced(hist); ok {
			forced = f
			break
		}
		m, err := q.Process(model(hist), hist)
		if err != nil {
			t.Fatal(err)
		}
		best := int32(0)
		for i, v := range m {
			if v > m[best] {
				best = int32(i)
			}
		}
		hist = append(hist, best)
	}
	if forced < 0 {
		t.Skip("the grammar forces no token on this vocabulary")
	}
	for _, c := range []struct {
		name string
		req  session.Request
		want bool
	}{
		{"bias that bans it", session.Request{LogitBias: map[int32]float32{forced: float32(-1 / zero())}}, false},
		{"bias that lowers it", session.Request{LogitBias: map[int32]float32{forced: -5}}, true},
		{"OnLogits", session.Request{OnLogits: func(int32, []float32) {}}, false},
	} {
		c.req.ID, c.req.Prompt, c.req.Grammar = c.name, "Lily", g
		s := session.New(c.req, tk, o)
		if s.Err != nil {
			t.Fatal(s.Err)
		}
		if _, ok := s.Forced(hist); ok != c.want {
			t.Errorf("%s: forced %v, want %v", c.name, ok, c.want)
		}
	}
	off := o
	off.NoJumpForward = true
	if _, ok := session.New(session.Request{ID: "off", Prompt: "Lily", Grammar: g}, tk, off).Forced(hist); ok {
		t.Error("NoJumpForward: a token was forced")
	}
}

func zero() float32 { return 0 }
