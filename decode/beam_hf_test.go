package decode_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"

	"github.com/sluicehq/sluice/beamsearch"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/sluicehq/sluice"
)

// hfHyp is one sequence the transcription returns: generated ids (the
// end-of-sequence token included, as Hugging Face keeps it) and its score.
type hfHyp struct {
	ids   []int32
	score float64
}

// hfBeamSearch is our own transcription, written for this test, of Hugging
// Face transformers' vectorised GenerationMixin._beam_search as it stands at
// commit 000034a44ef887621d9b36001a5eb7c46e64cb3f of
// src/transformers/generation/utils.py (the post-v4.50 rewrite), for one
// prompt (batch 1), do_sample = False and no logits processor: fixed-shape
// state as HF keeps it — num_beams running beams where beams 1.. start at
// −1e9, num_beams finished slots at −1e9 with their is_sent_finished bits,
// the early-stop heuristic bit — and each step's blocks a to g as HF does
// them: top max(2, 1+len(eos))·k of the flattened beam×vocab scores
// (ties: the lower flattened index), stopping criteria (an eos id, or the
// length reaching max_new), the next running beams by topk with finished
// candidates pushed down by 1e9, the finished slots by topk over the old
// slots then the top-k candidates that just finished, scored sum/len^lp
// and pushed down by 1e9 when the slots are full under early_stopping=True,
// when the heuristic says no improvement, or when not just finished; then
// _check_early_stop_heuristic and _beam_search_has_unfinished_sequences.
// num_beams = 1 goes to greedy search, as generate sends it. It shares no
// code with package spec. Scores are accumulated in float64 from float32
// log-probabilities (torch would add in float32).
func hfBeamSearch(logprobs func([]int32) []float32, prompt []int32, k, numReturn int, lp float64, early string, eos []int32, maxNew int) []hfHyp {
	isEOS := func(t int32) bool { return slices.Contains(eos, t) }
	if k == 1 {
		var ids []int32
		var sum float64
		for len(ids) < maxNew {
			row := logprobs(append(slices.Clone(prompt), ids...))
			best := 0
			for j, v := range row {
				if v > row[best] {
					best = j
				}
			}
			ids, sum = append(ids, int32(best)), sum+float64(row[best])
			if isEOS(int32(best)) {
				break
			}
		}
		return []hfHyp{{ids: ids, score: sum / math.Pow(float64(len(ids)), lp)}}
	}
	const neg = -1.0e9
	keep := max(2, 1+len(eos)) * k
	running := make([][]int32, k)
	runScores := make([]float64, k)
	for i := 1; i < k; i++ {
		runScores[i] = neg
	}
	finIDs := make([][]int32, k)
	finScores := make([]float64, k)
	finDone := make([]bool, k)
	for i := range finScores {
		finScores[i] = neg
	}
	heurUnsat := true
	// topk returns the indices of the n largest values, ties to the lower index.
	topk := func(v []float64, n int) []int {
		idx := make([]int, len(v))
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] > v[idx[b]] })
		return idx[:n]
	}
	for cur := 0; ; {
		// a, b: log-probabilities of every running beam plus its score.
		var vocab int
		var acc []float64
		for i := range k {
			row := logprobs(append(slices.Clone(prompt), running[i]...))
			vocab = len(row)
			for _, v := range row {
				acc = append(acc, float64(v)+runScores[i])
			}
		}
		// c: the top `keep` continuations.
		top := topk(acc, keep)
		topScores := make([]float64, keep)
		topIDs := make([][]int32, keep)
		for c, fi := range top {
			topScores[c] = acc[fi]
			topIDs[c] = append(slices.Clone(running[fi/vocab]), int32(fi%vocab))
		}
		// d: which hit a stopping criterion.
		hits := make([]bool, keep)
		allHit := true
		for c := range keep {
			hits[c] = cur+1 >= maxNew || isEOS(topIDs[c][cur])
			allHit = allHit && hits[c]
		}
		// e: the next running beams.
		runVals := make([]float64, keep)
		for c := range keep {
			runVals[c] = topScores[c]
			if hits[c] {
				runVals[c] += neg
			}
		}
		next := topk(runVals, k)
		for i, c := range next {
			running[i], runScores[i] = topIDs[c], runVals[c]
		}
		// f: the finished slots.
		full := !slices.Contains(finDone, false)
		mergedScores := slices.Clone(finScores)
		mergedIDs := slices.Clone(finIDs)
		mergedDone := slices.Clone(finDone)
		for c := range keep {
			s := topScores[c] / math.Pow(float64(cur+1), lp)
			if full && early == "true" {
				s += neg
			}
			if !heurUnsat {
				s += neg
			}
			just := hits[c] && c < k
			if !just {
				s += neg
			}
			mergedScores = append(mergedScores, s)
			mergedIDs = append(mergedIDs, topIDs[c])
			mergedDone = append(mergedDone, just)
		}
		for i, m := range topk(mergedScores, k) {
			finScores[i], finIDs[i], finDone[i] = mergedScores[m], mergedIDs[m], mergedDone[m]
		}
		// g: the early-stop heuristic and the loop's condition.
		cur++
		bestLen := cur
		if early == "never" && lp > 0 {
			bestLen = maxNew
		}
		bestRunning := runScores[0] / math.Pow(float64(bestLen), lp)
		worst := slices.Min(finScores)
		improvable := false
		for i := range k {
			w := neg
			if finDone[i] {
				w = worst
			}
			improvable = improvable || bestRunning > w
		}
		heurUnsat = heurUnsat && improvable
		allDone := !slices.Contains(finDone, false)
		if !(heurUnsat && !(allDone && early == "true") && !allHit) {
			break
		}
	}
	out := make([]hfHyp, numReturn)
	for i := range out {
		out[i] = hfHyp{ids: finIDs[i], score: finScores[i]}
	}
	return out
}

