package session_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer"
)

func tok512(t *testing.T) tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.LoadLlama2C(filepath.Join(testutil.Models(t), "stories260K", "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func opts() session.Options {
	return session.Options{AddBOS: true, Context: 32, MaxNewTokens: 5}
}

// onehot is a row of logits whose argmax is id.
func onehot(id int32) []float32 {
	l := make([]float32, 512)
	l[id] = 10
	return l
}

// A request that cannot run comes back finished with the reason named: an
// empty prompt, one longer than the context, a token outside the
// vocabulary, bad sampling options.
func TestNewRefuses(t *testing.T) {
	tk := tok512(t)
	long := make([]int32, 40)
	for _, c := range []struct {
		name string
		req  session.Request
		want error
	}{
		{"too long", session.Request{ID: "a", Tokens: long}, session.ErrPromptTooLong},
		{"out of vocabulary", session.Request{ID: "b", Tokens: []int32{1, 900}}, nil},
		{"bad sampling", session.Request{ID: "c", Prompt: "x", Sampling: &sample.Options{Temperature: -1}}, sample.ErrOptions},
		{"bad bias", session.Request{ID: "d", Prompt: "x", LogitBias: map[int32]float32{3: float32(math.NaN())}}, sample.ErrOptions},
	} {
		q := session.New(c.req, tk, opts())
		if !q.Done() || q.Finish != session.FinishError || q.Err == nil {
			t.Errorf("%s: finish %q err %v, want an error", c.name, q.Finish, q.Err)
			continue
		}
		if c.want != nil && !errors.Is(q.Err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, q.Err, c.want)
		}
	}
}

// The stop rules: EOS and BOS end the session with finish reason stop (not
// appended), unless NoStop; StopTokens always; max new tokens and the
// context's end with length.
func TestAcceptStopRules(t *testing.T) {
	tk := tok512(t)
	word := int32(300)
	q := session.New(session.Request{ID: "eos", Prompt: "Lily"}, tk, opts())
	if q.Accept(word) || q.Accept(tk.EOS()) == false || q.Finish != session.FinishStop || q.Generated() != 1 {
		t.Errorf("EOS: finish %q, %d generated", q.Finish, q.Generated())
	}
	q = session.New(session.Request{ID: "bos", Prompt: "Lily"}, tk, opts())
	if !q.Accept(tk.BOS()) || q.Finish != session.FinishStop {
		t.Errorf("BOS: finish %q", q.Finish)
	}
	o := opts()
	o.NoStop = true
	q = session.New(session.Request{ID: "nostop", Prompt: "Lily", StopTokens: []int32{word}}, tk, o)
	if q.Accept(tk.EOS()) || q.Done() {
		t.Errorf("NoStop: EOS ended the session")
	}
	if !q.Accept(word) || q.Finish != session.FinishStop {
		t.Errorf("NoStop: a stop token did not end it (%q)", q.Finish)
	}
	q = session.New(session.Request{ID: "len", Prompt: "Lily"}, tk, opts())
	for i := range 5 {
		if done := q.Accept(word); done != (i == 4) {
			t.Fatalf("token %d: done %v", i, done)
		}
	}
	if q.Finish != session.FinishLength || q.Generated() != 5 {
		t.Errorf("max new tokens: %q after %d", q.Finish, q.Generated())
	}
	if got := q.EndIDs(); !slices.Contains(got, tk.EOS()) || !slices.Contains(got, tk.BOS()) || !slices.IsSorted(got) {
		t.Errorf("EndIDs %v, want EOS and BOS, sorted", got)
	}
}

