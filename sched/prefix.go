package sched

import (
	"fmt"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/session"
)

// Prefix caching (Options.PrefixCache, see kvcache's prefix.go). The
// scheduler does three things with it, all between steps:
//
//   - admit maps a new session's cached prompt prefix into its KV sequence
//     and starts its prefill after it (q.Cached, q.CachedTokens);
//   - admit publishes, before it admits anyone, the full pages every active
//     session has computed so far, so that a session admitted while another
//     is still generating maps the prompt they share; release publishes a
//     finished session's pages (generated tokens too: a chat's next turn
//     repeats the last answer) before freeing its sequence, whose indexed
//     pages then stay cached;
//   - a queued session whose prompt shares pages with an active session's
//     prompt that are not computed yet is held back until they are, instead
//     of computing them a second time in the same steps (vLLM and SGLang
//     likewise let one request compute a shared prefix first). It does not
//     wait for a session that has finished its prompt: nothing more of the
//     shared part is coming.
//
// What the cache maps is exactly what recomputing would write: the kernels
// fix every output element's reduction order by shape alone (batch
// invariance), so a row's keys and values depend only on the tokens up to
// it, the weights (the model, its adapter set) and the KV element type, and
// those are the salt of a page's key. A session's own logits then come out
// bit-identical with or without the cache.

// salt is what, besides the tokens, determines q's keys and values: the
// model, the KV element type and the LoRA adapter set (a name always names
// the same weights: model.Adaptable refuses a name twice).
// It is made once per session (s.salts), so that publishing in a decode
// step allocates nothing. s.mu held.
func (s *Scheduler) salt(q *session.Session) []byte {
	b, ok := s.salts[q]
	if !ok {
		b = fmt.Appendf(nil, "model=%q kv=%v adapter=%q", s.o.ModelID, s.o.KVType, q.Req.Adapter)
		s.salts[q] = b
	}
	return b
}

// prefixable reports whether q may start from cached pages: requests that
// want logits at every prompt position (perplexity) compute them all.
func (s *Scheduler) prefixable(q *session.Session) bool {
	return s.o.PrefixCache && !q.Req.AllLogits
}

// mapPrefix starts q's KV sequence with its cached prompt prefix. A
// failure (q's sequence was not empty: a bug) fails q alone. s.mu held.
func (s *Scheduler) mapPrefix(q *session.Session) {
	if !s.prefixable(q) {
		return
	}
	n, err := s.Cache.MapPrefix(q.Seq, s.salt(q), q.Tokens[:q.NPrompt])
	if err != nil {
		q.Fail(fmt.Errorf("sched: request %s: %w", q.Req.ID, err))
		return
	}
	q.Cached, q.CachedTokens = int(n), int(n)
}

// publish indexes the full pages of q's KV history (s.mu held): its first q.Cached
// tokens, which every decoding strategy keeps in q's sequence (one that
// ends a session with tokens its sequence does not hold, as beam search and
// best_of do, leaves Cached at the prompt: session.FinishBeams).
func (s *Scheduler) publish(q *session.Session) {
	if !s.o.PrefixCache || q.Seq < 0 {
		return
	}
	s.Cache.Publish(q.Seq, s.salt(q), q.Tokens[:min(q.Cached, len(q.Tokens))])
}

// publishActive publishes what the active sessions computed since the last
// step. s.mu held.
func (s *Scheduler) publishActive() {
	for _, q := range s.active {
		s.publish(q)
	}
}

// promptKeys is q's mappable prompt pages' keys, computed once per session.
// s.mu held.
func (s *Scheduler) promptKeys(q *session.Session) []kvcache.PrefixKey {
	k, ok := s.keys[q]
	if !ok {
		k = kvcache.PrefixKeys(s.salt(q), q.Tokens[:q.NPrompt], s.Cache.Options().PageTokens)
		s.keys[q] = k
	}
	return k
}

// waits reports whether q should stay held: an active session is still
// computing prompt pages q could map once they are done. s.mu held.
func (s *Scheduler) waits(q *session.Session) bool {
	if !s.prefixable(q) || len(s.active) == 0 {
		return false
	}
	mine := s.promptKeys(q)
	pt := s.Cache.Options().PageTokens
	for _, a := range s.active {
		if a.Cached >= a.NPrompt || !s.prefixable(a) {
			continue
		}
		theirs := s.promptKeys(a)
		common := 0
		for common < len(mine) && common < len(theirs) && mine[common] == theirs[common] {
			common++
		}
		if common*pt > a.Cached {
			return true
		}
	}
	return false
}

// unheld takes the first held session that need not wait any more (or was
// cancelled meanwhile); nil when every one still waits. s.mu held.
func (s *Scheduler) unheld() *session.Session {
	for i, q := range s.held {
		if q.Check() || !s.waits(q) {
			s.held = append(s.held[:i], s.held[i+1:]...)
			return q
		}
	}
	return nil
}

// forgetKeys drops q's prompt keys and salt (q leaves the scheduler).
// s.mu held.
func (s *Scheduler) forgetKeys(q *session.Session) {
	delete(s.keys, q)
	delete(s.salts, q)
}
