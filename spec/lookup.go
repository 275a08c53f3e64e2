package spec

import "fmt"

// LookupOptions configure PromptLookup.
type LookupOptions struct {
	// MaxNgram and MinNgram bound the length of the suffix n-gram that is
	// matched; longer matches are tried first (HF prompt_lookup uses
	// max_matching_ngram_size down to 1). 1 ≤ MinNgram ≤ MaxNgram.
	MaxNgram, MinNgram int
	// NumDraft is the most tokens proposed (HF prompt_lookup_num_tokens).
	NumDraft int
}

// Validate reports the first bad field.
func (o LookupOptions) Validate() error {
	switch {
	case o.MinNgram < 1:
		return fmt.Errorf("%w: MinNgram = %d, want >= 1", ErrOptions, o.MinNgram)
	case o.MaxNgram < o.MinNgram:
		return fmt.Errorf("%w: MaxNgram = %d, want >= MinNgram (%d)", ErrOptions, o.MaxNgram, o.MinNgram)
	case o.NumDraft < 1:
		return fmt.Errorf("%w: NumDraft = %d, want >= 1", ErrOptions, o.NumDraft)
	}
	return nil
}

// PromptLookup is the model-free drafter of prompt-lookup decoding: text
// that repeats its prompt (code edits, summaries, quotes) is predicted by
// what followed the same words before. history is the prompt and the output
// so far. For n from MaxNgram down to MinNgram, it looks for the most recent
// earlier occurrence of the last n tokens (it may overlap the suffix, so a
// run "a a a" predicts more "a"), and appends to dst up to NumDraft tokens
// that followed it, stopping at the end of history. The first n with a match
// wins; with none, dst comes back unchanged. Where Hugging Face takes the
// earliest occurrence, this takes the latest, which tracks the text being
// written now.
//
// The proposals are verified like any draft: greedily, or by VerifyChain
// with q one-hot on each proposal (q(x) = 1), which accepts x with
// probability p(x) and resamples from p with x removed.
func PromptLookup(dst, history []int32, o LookupOptions) ([]int32, error) {
	if err := o.Validate(); err != nil {
		return dst, err
	}
	h := len(history)
	for n := min(o.MaxNgram, h-1); n >= o.MinNgram; n-- {
		suffix := history[h-n:]
		// Latest start j < h-n whose n tokens equal the suffix.
		for j := h - n - 1; j >= 0; j-- {
			if !equal(history[j:j+n], suffix) {
				continue
			}
			from := j + n
			to := min(from+o.NumDraft, h)
			return append(dst, history[from:to]...), nil
		}
	}
	return dst, nil
}

func equal(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
