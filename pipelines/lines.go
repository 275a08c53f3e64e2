package pipelines

import (
	"regexp"
	"slices"
	"strings"
)

// lineIndex finds where tables and keys sit in the raw TOML text, for error
// messages only. BurntSushi/toml records key positions internally but exposes
// them only through its own errors, and its key names drop the array index
// ("stage.params.top_k" for every stage), so we locate keys ourselves: first
// the section a key belongs to (the top of the file, a [table], or the n-th
// [[stage]] with its sub-tables), then the first line in that section that
// assigns the key's last component. It is a heuristic over a file that has
// already parsed; when it cannot find a key it returns 0 and the message simply
// carries no line.
type lineIndex struct {
	lines  []string
	first  int              // line of the first table header; 0 if none
	tables map[string]span  // body of the last [name] header of each name
	stages []span           // every [[stage]] element with its sub-tables
	keys   map[string][]int // key component → ascending lines assigning or opening it
}

// header is one "[name]" or "[[name]]" line.
type header struct {
	line  int    // 1-based
	name  string // dotted, quotes and spaces removed: "stage.params"
	array bool   // [[name]]
}

// keyAssign finds the keys assigned on a line: "a = 1", "x.a = 1", "{ a = 1, b = 2 }".
var keyAssign = regexp.MustCompile(`(?:^|[\s.{,"'])([A-Za-z0-9_-]+)["']?\s*=`)

func newLineIndex(text string) *lineIndex {
	ix := &lineIndex{
		lines:  strings.Split(text, "\n"),
		tables: map[string]span{},
		keys:   map[string][]int{},
	}
	addKey := func(k string, n int) {
		if l := ix.keys[k]; len(l) == 0 || l[len(l)-1] != n {
			ix.keys[k] = append(l, n)
		}
	}
	var headers []header
	inMulti := "" // the delimiter of the multi-line string we are inside, if any
	for i, raw := range ix.lines {
		line := strings.TrimSuffix(raw, "\r")
		if inMulti != "" {
			if strings.Count(line, inMulti)%2 == 1 {
				inMulti = ""
			}
			continue
		}
		if h, ok := parseHeader(line); ok {
			h.line = i + 1
			headers = append(headers, h)
			for _, part := range strings.Split(h.name, ".") {
				addKey(part, h.line)
			}
			continue
		}
		for _, m := range keyAssign.FindAllStringSubmatch(line, -1) {
			addKey(m[1], i+1)
		}
		for _, d := range []string{`"""`, `'''`} {
			if strings.Count(line, d)%2 == 1 {
				inMulti = d
				break
			}
		}
	}

	// Each header's body runs to the line before the next header; a
	// [[stage]] element also spans its [stage.*] sub-tables.
	if len(headers) > 0 {
		ix.first = headers[0].line
	}
	openStage := -1
	for i, h := range headers {
		end := len(ix.lines)
		if i+1 < len(headers) {
			end = headers[i+1].line - 1
		}
		inStage := h.name == "stage" || strings.HasPrefix(h.name, "stage.")
		if openStage >= 0 && (!inStage || h.name == "stage" && h.array) {
			openStage = -1
		}
		switch {
		case h.name == "stage" && h.array:
			ix.stages = append(ix.stages, span{h.line, end})
			openStage = len(ix.stages) - 1
		case openStage >= 0:
			ix.stages[openStage].to = end
		}
		if !h.array {
			ix.tables[h.name] = span{h.line, end}
		}
	}
	return ix
}

