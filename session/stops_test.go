package session

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
)

func tok512(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.LoadLlama2C(testutil.Model(t, "stories260K/tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// EndIDs is the set Stops is true for: EOS and BOS (llama2.c's vocabulary
// delimits texts with BOS) unless NoStop, and the request's StopTokens
// always; Accept stops exactly there.
func TestEndIDsAreWhereAcceptStops(t *testing.T) {
	tok := tok512(t)
	bos, eos := tok.BOS(), tok.EOS()
	for _, c := range []struct {
		noStop bool
		stops  []int32
		want   []int32
	}{
		{false, nil, []int32{bos, eos}},
		{false, []int32{300, eos, 261}, []int32{bos, eos, 261, 300}},
		{true, nil, nil},
		{true, []int32{300}, []int32{300}},
	} {
		o := Options{Context: 64, AddBOS: true, NoStop: c.noStop}
		s := New(Request{ID: "r", Prompt: "Lily", StopTokens: c.stops}, tok, o)
		if got := s.EndIDs(); !slices.Equal(got, c.want) {
			t.Errorf("NoStop %v StopTokens %v: EndIDs %v, want %v", c.noStop, c.stops, got, c.want)
		}
		for id := range int32(tok.VocabSize()) {
			q := New(Request{ID: "r", Prompt: "Lily", StopTokens: c.stops}, tok, o)
			if stopped := q.Accept(id) && q.Finish == FinishStop; stopped != slices.Contains(c.want, id) || q.Stops(id) != stopped {
				t.Fatalf("NoStop %v StopTokens %v: token %d stops %v, Stops %v, in EndIDs %v", c.noStop, c.stops, id, stopped, q.Stops(id), slices.Contains(c.want, id))
			}
		}
	}
}

// Keeps is how many tokens Accept keeps: up to a stop token (not kept) or
// the length or the context's end (that token kept).
func TestKeeps(t *testing.T) {
	tok := tok512(t)
	eos := tok.EOS()
	for _, c := range []struct {
		maxNew, context int
		toks            []int32
		want            int
	}{
		{0, 64, []int32{300, 301, 302}, 3},
		{0, 64, []int32{300, eos, 302}, 1},
		{0, 64, []int32{eos}, 0},
		{2, 64, []int32{300, 301, 302, 303}, 2},
		{2, 64, []int32{300, eos}, 1},
		{0, 4, []int32{300, 301, 302, 303}, 3}, // BOS "Lily" is 2 tokens; the token at the last slot is kept
	} {
		mk := func() *Session {
			return New(Request{ID: "r", Prompt: "Lily"}, tok, Options{Context: c.context, MaxNewTokens: c.maxNew, AddBOS: true})
		}
		s := mk()
		if s.NPrompt != 2 {
			t.Fatalf("prompt of %d tokens, the cases assume 2", s.NPrompt)
		}
		if got := s.Keeps(c.toks); got != c.want {
			t.Errorf("max_new %d context %d: Keeps(%v) = %d, want %d", c.maxNew, c.context, c.toks, got, c.want)
		}
		q := mk()
		for _, x := range c.toks {
			if q.Accept(x) {
				break
			}
		}
		if got := q.Generated(); got != c.want {
			t.Errorf("max_new %d context %d: Accept kept %d of %v, Keeps says %d", c.maxNew, c.context, got, c.toks, c.want)
		}
	}
}

// A beam request of one beam is greedy decoding (no beam search left on
// it); what beam search would ignore, or OnLogits where it is not called,
// fails the request naming it.
func TestBeamAndHookChecks(t *testing.T) {
	tok := tok512(t)
	o := Options{Context: 64, AddBOS: true}
	if s := New(Request{ID: "r", Prompt: "Lily", Beam: &beamsearch.Options{NumBeams: 1, EarlyStopping: beamsearch.EarlyStopNever}}, tok, o); s.Done() || s.Req.Beam != nil {
		t.Errorf("num_beams 1: done %v (%v), beam %+v; want greedy", s.Done(), s.Err, s.Req.Beam)
	}
	if s := New(Request{ID: "r", Prompt: "Lily", Beam: &beamsearch.Options{NumBeams: 3}}, tok, o); s.Done() || s.Req.Beam == nil {
		t.Errorf("num_beams 3: done %v (%v)", s.Done(), s.Err)
	}
	logits := func(int32, []float32) {}
	for _, c := range []struct {
		name string
		req  Request
		o    Options
		want string
	}{
		{"temperature", Request{Beam: &beamsearch.Options{NumBeams: 3}, Sampling: &sample.Options{Temperature: 0.5}}, o, "temperature = 0.5"},
		{"default temperature", Request{Beam: &beamsearch.Options{NumBeams: 2}}, Options{Context: 64, Sampling: sample.Options{Temperature: 0.8}}, "temperature = 0.8"},
		{"repeat penalty", Request{Beam: &beamsearch.Options{NumBeams: 1}, Sampling: &sample.Options{RepeatPenalty: 1.1}}, o, "repeat_penalty = 1.1"},
		{"beam OnLogits", Request{Beam: &beamsearch.Options{NumBeams: 2}, OnLogits: logits}, o, "OnLogits"},
		{"speculative OnLogits", Request{OnLogits: logits}, Options{Context: 64, Speculative: true}, "verifies drafts"},
	} {
		c.req.ID, c.req.Prompt = "r", "Lily"
		s := New(c.req, tok, c.o)
		if s.Finish != FinishError || s.Err == nil || !strings.Contains(s.Err.Error(), c.want) {
			t.Errorf("%s: finish %q err %v, want an error naming %q", c.name, s.Finish, s.Err, c.want)
		}
	}
	if s := New(Request{ID: "r", Prompt: "Lily", OnLogits: logits, Beam: &beamsearch.Options{NumBeams: 1}}, tok, o); s.Done() {
		t.Errorf("greedy (num_beams 1) with OnLogits: %v", s.Err)
	}
}
