package decode_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/beamsearch"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/session"
)

// propertySchemas are the grammar package's property-test schemas.
func propertySchemas(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "grammar", "testdata", "property_schemas.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// submitAll submits every request at once and returns the results by index.
func submitAll(t *testing.T, e *sluice.Engine, reqs []sluice.Request) []sluice.Result {
	t.Helper()
	res := make([]sluice.Result, len(reqs))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Add(1)
		if err := e.Submit(context.Background(), req, func(r sluice.Result) { res[i] = r; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("request %d: %v", i, r.Err)
		}
	}
	return res
}

// Valid, always: every property-test schema at 3 seeds at temperature 0.8
// on stories260K (a model that has never seen JSON: the grammar writes it
// all), all requests in one continuous batch; every output that finished
// with stop validates under an independent validator, formats asserted.
// Outputs cut by max_tokens cannot be checked, so most must finish.
func TestGrammarValidAlways(t *testing.T) {
	l := enginetest.Stories(t, 1)
	e := enginetest.Plain(t, l, 0.8, 1)
	schemas := propertySchemas(t)
	if len(schemas) < 40 {
		t.Fatalf("%d schemas, want ≥ 40", len(schemas))
	}
	if testing.Short() {
		// The race, purego and simd builds check every fourth schema; the
		// default build all of them.
		var some []string
		for i := 0; i < len(schemas); i += 4 {
			some = append(some, schemas[i])
		}
		schemas = some
	}
	var reqs []sluice.Request
	for i, src := range schemas {
		for seed := range uint64(3) {
			reqs = append(reqs, sluice.Request{
				ID: fmt.Sprintf("s%d-%d", i, seed), Index: uint64(len(reqs)), Prompt: "Once upon a time", MaxNewTokens: 200,
				Sampling: &sample.Options{Temperature: 0.8, Seed: seed + 1},
				Grammar:  &grammar.Spec{Schema: []byte(src)},
			})
		}
	}
	res := submitAll(t, e, reqs)
	stopped := 0
	for i, r := range res {
		src := schemas[i/3]
		if r.Finish != sluice.FinishStop {
			continue
		}
		stopped++
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(r.Completion)))
		if err != nil {
			t.Errorf("schema %d seed %d: output is not JSON: %q: %v", i/3, i%3, r.Completion, err)
			continue
		}
		if err := testutil.Schema(t, src).Validate(inst); err != nil {
			t.Errorf("schema %d seed %d: output does not validate: %s\n%v", i/3, i%3, r.Completion, err)
		}
	}
	t.Logf("%d of %d outputs finished with stop and validate", stopped, len(res))
	if stopped < len(res)*2/3 {
		t.Errorf("only %d of %d outputs finished within 200 tokens", stopped, len(res))
	}
}

