package decode

import (
	"github.com/sluicehq/sluice/sched"
	"github.com/sluicehq/sluice/session"
)

// builtinRequests are the request strategies of every engine, in the order
// they are asked whether they own a session: a new one is a line here.
func builtinRequests(sc *sched.Scheduler) []Strategy {
	return []Strategy{
		NewBeam(sc, (*session.Session).EndIDs), // a beam ends where plain decoding stops
		NewBestOf(sc),
	}
}
