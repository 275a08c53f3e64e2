package server

import (
	"encoding/json"
	"testing"
)

// parseCalls on each family's syntax: several Hermes calls, text before
// them, malformed calls left as text, Llama 3's parameters.
func TestParseCalls(t *testing.T) {
	for _, c := range []struct {
		syntax, text, content string
		names                 []string
		args                  []string
	}{
		{syntaxHermes, `<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call><tool_call>{"name":"b","arguments":{}}</tool_call>`, "", []string{"a", "b"}, []string{`{"x":1}`, `{}`}},
		{syntaxHermes, "Sure.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"y\": [1, 2]}}\n</tool_call>", "Sure.\n", []string{"a"}, []string{`{"y":[1,2]}`}},
		{syntaxHermes, `<tool_call>{"name": "a", "arguments": {"x": 1}}`, "", []string{"a"}, []string{`{"x":1}`}}, // cut before the closing tag
		{syntaxHermes, `<tool_call>not json</tool_call>`, `<tool_call>not json</tool_call>`, nil, nil},
		{syntaxHermes, `just text`, `just text`, nil, nil},
		{syntaxLlama3, `<|python_tag|>{"name": "a", "parameters": {"q": "z"}}`, "", []string{"a"}, []string{`{"q":"z"}`}},
		{syntaxLlama3, ` {"name": "a", "arguments": {"q": 1}}`, "", []string{"a"}, []string{`{"q":1}`}},
		{syntaxLlama3, `{"no": "name"}`, `{"no": "name"}`, nil, nil},
		{syntaxMistral, `[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]`, "", []string{"a", "b"}, []string{`{"x":1}`, `{}`}},
		{syntaxMistral, `Checking. [TOOL_CALLS] [{"name": "a", "arguments": {"x": "y"}}]`, "Checking. ", []string{"a"}, []string{`{"x":"y"}`}},
		{syntaxMistral, `[TOOL_CALLS][{"name": "a"`, `[TOOL_CALLS][{"name": "a"`, nil, nil},
		{syntaxMistral, `[TOOL_CALLS][{"arguments": {}}]`, `[TOOL_CALLS][{"arguments": {}}]`, nil, nil},
	} {
		content, calls := parseCalls(c.syntax, c.text)
		got := ""
		if content != nil {
			got = *content
		}
		if got != c.content || len(calls) != len(c.names) {
			t.Errorf("%s %q: content %q, %d calls; want %q, %d", c.syntax, c.text, got, len(calls), c.content, len(c.names))
			continue
		}
		for i, call := range calls {
			if call.Function.Name != c.names[i] || call.Function.Arguments != c.args[i] || call.Type != "function" || len(call.ID) < 10 {
				t.Errorf("%s %q: call %d = %+v", c.syntax, c.text, i, call)
			}
		}
	}
}

// callStart holds back exactly what may begin a call, and returns 0 once
// one has begun (what came before it was returned already).
func TestCallStart(t *testing.T) {
	for _, c := range []struct {
		syntax string
		chunks []string
		want   []int // after each chunk
	}{
		{syntaxHermes, []string{"Hi", " there <tool", "_call>{", "}"}, []int{2, 9, 9, 0}},
		{syntaxHermes, []string{"\n", "<tool_call>"}, []int{0, 0}},
		{syntaxMistral, []string{"ok [TOOL", "_CALLS][", "x"}, []int{3, 3, 0}},
		{syntaxLlama3, []string{" ", "<|pyth", "on_tag|>{"}, []int{0, 0, 0}},
		{syntaxLlama3, []string{"It", " is"}, []int{2, 5}},
		{syntaxLlama3, []string{"\n{", "\"name\""}, []int{0, 0}},
	} {
		var st holdState
		text := ""
		for i, ch := range c.chunks {
			text += ch
			if got := callStart(c.syntax, text, &st); got != c.want[i] {
				t.Errorf("%s %q: callStart = %d, want %d", c.syntax, text, got, c.want[i])
			}
		}
	}
}

// FuzzParseCalls: any text, either syntax: no panic, and every call read
// back has a name and arguments that are compact JSON.
func FuzzParseCalls(f *testing.F) {
	f.Add(`<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>`, uint8(0))
	f.Add("Sure.\n<tool_call>\n{\"name\": \"a\"}\n</tool_call><tool_call>", uint8(0))
	f.Add(`<|python_tag|>{"name": "a", "parameters": {"q": "z"}}`, uint8(1))
	f.Add(`{"name": 3, "parameters": []}`, uint8(1))
	f.Add(`[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}]`, uint8(2))
	f.Add(`[{"name":"a","arguments":{"x":1}},{"name":"b","arguments":{}}]`, uint8(0))
	f.Fuzz(func(t *testing.T, text string, which uint8) {
		syntax := []string{syntaxHermes, syntaxLlama3, syntaxMistral}[which%3]
		content, calls := parseCalls(syntax, text)
		if len(calls) == 0 && (content == nil || *content != text) {
			t.Fatalf("no calls, content %v: want the text as written", content)
		}
		for _, c := range calls {
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Fatalf("call %+v: arguments are not JSON", c)
			}
		}
		if forced, err := forcedCalls(text); err == nil {
			for _, c := range forced {
				if !json.Valid([]byte(c.Function.Arguments)) {
					t.Fatalf("forced call %+v: arguments are not JSON", c)
				}
			}
		}
		// Streaming the text byte by byte sends a growing prefix as
		// content, and none of a call the whole text holds.
		var st holdState
		sent := 0
		for i := 1; i <= len(text); i++ {
			if upto := callStart(syntax, text[:i], &st); upto > sent {
				if upto > i {
					t.Fatalf("callStart(%q) = %d, past the text", text[:i], upto)
				}
				sent = upto
			}
		}
		if len(calls) > 0 && content != nil && sent > len(*content) {
			t.Fatalf("streamed %q as content, but the call begins after %q", text[:sent], *content)
		}
	})
}
