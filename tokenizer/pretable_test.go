package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// TestPreTable: every pattern of the table compiles, every name maps to a
// pattern family, and the hand-written splitters implement patterns the
// matcher also runs (so FuzzPreTokenize can hold them to it).
func TestPreTable(t *testing.T) {
	if _, err := compilePre(); err != nil {
		t.Fatal(err)
	}
	for name, typ := range preNames {
		if _, ok := preTypes[typ]; !ok {
			t.Errorf("name %q maps to unknown family %q", name, typ)
		}
	}
	for pat := range customSplitters {
		if pat == patDigitGroups || pat == patKimiK2 {
			continue // llama.cpp's names for splitters, not patterns
		}
		if _, err := compileRx(pat); err != nil {
			t.Errorf("custom pattern %q: %v", pat, err)
		}
	}
	info, ok := LookupPreTokenizer("llama-bpe")
	if !ok || info.Type != "llama3" || !info.IgnoreMerges || !info.AddBOS || !info.CleanSpaces || len(info.Patterns) != 1 {
		t.Errorf("LookupPreTokenizer(llama-bpe) = %+v, %v", info, ok)
	}
	if info, _ := LookupPreTokenizer("qwen2"); info.CleanSpaces || info.IgnoreMerges {
		t.Errorf("qwen2: %+v", info)
	}
}

// matcherSplit runs pattern pat with the matcher alone over s.
func matcherSplit(t testing.TB, pat, s string) []string {
	p, err := compileRx(pat)
	if err != nil {
		t.Fatal(err)
	}
	var pt preText
	pt.reset(s)
	var out []string
	lo := 0
	p.split(pt.view(p.collapsed), 0, len(pt.cp), func(end int) {
		out = append(out, s[pt.off[lo]:pt.off[end]])
		lo = end
	})
	return out
}

func customSplit(sp splitter, s string) []string {
	var pt preText
	pt.reset(s)
	var out []string
	lo := 0
	if len(pt.cp) > 0 {
		sp(&pt, 0, len(pt.cp), func(end int) {
			out = append(out, s[pt.off[lo]:pt.off[end]])
			lo = end
		})
	}
	return out
}

// customPatterns are the hand-written splitters held to the matcher.
var customPatterns = []string{patGPT2, patLlama3, patQwen2, patNewlines}

func TestCustomSplittersMatchPatterns(t *testing.T) {
	for _, s := range pretokCases {
		for _, pat := range customPatterns {
			if got, want := customSplit(customSplitters[pat], s), matcherSplit(t, pat, s); !slices.Equal(got, want) {
				t.Errorf("%q on %q:\nsplitter %q\nmatcher  %q", pat, s, got, want)
			}
		}
	}
}

func TestMatcher(t *testing.T) {
	tests := []struct {
		pat, in string
		want    []string
	}{
		{`\s+(?!\S)`, "a   b", []string{"a", "  ", " b"}},
		{`[0-9][0-9][0-9]`, "12345678", []string{"123", "456", "78"}},
		{`(?=(\d{3})+(?!\d))`, "1234567", []string{"1", "234", "567"}},
		{`\p{N}{1,3}`, "١٢٣٤x", []string{"١٢٣", "٤", "x"}},
		{`\s+$`, "a  ", []string{"a", "  "}},
		{`<sentinel:[0-9]+>`, "x<sentinel:12>y", []string{"x", "<sentinel:12>", "y"}},
		{`(IMGIMG)((A|B|C){1,4})Z`, "IMGIMGABZ", []string{"IMGIMGABZ"}},
		{patWordsCased, "HelloWORLD", []string{"Hello", "WORLD"}},
		{` ?[^(\s|.,!?…)]+`, "ab, cd…e", []string{"ab", ",", " cd", "…", "e"}},
		// The collapsed view has no case outside ASCII: É is upper and lower.
		{patWordsCased, "Éa", []string{"Éa"}},
	}
	for _, tc := range tests {
		if got := matcherSplit(t, tc.pat, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%q on %q = %q, want %q", tc.pat, tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{`(`, `[a`, `a{2`, `\p{Xx}`, `a*?`, `(?<x>a)`, `\p{L}é`, `[b-a]`, `\q`} {
		if _, err := compileRx(bad); err == nil {
			t.Errorf("compileRx(%q): no error", bad)
		}
	}
}

// FuzzPreTokenize: for every pre-tokenizer, the pre-tokens concatenate back
// to the input; the hand-written splitters equal the matcher on their
// patterns.
func FuzzPreTokenize(f *testing.F) {
	for _, s := range pretokCases {
		f.Add(s)
	}
	f.Add("\xff\xfe 'S 12\r\n\u00a0\u00a0x")
	names := PreTokenizers()
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range names {
			if got := preSplit(name, s); strings.Join(got, "") != s {
				t.Fatalf("%s: pre-tokens %q do not concatenate to %q", name, got, s)
			}
		}
		for _, pat := range customPatterns {
			if got, want := customSplit(customSplitters[pat], s), matcherSplit(t, pat, s); !slices.Equal(got, want) {
				t.Fatalf("%q on %q:\nsplitter %q\nmatcher  %q", pat, s, got, want)
			}
		}
	})
}

// BenchmarkPreTokenize: pre-tokenization alone of 10 KB of prose, for
// hand-written splitters (gpt-2, llama-bpe, qwen2) and patterns run on the
// matcher (smollm's \p{N}, deepseek-v3, tekken, gpt-4o).
func BenchmarkPreTokenize(b *testing.B) {
	text := benchText(10 << 10)
	for _, name := range []string{"gpt-2", "llama-bpe", "qwen2", "smollm", "deepseek-v3", "tekken", "gpt-4o"} {
		b.Run(name, func(b *testing.B) {
			p, _ := lookupPre(name)
			var t preText
			b.SetBytes(int64(len(text)))
			n := 0
			for b.Loop() {
				n = 0
				p.split(&t, text, func(string) { n++ })
			}
			b.ReportMetric(float64(n), "pretokens/op")
		})
	}
}
