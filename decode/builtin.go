package decode

import (
	"slices"

	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer"
)

// builtinRequests are the request strategies of every engine, in the order
// they are asked whether they own a session: a new one is a line here.
func builtinRequests(sc *sched.Scheduler, o Options) []Strategy {
	return []Strategy{
		NewBeam(sc, endOfSequence(o.Tok)),
		NewBestOf(sc),
	}
}

// endOfSequence lists a session's end-of-sequence ids: the vocabulary's
// end-of-generation tokens (EOS and the others, as plain decoding stops on
// them) and the request's stop tokens.
func endOfSequence(tok tokenizer.Tokenizer) func(*session.Session) []int32 {
	return func(q *session.Session) []int32 {
		var ids []int32
		if tok != nil {
			if g, ok := tok.(interface{ EOG() []int32 }); ok {
				ids = g.EOG()
			} else if t := tok.EOS(); t >= 0 {
				ids = append(ids, t)
			}
		}
		return slices.Concat(ids, q.Req.StopTokens)
	}
}