// parseHeader recognises a table header line. Value lines that happen to
// start with "[" (a continued multi-line array) contain commas or literals
// that are not keys, and are rejected.
func parseHeader(line string) (header, bool) {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "[") {
		return header{}, false
	}
	var h header
	open, shut := "[", "]"
	if strings.HasPrefix(s, "[[") {
		h.array, open, shut = true, "[[", "]]"
	}
	s = s[len(open):]
	end := strings.Index(s, shut)
	if end < 0 {
		return header{}, false
	}
	rest := strings.TrimSpace(s[end+len(shut):])
	if rest != "" && !strings.HasPrefix(rest, "#") {
		return header{}, false
	}
	parts := strings.Split(s[:end], ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if len(p) >= 2 && (p[0] == '"' || p[0] == '\'') && p[len(p)-1] == p[0] {
			p = p[1 : len(p)-1]
		} else if p == "" || strings.ContainsFunc(p, func(r rune) bool { return !isBareKeyRune(r) }) {
			return header{}, false
		}
		parts[i] = p
	}
	h.name = strings.Join(parts, ".")
	return h, true
}

func isBareKeyRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
}

// span is an inclusive range of 1-based lines.
type span struct{ from, to int }

// top is the part of the file before the first table header.
func (ix *lineIndex) top() span {
	if ix.first == 0 {
		return span{1, len(ix.lines)}
	}
	return span{1, ix.first - 1}
}

// table is the body of the last header named name, up to the next header;
// ok is false when there is no such header (the table may be inline).
func (ix *lineIndex) table(name string) (span, bool) {
	sp, ok := ix.tables[name]
	return sp, ok
}

// stage is the n-th [[stage]] element with its sub-tables ([stage.params]);
// ok is false when the headers do not match the decoded stages one for one
// (stages written as an inline array).
func (ix *lineIndex) stage(n, total int) (span, bool) {
	if len(ix.stages) != total || n < 0 || n >= total {
		return span{}, false
	}
	return ix.stages[n], true
}

// stageHeader is the line of the n-th [[stage]] header, or 0.
func (ix *lineIndex) stageHeader(n, total int) int {
	if sp, ok := ix.stage(n, total); ok {
		return sp.from
	}
	return 0
}

// find returns the first line in sp where key (one key component) is
// assigned or opens a table, or 0.
func (ix *lineIndex) find(sp span, key string) int {
	lines := ix.keys[key]
	i, _ := slices.BinarySearch(lines, sp.from)
	if i < len(lines) && lines[i] <= sp.to {
		return lines[i]
	}
	return 0
}

// keyLine locates a key path outside the stages: top-level keys in the
// top section, "model.tier" in [model] (or an inline model = {...} at the top).
func (ix *lineIndex) keyLine(path []string) int {
	if len(path) == 0 {
		return 0
	}
	last := path[len(path)-1]
	if len(path) == 1 {
		if n := ix.find(ix.top(), last); n > 0 {
			return n
		}
		// A table key such as [modle] is its own header.
		if sp, ok := ix.table(last); ok {
			return sp.from
		}
		return 0
	}
	if sp, ok := ix.table(strings.Join(path[:len(path)-1], ".")); ok {
		if n := ix.find(sp, last); n > 0 {
			return n
		}
	}
	if sp, ok := ix.table(path[0]); ok {
		if n := ix.find(sp, last); n > 0 {
			return n
		}
	}
	return ix.find(ix.top(), last)
}

// stageKeyLine locates a key inside stage n; sub is the path below "stage"
// ("params", "top_k"). It falls back to the stage's header line.
func (ix *lineIndex) stageKeyLine(n, total int, sub []string) int {
	sp, ok := ix.stage(n, total)
	if !ok {
		return 0
	}
	if len(sub) > 0 {
		if l := ix.find(sp, sub[len(sub)-1]); l > 0 {
			return l
		}
	}
	return sp.from
}

// col converts a byte offset into the text into a 1-based column on line
// (1-based), or 0 when the offset is not on that line. BurntSushi's own
// column is one too high for an error at the very start of a line.
func (ix *lineIndex) col(line, offset int) int {
	if line < 1 || line > len(ix.lines) || offset < 0 {
		return 0
	}
	start := 0
	for _, l := range ix.lines[:line-1] {
		start += len(l) + 1
	}
	c := offset - start + 1
	if c < 1 || c > len(ix.lines[line-1])+1 {
		return 0
	}
	return c
}
