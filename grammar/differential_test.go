package grammar

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"
)

// randRegex returns the same random regular language as GBNF and as a Go
// regular expression.
func randRegex(r *rand.Rand, depth int) (gbnf, re string) {
	if depth <= 0 || r.IntN(3) == 0 {
		switch r.IntN(6) {
		case 0:
			return `"a"`, "a"
		case 1:
			return `"é"`, "é"
		case 2:
			return `[a-b]`, "[a-b]"
		case 3:
			return `[^a]`, "[^a]"
		case 4:
			return `.`, "."
		default:
			return `"bc"`, "bc"
		}
	}
	g1, r1 := randRegex(r, depth-1)
	g2, r2 := randRegex(r, depth-1)
	switch r.IntN(7) {
	case 0, 1:
		return g1 + " " + g2, r1 + r2
	case 2:
		return "(" + g1 + " | " + g2 + ")", "(?:" + r1 + "|" + r2 + ")"
	case 3:
		return "(" + g1 + ")*", "(?:" + r1 + ")*"
	case 4:
		return "(" + g1 + ")+", "(?:" + r1 + ")+"
	case 5:
		return "(" + g1 + ")?", "(?:" + r1 + ")?"
	default:
		m := r.IntN(3)
		n := m + r.IntN(3)
		return fmt.Sprintf("(%s){%d,%d}", g1, m, n), fmt.Sprintf("(?:%s){%d,%d}", r1, m, n)
	}
}

// TestDifferentialRegex compares the matcher with Go's regexp on random
// regular grammars and random strings (whole-string membership), and the
// prefix property: every prefix of an accepted string is a live prefix.
func TestDifferentialRegex(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 1))
	alphabet := []string{"a", "b", "c", "é", "\n"} // valid UTF-8 only: Go reads a stray byte as U+FFFD, the matcher refuses it
	grammars, checked := 0, 0
	for range 400 {
		g, re := randRegex(r, 4)
		gr, err := ParseGBNF("root ::= " + g)
		if err != nil {
			t.Fatalf("%s: %v", g, err)
		}
		grammars++
		rx := regexp.MustCompile(`^(?s:` + re + `)$`)
		for range 40 {
			var sb strings.Builder
			for range r.IntN(7) {
				sb.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			s := sb.String()
			want := rx.MatchString(s)
			if got := gr.Check([]byte(s)) == nil; got != want {
				t.Fatalf("grammar %s / regexp %s on %q: grammar %v, regexp %v", g, re, s, got, want)
			}
			if want {
				for i := range len(s) {
					if !prefixOK(gr, s[:i]) {
						t.Fatalf("%s: prefix %q of accepted %q refused", g, s[:i], s)
					}
				}
			}
			checked++
		}
	}
	t.Logf("%d grammars, %d strings", grammars, checked)
}

// TestDifferentialPattern compares "pattern" compiled to a grammar over
// JSON strings with Go's regexp on the decoded text, on random patterns
// and texts with characters JSON must escape.
func TestDifferentialPattern(t *testing.T) {
	testutil.SkipRace(t, "the pattern differential against regexp")
	r := rand.New(rand.NewPCG(78, 1))
	alphabet := []string{"a", "b", "c", "é", "\n", `"`, `\`}
	built := 0
	for range 300 {
		_, re := randRegex(r, 4)
		anchored := r.IntN(3) > 0
		pat := re
		if anchored {
			pat = "^" + re + "$"
		}
		js, _ := json.Marshal(map[string]any{"type": "string", "pattern": pat})
		g, err := FromJSONSchema(js)
		if err != nil {
			t.Fatalf("%s: %v", pat, err)
		}
		built++
		rx := regexp.MustCompile(pat)
		for range 40 {
			var sb strings.Builder
			for range r.IntN(7) {
				sb.WriteString(alphabet[r.IntN(len(alphabet))])
			}
			s := sb.String()
			var enc strings.Builder
			writeJSONString(&enc, s)
			want := rx.MatchString(s)
			if got := g.Check([]byte(enc.String())) == nil; got != want {
				t.Fatalf("pattern %q on %s: grammar %v, regexp %v\n%s", pat, enc.String(), got, want, g)
			}
		}
	}
}