// sameTextSchema is the schema of the same-text tests: an object whose
// strings let the model choose, an enum, a bounded integer and an array.
const sameTextSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"mood":{"enum":["happy","sad","sleepy"]},"age":{"type":"integer","minimum":1,"maximum":99},"toys":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},"required":["name","mood","age","toys"],"additionalProperties":false}`

// forcedSchema has long runs of tokens the grammar forces: fixed keys, a
// const, an enum of long strings that share their first words (the forced
// run starts after the choice), and short free strings between them.
const forcedSchema = `{"type":"object","properties":{"record_type_identifier":{"const":"a bedtime story about a little dog"},"status":{"enum":["waiting for the approval of the whole committee","approved by the whole committee of the town"]},"hero":{"type":"string","maxLength":6},"tags":{"type":"array","items":{"enum":["once upon a time in a land far away","the end of the story"]},"minItems":1,"maxItems":2}},"required":["record_type_identifier","status","hero","tags"],"additionalProperties":false}`

// forcedGBNF is a grammar whose language is mostly fixed text.
const forcedGBNF = `root ::= "The little girl said: " ("yes, I would like to go to the park today" | "no, I want to stay at home with my mom") "." [ a-z]{0,6} " The end."`

// noJump turns jump-forward off in a pipeline (the baseline).
func noJump(p *pipelines.Pipeline) { p.Sampler().NoJumpForward = true }

// Same seed, same text under a constraint: plain decoding with
// jump-forward (forced runs fed as one span) and without (a pass per
// token), SpecExec (budgets 8 and 64, greedy and seeded, forced chains in
// the tree or drafted), chain and prompt lookup (greedy) give the text and
// the finish reason of plain decoding without jump-forward; 32 requests
// batched give each request's text alone; at 1 and 2 threads. Short
// max_tokens cut forced runs: the cut and its finish reason must match.
func TestGrammarSameText(t *testing.T) {
	specs := []*grammar.Spec{{Schema: []byte(sameTextSchema)}, {Schema: []byte(forcedSchema)}, {GBNF: forcedGBNF}}
	prompts := []string{"", "Lily and Tom"}
	var jobs []sluice.Request
	for _, spec := range specs {
		for _, pr := range prompts {
			jobs = append(jobs, sluice.Request{Prompt: pr, MaxNewTokens: 48, Grammar: spec})
			for s := range uint64(3) {
				jobs = append(jobs, sluice.Request{Prompt: pr, MaxNewTokens: 48, Grammar: spec, Sampling: &sample.Options{Temperature: 0.8, TopP: 0.95, Seed: s + 1}})
			}
		}
		// Lengths that end inside forced runs.
		for _, n := range []int{3, 7, 12} {
			jobs = append(jobs, sluice.Request{Prompt: "Lily", MaxNewTokens: n, Grammar: spec})
		}
	}
	for i := range jobs {
		jobs[i].ID, jobs[i].Index = fmt.Sprint(i), uint64(i)
	}
	greedy := func(rs []sluice.Request) []sluice.Request {
		return slices.DeleteFunc(slices.Clone(rs), func(r sluice.Request) bool { return r.Sampling != nil })
	}
	compare := func(name string, got, want []sluice.Result) {
		t.Helper()
		for i := range got {
			if got[i].Text != want[i].Text || got[i].Finish != want[i].Finish {
				t.Fatalf("%s: request %s:\n got %q (%s)\nwant %q (%s)", name, got[i].ID, got[i].Text, got[i].Finish, want[i].Text, want[i].Finish)
			}
		}
	}
	jumped := func(rs []sluice.Result) (n int) {
		for _, r := range rs {
			n += r.JumpedTokens
		}
		return n
	}
	threadCounts, budgets := []int{1, 2}, []int{8, 64}
	if testing.Short() {
		threadCounts, budgets = []int{1}, []int{8} // the whole grid in the default build
	}
	for _, threads := range threadCounts {
		l := enginetest.Stories(t, threads)
		plain := func(inFlight int, edit func(*pipelines.Pipeline)) *sluice.Engine {
			p := pipelines.Greedy()
			p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = inFlight, 32
			if edit != nil {
				edit(p)
			}
			return enginetest.Engine(t, l, p)
		}
		want := submitAll(t, plain(16, noJump), jobs)
		if n := jumped(want); n != 0 {
			t.Fatalf("jump-forward off, yet %d tokens were jumped", n)
		}
		finished := map[string]int{}
		for _, r := range want {
			finished[r.Finish]++
			if c := r.Completion; !strings.HasPrefix(c, `{"`) && !strings.HasPrefix(c, "The little girl said: "[:min(len(c), 22)]) {
				t.Fatalf("the output does not follow the constraint: %q", c)
			}
		}
		if finished[sluice.FinishStop] == 0 || finished[sluice.FinishLength] == 0 {
			t.Fatalf("finish reasons %v: want both stop and length among the cases", finished)
		}
		compare(fmt.Sprintf("plain jump-forward threads %d", threads), submitAll(t, plain(16, nil), jobs), want)
		// One request at a time, the scheduler's steps are the target
		// passes: jump-forward saves one per jumped token.
		e, base := plain(1, nil), plain(1, noJump)
		got := submitAll(t, e, jobs)
		compare(fmt.Sprintf("plain jump-forward one at a time threads %d", threads), got, want)
		submitAll(t, base, jobs)
		n, steps, baseSteps := jumped(got), e.Stats().Steps, base.Stats().Steps
		t.Logf("plain: %d forced tokens jumped; %d target passes, %d without jump-forward", n, steps, baseSteps)
		if n == 0 || steps != baseSteps-int64(n) {
			t.Errorf("plain jump-forward: %d tokens jumped, %d target passes against %d without: want %d", n, steps, baseSteps, baseSteps-int64(n))
		}
		byID := func(rs []sluice.Result) map[string]sluice.Result {
			m := map[string]sluice.Result{}
			for _, r := range rs {
				m[r.ID] = r
			}
			return m
		}
		wantID := byID(want)
		for _, budget := range budgets {
			var passes [2]float64
			for k, edit := range []func(*pipelines.Pipeline){nil, noJump} {
				e := enginetest.SpecEdit(t, "specexec", 0, 0, budget, threads, edit)
				name := fmt.Sprintf("specexec budget %d threads %d jump-forward %v", budget, threads, edit == nil)
				rs := submitAll(t, e, jobs)
				compare(name, rs, want)
				st := e.SpecStats()
				if st.Rounds == 0 || st.TokensPerPass() <= 1 {
					t.Errorf("%s: %.2f tokens per target pass: the draft did nothing", name, st.TokensPerPass())
				}
				if (st.ForcedNodes > 0) != (edit == nil) || st.ForcedMissed != 0 {
					t.Errorf("%s: %d forced draft nodes, %d of them missed by the target", name, st.ForcedNodes, st.ForcedMissed)
				}
				var toks int
				for _, r := range rs {
					toks += r.CompletionTokens
				}
				passes[k] = float64(st.DraftPasses) / float64(toks)
				t.Logf("%s: %.2f tokens per verifying pass, %.3f draft passes per token, %d forced nodes", name, st.TokensPerPass(), passes[k], st.ForcedNodes)
				e.Close()
			}
			// Draft passes are batched across sessions, so their count
			// depends on which sessions shared a step: logged, not held.
			t.Logf("specexec budget %d: %.3f draft passes per token with jump-forward, %.3f without", budget, passes[0], passes[1])
		}
		for _, mode := range []string{"chain", "lookup"} {
			for _, edit := range []func(*pipelines.Pipeline){nil, noJump} {
				var e *sluice.Engine
				if mode == "chain" {
					e = enginetest.SpecEdit(t, "chain", 0, 0, 0, threads, edit)
				} else {
					e = enginetest.LookupEdit(t, l, edit)
				}
				got := submitAll(t, e, greedy(jobs))
				var w []sluice.Result
				for _, r := range got {
					w = append(w, wantID[r.ID])
				}
				compare(fmt.Sprintf("%s threads %d jump-forward %v", mode, threads, edit == nil), got, w)
				if st := e.SpecStats(); st.ForcedMissed != 0 || (st.ForcedNodes > 0) != (edit == nil) {
					t.Errorf("%s jump-forward %v: %d forced draft tokens, %d missed by the target", mode, edit == nil, st.ForcedNodes, st.ForcedMissed)
				}
				e.Close()
			}
		}
		// 32 requests in one batch against each alone, with jump-forward,
		// and against the batch without it.
		for k, spec := range specs {
			p := enginetest.Pipeline(t, 0.8, 32, 0, 0)
			batched := enginetest.Engine(t, l, p)
			p = enginetest.Pipeline(t, 0.8, 32, 0, 0)
			noJump(p)
			batchedNoJump := enginetest.Engine(t, l, p)
			var reqs []sluice.Request
			for i, pr := range enginetest.Prompts32() {
				reqs = append(reqs, sluice.Request{ID: fmt.Sprint(i), Index: uint64(i), Prompt: pr, MaxNewTokens: 40, Grammar: spec})
			}
			all := submitAll(t, batched, reqs)
			compare(fmt.Sprintf("threads %d constraint %d: 32 batched, with and without jump-forward", threads, k), all, submitAll(t, batchedNoJump, reqs))
			for i, r := range reqs {
				if testing.Short() && i%8 != 0 {
					continue
				}
				alone := submitAll(t, batched, []sluice.Request{r})
				if alone[0].Text != all[i].Text || alone[0].Finish != all[i].Finish {
					t.Fatalf("threads %d constraint %d: request %d batched:\n %q (%s)\nalone:\n %q (%s)", threads, k, i, all[i].Text, all[i].Finish, alone[0].Text, alone[0].Finish)
				}
			}
		}
	}
}