// Logits samples only at the sequence's last position, streams the token's
// text, and the processors (a bias) apply; Process never changes the row it
// is given, and reads the same however often it is called.
func TestLogitsAndProcessors(t *testing.T) {
	tk := tok512(t)
	var streamed []int32
	q := session.New(session.Request{ID: "p", Prompt: "Lily", LogitBias: map[int32]float32{300: -100},
		OnToken: func(tok int32, _ string) { streamed = append(streamed, tok) }}, tk, opts())
	row := onehot(300)
	row[301] = 5 // second best: what the bias leaves
	if err := q.Logits(0, row); err != nil || q.Generated() != 0 {
		t.Fatalf("a prompt position sampled: %v, %d generated", err, q.Generated())
	}
	last := int32(len(q.Tokens) - 1)
	if err := q.Logits(last, row); err != nil {
		t.Fatal(err)
	}
	if q.Tokens[len(q.Tokens)-1] != 301 || !slices.Equal(streamed, []int32{301}) {
		t.Errorf("took %d, streamed %v; the bias should leave 301", q.Tokens[len(q.Tokens)-1], streamed)
	}
	if row[300] != 10 {
		t.Errorf("the row was changed: %v", row[300])
	}
	a, _ := q.Process(row, q.Tokens)
	a0 := a[300]
	b, _ := q.Process(row, q.Tokens)
	if a0 != b[300] || b[300] != -90 {
		t.Errorf("processed twice: %v then %v, want -90 both times", a0, b[300])
	}
	plain := session.New(session.Request{ID: "q", Prompt: "Lily"}, tk, opts())
	if out, _ := plain.Process(row, plain.Tokens); &out[0] != &row[0] || plain.Processes() {
		t.Errorf("without processors Process copied the row")
	}
}

// A session's context ends it with finish reason cancelled or timeout.
func TestCheckContext(t *testing.T) {
	tk := tok512(t)
	ctx, cancel := context.WithCancel(context.Background())
	q := session.New(session.Request{ID: "c", Prompt: "Lily", Ctx: ctx}, tk, opts())
	if q.Check() {
		t.Fatal("done before its context ended")
	}
	cancel()
	if !q.Check() || q.Finish != session.FinishCancelled {
		t.Errorf("cancelled: %q", q.Finish)
	}
	o := opts()
	o.Timeout = time.Nanosecond
	q = session.New(session.Request{ID: "t", Prompt: "Lily"}, tk, o)
	time.Sleep(time.Millisecond)
	if !q.Check() || q.Finish != session.FinishTimeout {
		t.Errorf("timeout: %q", q.Finish)
	}
}

// FinishBeams ends a beam search with the best hypothesis as the text (its
// end-of-sequence token dropped, finish reason stop), streams it, and leaves
// Cached at the prompt: only the prompt is sure to be in the session's KV
// sequence, which held whichever beam it last followed.
func TestFinishBeams(t *testing.T) {
	tk := tok512(t)
	var streamed []int32
	q := session.New(session.Request{ID: "b", Prompt: "Lily", OnToken: func(tok int32, _ string) {
		if tok >= 0 {
			streamed = append(streamed, tok)
		}
	}}, tk, opts())
	q.SetGenerated([]int32{300, 301})
	q.Cached = len(q.Tokens)
	hyps := []beamsearch.Hypothesis{{Tokens: []int32{302, 303, tk.EOS()}, Score: -1}, {Tokens: []int32{300, 301}, Score: -2}}
	q.FinishBeams(hyps, q.Stops)
	if q.Finish != session.FinishStop || !slices.Equal(q.Tokens[q.NPrompt:], []int32{302, 303}) {
		t.Errorf("finish %q, tokens %v", q.Finish, q.Tokens[q.NPrompt:])
	}
	if q.Cached != q.NPrompt || !slices.Equal(streamed, []int32{302, 303}) {
		t.Errorf("Cached %d (prompt %d), streamed %v", q.Cached, q.NPrompt, streamed)
	}
	if n := session.CandidateTokens(tk, [][]int32{hyps[0].Tokens, hyps[1].Tokens}, nil); n != 4 {
		t.Errorf("CandidateTokens = %d, want 4 (the EOS not counted)", n)
	}
}
