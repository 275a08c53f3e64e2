package tokenizer

import "slices"

// End of generation. A model may end its turn with another token than EOS:
// Llama 3 with <|eot_id|> (and <|eom_id|> after a tool call), ChatML models
// with <|im_end|>, Gemma with <end_of_turn>. llama.cpp derives the set of
// end-of-generation (EOG) tokens from the vocabulary's texts and a few GGUF
// keys (llama_vocab::load); this file does the same, so that generation stops
// where llama.cpp's stops.

// eogTexts are the token texts llama.cpp puts in the EOG set.
var eogTexts = []string{
	"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
	"<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
	"<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
	"<｜end▁of▁sentence｜>", "[e~[",
}

// The texts llama.cpp looks for to find the end-of-turn, end-of-message and
// the fill-in-the-middle pad, repo and file-separator tokens when their GGUF
// keys are absent; the last three join the EOG set.
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	// fimOtherTexts are the prefix/suffix/middle texts: not EOG, but made
	// control tokens like the others.
	fimOtherTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
		"<|code_prefix|>", "<|prefix|>", "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
		"▁<SUF>", "<|code_suffix|>", "<|suffix|>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>",
		"<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
)

// eogKeys are the optional GGUF keys naming EOG members.
const (
	keyEOT    = "tokenizer.ggml.eot_token_id"
	keyEOM    = "tokenizer.ggml.eom_token_id"
	keyFIMPad = "tokenizer.ggml.fim_pad_token_id"
	keyFIMRep = "tokenizer.ggml.fim_rep_token_id"
	keyFIMSep = "tokenizer.ggml.fim_sep_token_id"
)

// eogSet computes the EOG ids of a vocabulary as llama.cpp does: the tokens
// with an EOG text, EOS, the end-of-turn and end-of-message tokens and the
// FIM pad, repo and separator tokens (keyed ids, given as -1 when absent, or
// found by text); then, as llama.cpp's workarounds, "<|end|>" leaves the set
// when "<|return|>" and "<|call|>" (or "<|calls|>" and "<|flush|>") are in it,
// and "</s>" when "<|tool_response>" is. The result is sorted.
//
// It also returns the ids llama.cpp turns into control tokens: every token it
// found by text this way that was not already one.
func eogSet(pieces []string, types []TokenType, eos int32, keyed map[string]int32) (eog, makeControl []int32) {
	first := func(key string, texts []string) int32 {
		if id, ok := keyed[key]; ok && id >= 0 {
			return id
		}
		for id, p := range pieces {
			if slices.Contains(texts, p) {
				makeControl = append(makeControl, int32(id))
				return int32(id)
			}
		}
		return -1
	}
	eot := first(keyEOT, eotTexts)
	eom := first(keyEOM, eomTexts)
	set := map[int32]bool{}
	for _, id := range []int32{first(keyFIMPad, fimPadTexts), first(keyFIMRep, fimRepTexts), first(keyFIMSep, fimSepTexts), eos, eot, eom} {
		if id >= 0 {
			set[id] = true
		}
	}
	byText := map[string]int32{}
	for id, p := range pieces {
		if slices.Contains(eogTexts, p) {
			set[int32(id)] = true
			makeControl = append(makeControl, int32(id))
			byText[p] = int32(id)
		}
		if slices.Contains(fimOtherTexts, p) {
			makeControl = append(makeControl, int32(id))
		}
	}
	in := func(text string) bool {
		id, ok := byText[text]
		return ok && set[id]
	}
	if end, ok := byText["<|end|>"]; ok && ((in("<|return|>") && (in("<|call|>") || in("<|calls|>"))) || ((in("<|call|>") || in("<|calls|>")) && in("<|flush|>"))) {
		delete(set, end)
	}
	if s, ok := byText["</s>"]; ok && in("<|tool_response>") {
		delete(set, s)
	}
	for id := range set {
		if int(id) < len(pieces) {
			eog = append(eog, id)
		}
	}
	slices.Sort(eog)
	makeControl = slices.DeleteFunc(makeControl, func(id int32) bool { return types != nil && types[id] == TypeControl })
	slices.Sort(makeControl)
	return eog, slices.Compact(makeControl)
}

// eogKeyIDs reads the optional EOG keys of a GGUF file (an id outside the
// vocabulary is ignored, as llama.cpp ignores it with a warning).
func eogKeyIDs(m ggufMeta, n int) map[string]int32 {
	out := map[string]int32{}
	for _, k := range []string{keyEOT, keyEOM, keyFIMPad, keyFIMRep, keyFIMSep} {
		if u, ok := m.f.Uint(k); ok && u < uint64(n) {
			out[k] = int32(u)
		}
	}
	return out
}

// EOG returns the end-of-generation token ids, sorted: the ids after which
// generation stops, as llama.cpp's llama_vocab_is_eog decides.
func (v *vocab) EOG() []int32 { return slices.Clone(v.eog) }

// IsEOG reports whether id ends generation.
func (v *vocab) IsEOG(id int32) bool {
	_, ok := slices.BinarySearch(v.eog, id)
	return ok
}

// EOGer is implemented by the tokenizers of this package.
type EOGer interface {
	EOG() []int32
	IsEOG(id int32) bool
}

var _ EOGer = (*BPE)(nil)
var _ EOGer = (*SPM)(nil)

// IsEOG reports whether id ends generation for t: its EOG set when t has
// one, else id == EOS.
func IsEOG(t Tokenizer, id int32) bool {
	if e, ok := t.(EOGer); ok {
		return e.IsEOG(id)
	}
	return id >= 0 && id == t.EOS()
}