// The constrained distribution: 10^5 draws of the first token under a small
// grammar through the session's own draw (Session.Sample: processors, then
// the sampler with its keyed uniform), against the model's distribution at
// temperature 0.8 renormalised over the tokens the grammar allows (each
// decided by Advance, not by the mask). A mask that lets a wrong token in or
// keeps a right one out fails.
func TestGrammarDistribution(t *testing.T) {
	testutil.SkipRace(t, "the chi-square test of masked draws")
	l := enginetest.Stories(t, 1)
	e := enginetest.Plain(t, l, 0, 0)
	const prompt = "Once upon a time, there was a"
	var row []float32
	ptoks := e.Encode(prompt)
	_, err := e.Complete(context.Background(), sluice.Request{Prompt: prompt, MaxNewTokens: 1, OnLogits: func(pos int32, logits []float32) {
		if int(pos) == len(ptoks)-1 {
			row = slices.Clone(logits)
		}
	}})
	if err != nil || row == nil {
		t.Fatalf("no logits: %v", err)
	}
	g := &grammar.Spec{GBNF: `root ::= (" little" | " big" | " girl" | " boy" | " dog" | " l" [a-z]*) "."`}
	m, err := e.Grammars().Matcher(*g)
	if err != nil {
		t.Fatal(err)
	}
	const temp = 0.8
	exp := make([]float64, len(row))
	var z float64
	allowed := 0
	for tok := range int32(len(row)) {
		if _, ok := m.Advance(m.Start(), tok); ok {
			exp[tok] = math.Exp(float64(row[tok]) / temp)
			z += exp[tok]
			allowed++
		}
	}
	if allowed < 4 {
		t.Fatalf("the grammar allows %d first tokens: too few to test", allowed)
	}
	const n = 100_000
	for i := range exp {
		exp[i] *= n / z
	}
	draw := func(mask bool) []int {
		obs := make([]int, len(row))
		o := session.Options{Sampling: sample.Options{Temperature: temp, Seed: 9}, Context: 256, Grammars: e.Grammars()}
		for r := range n {
			req := session.Request{ID: "d", Index: uint64(r), Tokens: ptoks}
			if mask {
				req.Grammar = g
			}
			s := session.New(req, e.Loaded().Tokenizer, o)
			if s.Err != nil {
				t.Fatal(s.Err)
			}
			tok, err := s.Sample(row, s.Tokens)
			if err != nil {
				t.Fatal(err)
			}
			obs[tok]++
		}
		return obs
	}
	x, df := chiSquareBins(draw(true), exp)
	crit := chiSquareCritical(df)
	t.Logf("%d allowed tokens: chi-square %.1f with %d df (critical at 0.001: %.1f)", allowed, x, df, crit)
	if x > crit {
		t.Errorf("chi-square %.1f with %d df exceeds %.1f: the draws do not follow the masked distribution", x, df, crit)
	}
	// The test can fail: unmasked draws are far off the masked distribution.
	if x, df := chiSquareBins(draw(false), exp); x <= 10*chiSquareCritical(df) {
		t.Errorf("unmasked draws pass the test (chi-square %.1f with %d df): it cannot tell a wrong mask", x, df)
	}
}

