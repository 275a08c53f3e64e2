package decode_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sample"
)

// banEvery is a processor that bans one token wherever it could be drawn and
// keeps the histories it was called with.
type banEvery struct {
	tok   int32
	calls *[][]int32
}

func (b banEvery) Process(logits []float32, history []int32) error {
	*b.calls = append(*b.calls, slices.Clone(history))
	if len(history) == 0 {
		return fmt.Errorf("processor called without history")
	}
	logits[b.tok] = float32(negInf)
	return nil
}

var negInf = -1 / zero()

func zero() float64 { return 0 }

// Logits processors apply identically in every strategy: with the same bias
// and processor, plain, SpecExec (its draft rows processed too), chain and
// prompt-lookup decoding give the same text, greedy and (plain vs SpecExec)
// seeded; the banned tokens never appear, in beams either; and the bias
// changes the text, so the test measures something.
func TestProcessorsEveryStrategy(t *testing.T) {
	l := enginetest.Stories(t, 1)
	const prompt = "Lily and Tom"
	plain := enginetest.Plain(t, l, 0, 0)
	free, err := plain.Complete(context.Background(), sluice.Request{Prompt: prompt})
	if err != nil {
		t.Fatal(err)
	}
	gen := free.Tokens[free.PromptTokens:]
	if len(gen) < 4 {
		t.Fatalf("the unconstrained text is too short to test with: %q", free.Text)
	}
	// Ban the first generated token by a processor and bias the third one
	// away: the constrained text must differ and contain neither.
	ban, biased := gen[0], gen[2]
	req := func(calls *[][]int32, sampling *sample.Options) sluice.Request {
		return sluice.Request{Prompt: prompt, Sampling: sampling,
			LogitBias:  map[int32]float32{biased: -100},
			Processors: []sample.Processor{banEvery{tok: ban, calls: calls}}}
	}
	check := func(name string, r sluice.Result) {
		t.Helper()
		for _, tok := range r.Tokens[r.PromptTokens:] {
			if tok == ban || tok == biased {
				t.Errorf("%s: generated the banned token %d: %q", name, tok, r.Text)
			}
		}
	}
	var plainCalls [][]int32
	want, err := plain.Complete(context.Background(), req(&plainCalls, nil))
	if err != nil {
		t.Fatal(err)
	}
	check("plain", want)
	if want.Text == free.Text {
		t.Fatalf("the processors changed nothing: %q", want.Text)
	}
	for _, mode := range []string{"specexec", "chain", "lookup"} {
		var e *sluice.Engine
		switch mode {
		case "lookup":
			e = enginetest.Lookup(t, l)
		default:
			e = enginetest.Spec(t, mode, 0, 0, 16, 1)
		}
		var calls [][]int32
		got, err := e.Complete(context.Background(), req(&calls, nil))
		if err != nil {
			t.Fatal(err)
		}
		check(mode, got)
		if got.Text != want.Text {
			t.Errorf("%s greedy with processors:\n %q\nplain:\n %q", mode, got.Text, want.Text)
		}
		// The target processes rows along the text it accepts; only a
		// processed draft row has a history off it (a rejected branch).
		off := 0
		for _, h := range calls {
			if len(h) > len(got.Tokens) || !slices.Equal(h, got.Tokens[:len(h)]) {
				off++
			}
		}
		if mode == "specexec" && off == 0 {
			t.Errorf("specexec: none of the processor's %d calls was off the accepted text: the draft's rows were not processed", len(calls))
		}
	}
	// Seeded sampling: SpecExec's text is plain decoding's, bias included.
	so := &sample.Options{Temperature: 0.8, TopP: 0.95, Seed: 5}
	var c1, c2 [][]int32
	ws, err := enginetest.Plain(t, l, 0.8, 5).Complete(context.Background(), req(&c1, so))
	if err != nil {
		t.Fatal(err)
	}
	check("plain seeded", ws)
	gs, err := enginetest.Spec(t, "specexec", 0.8, 5, 16, 1).Complete(context.Background(), req(&c2, so))
	if err != nil {
		t.Fatal(err)
	}
	if gs.Text != ws.Text {
		t.Errorf("specexec seeded with processors:\n %q\nplain:\n %q", gs.Text, ws.Text)
	}
	// Beams: no hypothesis takes a banned token.
	be := enginetest.Beam(t, l, 4)
	var bc [][]int32
	r := req(&bc, nil)
	r.Beam = &beamsearch.Options{NumBeams: 3, NumReturn: 3, MaxNewTokens: 12}
	br, err := be.Complete(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range br.Beams {
		if slices.Contains(h.Tokens, ban) || slices.Contains(h.Tokens, biased) {
			t.Errorf("beam %v takes a banned token (%d or %d)", h.Tokens, ban, biased)
		}
	}
	if len(bc) == 0 {
		t.Errorf("beam search never called the processor")
	}
}