// Must show 2 of issue 24: beam search in the engine on stories260K returns
// what the transcription of transformers' _beam_search returns, ids and
// scores, for every early_stopping mode and length penalty 1 and 0.5, with
// the default end-of-sequence set (stories260K's EOS and BOS, where plain
// decoding stops) and with a word's id added (Request.StopTokens, the
// CLI's --eos-id); a story's end stops the beams at BOS as it stops greedy
// decoding; num_beams 1 is greedy decoding in every mode.
func TestBeamSearchFollowsTransformers(t *testing.T) {
	l := enginetest.Stories(t, 2)
	plain := enginetest.Engine(t, l, enginetest.Pipeline(t, 0, 4, 64, 0))
	eng := enginetest.Beam(t, l, 9)
	cache := map[string][]float32{}
	logprobs := func(seq []int32) []float32 {
		key := fmt.Sprint(seq)
		if row, ok := cache[key]; ok {
			return row
		}
		var last []float32
		if _, err := plain.Complete(context.Background(), sluice.Request{Tokens: seq, MaxNewTokens: 1,
			OnLogits: func(_ int32, lg []float32) { last = slices.Clone(lg) }}); err != nil {
			t.Fatal(err)
		}
		cache[key] = logSoftmax(last)
		return cache[key]
	}
	greedy := func(prompt []int32, n int) sluice.Result {
		r, err := plain.Complete(context.Background(), sluice.Request{Tokens: prompt, MaxNewTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bos, eosID := l.Tokenizer.BOS(), l.Tokenizer.EOS()
	lily := []int32{bos, 317, 269} // BOS "Lily and"
	// The end of a story: greedy decoding stops at BOS within 20 tokens.
	ending := greedy([]int32{bos, 317}, 300)
	if ending.Finish != sluice.FinishStop || ending.CompletionTokens < 40 {
		t.Fatalf("greedy from %q: %s after %d tokens; the test needs a story that ends", "Lily", ending.Finish, ending.CompletionTokens)
	}
	storyEnd := ending.Tokens[:len(ending.Tokens)-15]
	word := greedy(lily, 8).Tokens[len(lily)+3] // the fourth word greedy writes

	type tc struct {
		name   string
		prompt []int32
		stops  []int32
		n      int
	}
	for _, c := range []tc{
		{"default-eos", lily, nil, 14},
		{"eos-id-word", lily, []int32{word}, 14},
		{"story-end-bos", storyEnd, nil, 30},
	} {
		eos := slices.Sorted(slices.Values(append([]int32{bos, eosID}, c.stops...)))
		want1 := greedy(c.prompt, c.n)
		for _, early := range []beamsearch.EarlyStopping{beamsearch.EarlyStopHeuristic, beamsearch.EarlyStopTrue, beamsearch.EarlyStopNever} {
			// num_beams 1: greedy decoding, its stop included.
			one, err := eng.Complete(context.Background(), sluice.Request{Tokens: c.prompt, StopTokens: c.stops, MaxNewTokens: c.n,
				Beam: &beamsearch.Options{NumBeams: 1, LengthPenalty: 1, EarlyStopping: early}})
			if err != nil {
				t.Fatal(err)
			}
			wantOne := want1
			if len(c.stops) > 0 {
				wantOne, err = plain.Complete(context.Background(), sluice.Request{Tokens: c.prompt, StopTokens: c.stops, MaxNewTokens: c.n})
				if err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(one.Tokens, wantOne.Tokens) || one.Finish != wantOne.Finish {
				t.Errorf("%s early_stopping=%s num_beams 1: %v (%s), greedy %v (%s)", c.name, early, one.Tokens[len(c.prompt):], one.Finish, wantOne.Tokens[len(c.prompt):], wantOne.Finish)
			}
			if ref := hfBeamSearch(logprobs, c.prompt, 1, 1, 1, early.String(), eos, c.n); !slices.Equal(ref[0].ids, wantOne.Tokens[len(c.prompt):]) && !slices.Equal(ref[0].ids[:len(ref[0].ids)-1], wantOne.Tokens[len(c.prompt):]) {
				t.Errorf("%s: the transcription's greedy %v, the engine's %v", c.name, ref[0].ids, wantOne.Tokens[len(c.prompt):])
			}
			lps := []float64{1, 0.5}
			if testing.Short() {
				lps = lps[:1] // -short (the race build): length penalty 1 alone
			}
			for _, lp := range lps {
				const k = 3
				name := fmt.Sprintf("%s early_stopping=%s length_penalty=%g", c.name, early, lp)
				got, err := eng.Complete(context.Background(), sluice.Request{Tokens: c.prompt, StopTokens: c.stops, MaxNewTokens: c.n,
					Beam: &beamsearch.Options{NumBeams: k, NumReturn: k, LengthPenalty: lp, EarlyStopping: early}})
				if err != nil {
					t.Fatal(err)
				}
				want := hfBeamSearch(logprobs, c.prompt, k, k, lp, early.String(), eos, c.n)
				if len(got.Beams) != k {
					t.Fatalf("%s: %d sequences, want %d", name, len(got.Beams), k)
				}
				for i, w := range want {
					g := got.Beams[i]
					if !slices.Equal(g.Tokens, w.ids) || g.Score != w.score {
						t.Errorf("%s: sequence %d %v score %v, transformers %v score %v", name, i, g.Tokens, g.Score, w.ids, w.score)
					}
				}
				if c.name == "story-end-bos" {
					// The best hypothesis ends at BOS, well before -n, as greedy
					// does; the request finishes with stop, BOS not in its text.
					if b := got.Beams[0].Tokens; len(b) >= c.n || b[len(b)-1] != bos || got.Finish != sluice.FinishStop || slices.Contains(got.Tokens[len(c.prompt):], bos) {
						t.Errorf("%s: best %v, finish %s: does not end at BOS", name, b, got.Finish)
					}
				}
				if c.name == "eos-id-word" && !slices.ContainsFunc(got.Beams, func(b sluice.BeamResult) bool { return b.Tokens[len(b.Tokens)-1] == word }) {
					t.Errorf("%s: no hypothesis ends at the word %d: %v", name, word, got.Beams)
				}
			}
		}
	}
}
