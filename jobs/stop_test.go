package jobs

import (
	"strings"
	"testing"
)

// However the text is split into pieces, what is sent is the text up to the
// first stop string, and nothing of a stop string is ever sent.
func TestStopperSplits(t *testing.T) {
	for _, c := range []struct {
		text  string
		stops []string
		want  string
		stop  bool
	}{
		{"hello world. bye", []string{"."}, "hello world", true},
		{"abcabd", []string{"abd"}, "abc", true},
		{"aaab", []string{"aab"}, "a", true},
		{"one two three", []string{"three", "two"}, "one ", true},
		{"no stop here", []string{"xyz", "here!"}, "no stop here", false},
		{"héllo wörld", []string{"wö"}, "héllo ", true},
		{"tail ab", []string{"abc"}, "tail ab", false},
		{"x", nil, "x", false},
	} {
		for split := 1; split <= len(c.text); split++ {
			s := NewStopper(c.stops)
			var sent strings.Builder
			stopped := false
			for i := 0; i < len(c.text) && !stopped; i += split {
				emit, hit := s.Push(c.text[i:min(i+split, len(c.text))])
				sent.WriteString(emit)
				stopped = hit
				for _, st := range c.stops {
					if strings.Contains(sent.String(), st) {
						t.Fatalf("%q split %d: sent %q contains stop %q", c.text, split, sent.String(), st)
					}
				}
			}
			if !stopped {
				sent.WriteString(s.Flush())
			}
			if sent.String() != c.want || stopped != c.stop {
				t.Fatalf("%q stops %q split %d: sent %q stopped %v, want %q %v", c.text, c.stops, split, sent.String(), stopped, c.want, c.stop)
			}
		}
	}
}
