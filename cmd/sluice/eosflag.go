package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// eosIDs is --eos-id, repeatable: token ids that end a sequence besides the
// model's own end-of-generation tokens, as the ids of Hugging Face's
// eos_token_id list do. They go to every request's StopTokens, so plain and
// speculative decoding stop on them (the stop token is not part of the
// completion) and beam search finishes a hypothesis on them; like a chat
// template's stop tokens they apply under stop_at_eos = false too (bench),
// as vLLM's stop_token_ids do under ignore_eos.
type eosIDs []int32

func (e *eosIDs) String() string {
	s := make([]string, len(*e))
	for i, id := range *e {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

func (e *eosIDs) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if err != nil || v < 0 {
		return fmt.Errorf("%q: want a token id (a non-negative integer)", s)
	}
	*e = append(*e, int32(v))
	return nil
}

func addEOSFlag(fs *flag.FlagSet) *eosIDs {
	e := new(eosIDs)
	fs.Var(e, "eos-id", "token `ID` that ends a sequence besides the model's end-of-generation tokens (repeatable; as Hugging Face's eos_token_id), for plain, speculative and beam decoding")
	return e
}

// check refuses an id outside a vocabulary of n tokens: plain decoding would
// never meet it, and a beam search could not rank it.
func (e eosIDs) check(vocab int) error {
	for _, id := range e {
		if int(id) >= vocab {
			return fmt.Errorf("--eos-id %d: the vocabulary has %d tokens (ids 0 to %d): %w", id, vocab, vocab-1, errUsage)
		}
	}
	return nil
}

// stops returns base with the ids appended (a new slice: base may be shared).
func (e eosIDs) stops(base []int32) []int32 {
	if len(e) == 0 {
		return base
	}
	return append(append([]int32(nil), base...), e...)
}
