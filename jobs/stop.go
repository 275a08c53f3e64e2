package jobs

import "strings"

// Stopper finds stop strings in a stream of text and holds back the text
// that could still become one: a stop string split across tokens is cut as
// surely as one inside a token, and none of it is ever sent.
type Stopper struct {
	stops []string
	held  string // the longest tail that is a proper prefix of a stop string
}

// NewStopper looks for any of stops.
func NewStopper(stops []string) *Stopper { return &Stopper{stops: stops} }

// Push adds text. It returns the text that can be sent and whether a stop
// string was found; then emit ends right before it and the rest is dropped.
func (s *Stopper) Push(text string) (emit string, stopped bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	buf := s.held + text
	at := -1
	for _, st := range s.stops {
		if i := strings.Index(buf, st); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		s.held = ""
		return buf[:at], true
	}
	// A stop string that starts in buf has not ended yet: hold from its
	// start. Stop strings and buf are valid UTF-8, so the cut falls on a
	// character boundary.
	hold := 0
	for _, st := range s.stops {
		for k := min(len(st)-1, len(buf)); k > hold; k-- {
			if strings.HasSuffix(buf, st[:k]) {
				hold = k
				break
			}
		}
	}
	s.held = buf[len(buf)-hold:]
	return buf[:len(buf)-hold], false
}

// Flush returns the held text at the end of the stream.
func (s *Stopper) Flush() string {
	h := s.held
	s.held = ""
	return h
}