// chiSquareBins is Σ (obs-exp)²/exp over the tokens expected at least 5
// times, the rest pooled in one bin (which holds every draw of a token of
// expectation 0); df is the number of bins less one.
func chiSquareBins(obs []int, exp []float64) (float64, int) {
	var x, restE float64
	restO, bins := 0, 0
	for i, e := range exp {
		if e >= 5 {
			d := float64(obs[i]) - e
			x += d * d / e
			bins++
		} else {
			restE += e
			restO += obs[i]
		}
	}
	if restO > 0 || restE > 0 {
		e := max(restE, 1e-9)
		d := float64(restO) - restE
		x += d * d / e
		bins++
	}
	return x, bins - 1
}

// chiSquareCritical is the 0.999 quantile of chi-square with df degrees of
// freedom (Wilson–Hilferty).
func chiSquareCritical(df int) float64 {
	k := float64(max(df, 1))
	c := 1 - 2/(9*k) + 3.09*math.Sqrt(2/(9*k))
	return k * c * c * c
}

// Beams extend only along valid tokens: every hypothesis of a beam search
// under a schema is a prefix of the language, complete where it ended with
// an end token.
func TestGrammarBeams(t *testing.T) {
	l := enginetest.Stories(t, 1)
	e := enginetest.Beam(t, l, 4)
	g := &grammar.Spec{Schema: []byte(sameTextSchema)}
	r, err := e.Complete(context.Background(), sluice.Request{Prompt: "Lily", Grammar: g,
		Beam: &beamsearch.Options{NumBeams: 3, NumReturn: 3, MaxNewTokens: 40}})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Grammars().Matcher(*g)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Beams) == 0 {
		t.Fatal("no hypotheses")
	}
	for _, h := range r.Beams {
		s := m.Start()
		for i, tok := range h.Tokens {
			var ok bool
			if s, ok = m.Advance(s, tok); !ok {
				t.Fatalf("hypothesis %q takes token %d (%d) outside the grammar", h.Text, i, tok)
			}
		}
		if !strings.HasPrefix(h.Text, `{"name":"`) {
			t.Errorf("hypothesis %q", h.Text)
		}
	}
}

