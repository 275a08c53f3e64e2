package decode_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model"
	_ "github.com/sluicehq/sluice/model/llama"
)

func loadStories(t *testing.T, tb ...testing.TB) *model.Loaded {
	var h testing.TB = t
	if t == nil {
		h = tb[0]
	}
	t2 := h
	dir := filepath.Join(testutil.Models(t2), "stories260K")
	l, err := model.Load(t2.Context(), model.LoadOptions{
		Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: filepath.Join(dir, "tok512.bin"), Threads: 1,
	})
	if err != nil {
		t2.Fatal(err)
	}
	t2.Cleanup(func() { l.Close() })
	return l
}

// With the KV cache, each step computes only the new token; without it, every
// step recomputes the whole prefix. Both must give the same tokens and, since
// the kernels are batch-invariant, bit-identical logits.
func TestCacheEqualsRecompute(t *testing.T) {
	l := loadStories(t)
	const n = 48
	var cached [][]float32
	eng, err := decode.New(l, decode.Options{AddBOS: true, MaxNewTokens: n, PrefillChunk: 1,
		OnLogits: func(_ *decode.Seq, _ int32, lg []float32) { cached = append(cached, slices.Clone(lg)) }})
	if err != nil {
		t.Fatal(err)
	}
	s := eng.Generate(t.Context(), decode.Request{Prompt: "Once"})
	if s.Err != nil {
		t.Fatal(s.Err)
	}
	if s.Generated() != n {
		t.Fatalf("generated %d tokens, want %d", s.Generated(), n)
	}

	// Full recompute: a fresh cache each step, the whole prefix in one chunk.
	toks := s.Tokens
	for step := s.NPrompt; step < len(toks); step++ {
		e2, err := decode.New(l, decode.Options{PrefillChunk: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e2.Plan(t.Context(), e2.Start(decode.Request{Tokens: toks[:step]}))
		if err != nil {
			t.Fatal(err)
		}
		if err := e2.Forward(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		if st.Batch.Len() != step {
			t.Fatalf("recompute batch has %d rows, want %d", st.Batch.Len(), step)
		}
		last := st.Logits
		want := cached[step-s.NPrompt]
		for i := range want {
			if math.Float32bits(want[i]) != math.Float32bits(last[i]) {
				t.Fatalf("step %d: logit %d: cached %v, recomputed %v", step, i, want[i], last[i])
			}
		}
		if argmax(last) != toks[step] {
			t.Fatalf("step %d: recompute picks %d, cached generation picked %d", step, argmax(last), toks[step])
		}
	}
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

func TestGenerateStopsAndCounts(t *testing.T) {
	l := loadStories(t)
	eng, err := decode.New(l, decode.Options{AddBOS: true, MaxNewTokens: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := eng.Generate(context.Background(), decode.Request{Prompt: "Lily and Tom"})
	if s.Err != nil || s.Finish != decode.FinishLength || s.Generated() != 10 || s.NPrompt != 5 {
		t.Fatalf("got err=%v finish=%q generated=%d prompt=%d", s.Err, s.Finish, s.Generated(), s.NPrompt)
	}
	full, prompt, done := decode.Text(l.Tokenizer, s.Tokens), decode.Text(l.Tokenizer, s.Tokens[:s.NPrompt]), decode.Completion(l.Tokenizer, s)
	if prompt != "Lily and Tom" || full != prompt+done || done == "" {
		t.Fatalf("text %q = prompt %q + completion %q?", full, prompt, done)
	}
	long := make([]byte, 0, 4000)
	for range 1000 {
		long = append(long, " the"...)
	}
	s = eng.Generate(context.Background(), decode.Request{Prompt: string(long)})
	if s.Err == nil || s.Finish != decode.FinishError {
		t.Fatalf("a prompt longer than the context: err=%v finish=%q, want an error", s.Err, s.Finish)
	}
}