// A pipeline's sample params may carry a default schema: requests without
// a constraint of their own follow it; one with its own follows that.
func TestGrammarPipelineDefault(t *testing.T) {
	l := enginetest.Stories(t, 1)
	p := enginetest.Pipeline(t, 0, 4, 0, 0)
	p.Sampler().JSONSchema = sameTextSchema
	if err := p.Sampler().Validate(); err != nil {
		t.Fatal(err)
	}
	e := enginetest.Engine(t, l, p)
	res := submitAll(t, e, []sluice.Request{
		{ID: "default", Prompt: "Lily", MaxNewTokens: 80},
		{ID: "own", Prompt: "Lily", MaxNewTokens: 20, Grammar: &grammar.Spec{GBNF: `root ::= "no"`}},
	})
	if res[0].Finish != sluice.FinishStop {
		t.Fatalf("default: %q finished with %s", res[0].Completion, res[0].Finish)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(res[0].Completion))
	if err != nil {
		t.Fatalf("default: %q: %v", res[0].Completion, err)
	}
	if err := testutil.Schema(t, sameTextSchema).Validate(inst); err != nil {
		t.Errorf("default: %q: %v", res[0].Completion, err)
	}
	if res[1].Completion != "no" || res[1].Finish != sluice.FinishStop {
		t.Errorf("own grammar: %q (%s)", res[1].Completion, res[1].Finish)
	}
}

// best_of under a schema: every candidate is drawn through the request's
// processor (one trie for all of them), and the best one validates.
func TestGrammarBestOf(t *testing.T) {
	l := enginetest.Stories(t, 1)
	e := enginetest.Plain(t, l, 0.8, 3)
	res := submitAll(t, e, []sluice.Request{{ID: "b", Prompt: "Lily", MaxNewTokens: 80, BestOf: 4,
		Sampling: &sample.Options{Temperature: 0.8, Seed: 3}, Grammar: &grammar.Spec{Schema: []byte(sameTextSchema)}}})
	r := res[0]
	if len(r.Beams) != 4 {
		t.Fatalf("%d candidates, want 4", len(r.Beams))
	}
	m, err := e.Grammars().Matcher(grammar.Spec{Schema: []byte(sameTextSchema)})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range r.Beams {
		s := m.Start()
		for _, tok := range h.Tokens {
			var ok bool
			if s, ok = m.Advance(s, tok); !ok {
				t.Fatalf("candidate %q leaves the grammar at token %d", h.Text, tok)
			}
		}
	}
	if r.Finish == sluice.FinishStop {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(r.Completion))
		if err != nil {
			t.Fatalf("%q: %v", r.Completion, err)
		}
		if err := testutil.Schema(t, sameTextSchema).Validate(inst); err != nil {
			t.Errorf("%q: %v", r.Completion, err)
		}
	}
}
