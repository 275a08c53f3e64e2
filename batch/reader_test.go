package batch

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// errText compares errors by their text, which is what reaches results files.
var errText = cmp.Comparer(func(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
})

// readAll drains a Reader, failing the test on an I/O error.
func readAll(t *testing.T, r *Reader) []Request {
	t.Helper()
	var out []Request
	for {
		req, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, req)
	}
}

func f64(v float64) *float64 { return &v }
func u64(v uint64) *uint64   { return &v }

func lineErr(name string, line int, msg string) error {
	return &LineError{Name: name, Line: line, Msg: msg, Kind: ErrBadLine}
}

func TestReader(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		in     string
		want   []Request
		wantF  Format // Format() after reading
	}{
		{
			name: "plain jsonl", format: Auto, wantF: JSONL,
			in: `{"custom_id": "a", "prompt": "Once upon"}
{"prompt": "no id", "max_tokens": 12, "temperature": 0.5, "seed": 7, "extra": {"ignored": true}}

{"custom_id": "c", "prompt": "", "seed": 18446744073709551615}
`,
			want: []Request{
				{Line: 1, CustomID: "a", Prompt: "Once upon"},
				{Line: 2, CustomID: "line-2", Prompt: "no id", MaxTokens: 12, Temperature: f64(0.5), Seed: u64(7)},
				{Line: 4, CustomID: "c", Prompt: "", Seed: u64(18446744073709551615)},
			},
		},
		{
			name: "jsonl messages", format: JSONL, wantF: JSONL,
			in: `{"custom_id": "m", "messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5}`,
			want: []Request{
				{Line: 1, CustomID: "m", Messages: []Message{{"user", "hi"}}, MaxTokens: 5},
			},
		},
		{
			name: "openai batch", format: Auto, wantF: OpenAIBatch,
			in: `{"custom_id": "r1", "method": "POST", "url": "/v1/completions", "body": {"model": "x", "prompt": "Tell", "max_tokens": 32}}
{"custom_id": "r2", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "x", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]}], "max_completion_tokens": 9, "max_tokens": 3, "temperature": 0, "seed": 1}}
{"custom_id": "r3", "body": {"prompt": "no url or method"}}
`,
			want: []Request{
				{Line: 1, CustomID: "r1", Prompt: "Tell", MaxTokens: 32, Model: "x"},
				{Line: 2, CustomID: "r2", Messages: []Message{{"system", "Be brief."}, {"user", "Hello"}}, MaxTokens: 9, Temperature: f64(0), Seed: u64(1), Model: "x"},
				{Line: 3, CustomID: "r3", Prompt: "no url or method"},
			},
		},
		{
			name: "text", format: Auto, wantF: Text,
			in: "\xef\xbb\xbfOnce upon a time\r\n\n   \nThe cat {sat}\n  indented stays  \nno final newline",
			want: []Request{
				{Line: 1, CustomID: "line-1", Prompt: "Once upon a time"},
				{Line: 4, CustomID: "line-4", Prompt: "The cat {sat}"},
				{Line: 5, CustomID: "line-5", Prompt: "  indented stays  "},
				{Line: 6, CustomID: "line-6", Prompt: "no final newline"},
			},
		},
		{
			name: "explicit text reads braces as prompts", format: Text, wantF: Text,
			in:   "{\"prompt\": \"x\"}\n",
			want: []Request{{Line: 1, CustomID: "line-1", Prompt: `{"prompt": "x"}`}},
		},
		{
			name: "auto skips leading blank lines", format: Auto, wantF: JSONL,
			in:   "\n\n  {\"prompt\": \"p\"}\n",
			want: []Request{{Line: 3, CustomID: "line-3", Prompt: "p"}},
		},
		{
			name: "empty input", format: Auto, wantF: Auto,
			in: "",
		},
		{
			name: "mixed jsonl and openai lines in auto", format: Auto, wantF: JSONL,
			in: `{"custom_id": "a", "prompt": "p"}
{"custom_id": "b", "body": {"prompt": "q"}}
`,
			want: []Request{
				{Line: 1, CustomID: "a", Prompt: "p"},
				{Line: 2, CustomID: "b", Prompt: "q"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tc.in), "p.jsonl", tc.format)
			got := readAll(t, r)
			if diff := cmp.Diff(tc.want, got, errText); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if r.Format() != tc.wantF {
				t.Errorf("Format() = %v, want %v", r.Format(), tc.wantF)
			}
		})
	}
}

// TestReaderBadLines checks that each kind of bad line yields an error
// request naming file and line, and that the next line still reads.
func TestReaderBadLines(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		line   string
		wantID string
		want   string
	}{
		{"invalid json", Auto, `{"custom_id": "a", "prompt": }`, "line-1",
			`prompts.jsonl:1: invalid JSON: invalid character '}' looking for beginning of value (at byte 30)`},
		{"trailing garbage", JSONL, `{"prompt": "a"} x`, "line-1",
			`prompts.jsonl:1: invalid JSON: invalid character 'x' after top-level value (at byte 17)`},
		{"not an object", JSONL, `["a"]`, "line-1", `prompts.jsonl:1: invalid JSON: want one object {...} per line`},
		{"missing prompt", JSONL, `{"custom_id": "a"}`, "a", `prompts.jsonl:1: missing "prompt"`},
		{"null prompt", JSONL, `{"custom_id": "a", "prompt": null}`, "a", `prompts.jsonl:1: missing "prompt"`},
		{"openai line in jsonl mode", JSONL, `{"custom_id": "a", "body": {"prompt": "x"}}`, "a",
			`prompts.jsonl:1: missing "prompt" (the line has a "body": is this an OpenAI Batch file? use format openai or auto)`},
		{"prompt array", JSONL, `{"prompt": ["a", "b"]}`, "line-1",
			`prompts.jsonl:1: "prompt" must be a string (arrays of prompts or tokens are not supported), got ["a", "b"]`},
		{"prompt and messages", JSONL, `{"prompt": "a", "messages": []}`, "line-1", `prompts.jsonl:1: both "prompt" and "messages"; give one`},
		{"numeric custom_id", JSONL, `{"custom_id": 12, "prompt": "a"}`, "line-1", `prompts.jsonl:1: "custom_id" must be a string, got 12`},
		{"empty custom_id", JSONL, `{"custom_id": "", "prompt": "a"}`, "line-1", `prompts.jsonl:1: "custom_id" is empty`},
		{"negative max_tokens", JSONL, `{"custom_id": "a", "prompt": "a", "max_tokens": -1}`, "a",
			`prompts.jsonl:1: "max_tokens" must be an integer from 0 to 2147483647, got -1`},
		{"fractional max_tokens", JSONL, `{"prompt": "a", "max_tokens": 1.5}`, "line-1",
			`prompts.jsonl:1: "max_tokens" must be an integer from 0 to 2147483647, got 1.5`},
		{"string max_tokens", JSONL, `{"prompt": "a", "max_tokens": "10"}`, "line-1",
			`prompts.jsonl:1: "max_tokens" must be an integer from 0 to 2147483647, got "10"`},
		{"negative temperature", JSONL, `{"prompt": "a", "temperature": -0.1}`, "line-1",
			`prompts.jsonl:1: "temperature" must be a number ≥ 0, got -0.1`},
		{"negative seed", JSONL, `{"prompt": "a", "seed": -1}`, "line-1",
			`prompts.jsonl:1: "seed" must be an integer from 0 to 2^64-1, got -1`},
		{"seed too large", JSONL, `{"prompt": "a", "seed": 18446744073709551616}`, "line-1",
			`prompts.jsonl:1: "seed" must be an integer from 0 to 2^64-1, got 18446744073709551616`},
		{"empty messages", JSONL, `{"messages": []}`, "line-1", `prompts.jsonl:1: "messages" is empty`},
		{"message without role", JSONL, `{"messages": [{"content": "x"}]}`, "line-1",
			`prompts.jsonl:1: messages[0]: "role" must be a non-empty string, got nothing`},
		{"message without content", JSONL, `{"messages": [{"role": "user"}]}`, "line-1",
			`prompts.jsonl:1: messages[0]: missing "content"`},
		{"image part", JSONL, `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, "line-1",
			`prompts.jsonl:1: messages[0].content[0]: part type "image_url" is not supported; only "text"`},
		{"messages not an array", JSONL, `{"messages": "hi"}`, "line-1",
			`prompts.jsonl:1: "messages" must be an array of {"role", "content"} objects, got "hi"`},
		{"openai missing body", OpenAIBatch, `{"custom_id": "a", "url": "/v1/completions"}`, "a", `prompts.jsonl:1: missing "body"`},
		{"openai get", OpenAIBatch, `{"custom_id": "a", "method": "GET", "body": {}}`, "a", `prompts.jsonl:1: "method" is "GET"; want "POST"`},
		{"openai embeddings", Auto, `{"custom_id": "a", "url": "/v1/embeddings", "body": {"input": "x"}}`, "a",
			`prompts.jsonl:1: "url" is "/v1/embeddings"; want "/v1/completions" or "/v1/chat/completions"`},
		{"openai body not object", OpenAIBatch, `{"custom_id": "a", "body": "x"}`, "a", `prompts.jsonl:1: "body" must be an object, got "x"`},
		{"openai missing body.prompt", OpenAIBatch, `{"custom_id": "a", "url": "/v1/completions", "body": {"model": "m"}}`, "a",
			`prompts.jsonl:1: missing "body.prompt" (url /v1/completions)`},
		{"openai missing body.messages", OpenAIBatch, `{"custom_id": "a", "url": "/v1/chat/completions", "body": {"prompt": "p"}}`, "a",
			`prompts.jsonl:1: missing "body.messages" (url /v1/chat/completions)`},
		{"openai messages on completions url", OpenAIBatch, `{"custom_id": "a", "url": "/v1/completions", "body": {"prompt": "p", "messages": []}}`, "a",
			`prompts.jsonl:1: "body.messages" with url /v1/completions; chat requests use /v1/chat/completions`},
		{"openai bad body value", OpenAIBatch, `{"custom_id": "a", "body": {"prompt": "p", "max_tokens": -5}}`, "a",
			`prompts.jsonl:1: "body.max_tokens" must be an integer from 0 to 2147483647, got -5`},
		{"response_format not an object", JSONL, `{"prompt": "a", "response_format": "json"}`, "line-1",
			`prompts.jsonl:1: "response_format" must be an object {"type": ...}, got "json"`},
		{"response_format unknown type", JSONL, `{"prompt": "a", "response_format": {"type": "xml"}}`, "line-1",
			`prompts.jsonl:1: "response_format.type" is "xml"; want "text", "json_object" or "json_schema"`},
		{"json_schema without schema", OpenAIBatch, `{"custom_id": "a", "body": {"prompt": "p", "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}}`, "a",
			`prompts.jsonl:1: "body.response_format.json_schema.schema" must be a JSON Schema (an object), got nothing`},
		{"json_schema missing", JSONL, `{"prompt": "a", "response_format": {"type": "json_schema"}}`, "line-1",
			`prompts.jsonl:1: "response_format" of type json_schema needs "json_schema": {"name", "schema"}`},
		{"text with a schema", JSONL, `{"prompt": "a", "response_format": {"type": "text", "schema": {}}}`, "line-1",
			`prompts.jsonl:1: "response_format" of type text takes no schema; use type json_schema`},
		{"grammar not a string", JSONL, `{"prompt": "a", "grammar": 3}`, "line-1",
			`prompts.jsonl:1: "grammar" must be a non-empty string (a GBNF grammar), got 3`},
		{"grammar and response_format", JSONL, `{"prompt": "a", "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}`, "line-1",
			`prompts.jsonl:1: both "response_format" and "grammar" constrain the output; give one`},
		{"long value is clipped", JSONL, `{"prompt": "a", "seed": "` + strings.Repeat("é", 30) + `"}`, "line-1",
			`prompts.jsonl:1: "seed" must be an integer from 0 to 2^64-1, got "` + strings.Repeat("é", 19) + `…`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.line + "\n" + `{"custom_id": "next", "prompt": "fine", "body": {"prompt": "fine"}}` + "\n"
			got := readAll(t, NewReader(strings.NewReader(in), "prompts.jsonl", tc.format))
			if len(got) != 2 {
				t.Fatalf("got %d requests, want 2: %+v", len(got), got)
			}
			want := Request{Line: 1, CustomID: tc.wantID, Err: errors.New(tc.want)}
			if diff := cmp.Diff(want, got[0], errText); diff != "" {
				t.Errorf("bad line (-want +got):\n%s", diff)
			}
			if !errors.Is(got[0].Err, ErrBadLine) {
				t.Errorf("errors.Is(Err, ErrBadLine) = false")
			}
			if got[1].Err != nil || got[1].CustomID != "next" || got[1].Prompt != "fine" {
				t.Errorf("the line after a bad one: %+v", got[1])
			}
		})
	}
}

// response_format and grammar are read into Schema and Grammar, at the top
// level of a JSONL line and in an OpenAI Batch body.
func TestReaderConstraints(t *testing.T) {
	in := `{"custom_id": "a", "prompt": "p", "response_format": {"type": "json_object"}}
{"custom_id": "b", "prompt": "p", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "integer"}}}}
{"custom_id": "c", "prompt": "p", "grammar": "root ::= \"x\""}
{"custom_id": "d", "prompt": "p", "response_format": {"type": "text"}}
{"custom_id": "e", "prompt": "p", "response_format": {"type": "json_object", "schema": {"type": "object", "required": ["k"]}}}
`
	got := readAll(t, NewReader(strings.NewReader(in), "p.jsonl", JSONL))
	want := []struct{ schema, gbnf string }{{`{"type":"object"}`, ""}, {`{"type": "integer"}`, ""}, {"", `root ::= "x"`}, {"", ""}, {`{"type": "object", "required": ["k"]}`, ""}}
	for i, r := range got {
		if r.Err != nil || string(r.Schema) != want[i].schema || r.Grammar != want[i].gbnf {
			t.Errorf("line %d: schema %s grammar %q err %v; want %s %q", i+1, r.Schema, r.Grammar, r.Err, want[i].schema, want[i].gbnf)
		}
	}
	ob := `{"custom_id": "o", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"enum": [1, 2]}}}}}` + "\n"
	got = readAll(t, NewReader(strings.NewReader(ob), "b.jsonl", Auto))
	if len(got) != 1 || got[0].Err != nil || string(got[0].Schema) != `{"enum": [1, 2]}` {
		t.Fatalf("OpenAI Batch body: %+v", got)
	}
}

func TestReaderDuplicateID(t *testing.T) {
	in := `{"custom_id": "a", "prompt": "one"}
{"custom_id": "b", "prompt": "two"}
{"custom_id": "a", "prompt": "three"}
{"custom_id": "line-5", "prompt": "four"}
{"prompt": "five gets line-5 too"}
`
	got := readAll(t, NewReader(strings.NewReader(in), "p.jsonl", JSONL))
	want := []Request{
		{Line: 1, CustomID: "a", Prompt: "one"},
		{Line: 2, CustomID: "b", Prompt: "two"},
		{Line: 3, CustomID: "a", Err: &LineError{Name: "p.jsonl", Line: 3, Kind: ErrDuplicateID, Msg: `duplicate custom_id "a" (first on line 1)`}},
		{Line: 4, CustomID: "line-5", Prompt: "four"},
		{Line: 5, CustomID: "line-5", Err: &LineError{Name: "p.jsonl", Line: 5, Kind: ErrDuplicateID, Msg: `duplicate custom_id "line-5" (first on line 4)`}},
	}
	if diff := cmp.Diff(want, got, errText); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !errors.Is(got[2].Err, ErrDuplicateID) {
		t.Error("errors.Is(Err, ErrDuplicateID) = false")
	}
}

func TestReaderLongLines(t *testing.T) {
	long := strings.Repeat("Once upon a time, ", 128<<10) // 2.25 MiB
	tests := []struct {
		name   string
		format Format
		in     string
	}{
		{"jsonl", Auto, `{"custom_id": "big", "prompt": "` + long + "\"}\n"},
		{"text", Auto, long + "\n"},
		{"text crlf, no final newline", Text, long + "\r"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in + "\n"
			got := readAll(t, NewReader(strings.NewReader(in), "big", tc.format))
			if len(got) != 1 || got[0].Err != nil {
				t.Fatalf("got %d requests, first err %v", len(got), got[0].Err)
			}
			if got[0].Prompt != long {
				t.Errorf("prompt has %d bytes, want %d", len(got[0].Prompt), len(long))
			}
		})
	}
}

func TestReaderTooLong(t *testing.T) {
	for _, format := range []Format{Auto, Text, JSONL} {
		t.Run(format.String(), func(t *testing.T) {
			in := "short\n" + strings.Repeat("x", 300<<10) + "\n" + strings.Repeat("y", 101) + "\r\n" + strings.Repeat("z", 100) + "\r\nlast\n"
			r := NewReader(strings.NewReader(in), "p.txt", format)
			r.maxLine = 100
			got := readAll(t, r)
			if len(got) != 5 {
				t.Fatalf("got %d requests, want 5", len(got))
			}
			for _, i := range []int{1, 2} {
				want := lineErr("p.txt", i+1, "line is longer than 100 bytes")
				if diff := cmp.Diff(want, got[i].Err, errText); diff != "" {
					t.Errorf("line %d (-want +got):\n%s", i+1, diff)
				}
			}
			if format != JSONL && (got[3].Err != nil || len(got[3].Prompt) != 100 || got[4].Prompt != "last") {
				t.Errorf("lines after the long ones: %+v, %+v", got[3].Err, got[4])
			}
			if cap(r.buf) > 64<<10+256 {
				t.Errorf("reader kept a %d-byte buffer for an over-long line", cap(r.buf))
			}
		})
	}
}

func TestReaderIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	in := io.MultiReader(strings.NewReader("one\ntwo"), iotest.ErrReader(boom))
	r := NewReader(in, "p.txt", Auto)
	req, err := r.Next()
	if err != nil || req.Prompt != "one" {
		t.Fatalf("first Next = %+v, %v", req, err)
	}
	for range 2 { // sticky
		_, err = r.Next()
		if !errors.Is(err, boom) || !strings.Contains(err.Error(), "p.txt: line 2") {
			t.Fatalf("Next = %v; want the read error naming the file and line", err)
		}
	}
}

func TestReaderEOFIsSticky(t *testing.T) {
	r := NewReader(strings.NewReader("a\n"), "p", Text)
	readAll(t, r)
	if _, err := r.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("Next after EOF = %v", err)
	}
}

func TestReaderUnknownFormat(t *testing.T) {
	_, err := NewReader(strings.NewReader("a\n"), "p", Format(9)).Next()
	if err == nil || !strings.Contains(err.Error(), "unknown format 9") {
		t.Errorf("Next = %v", err)
	}
}

func TestRequestText(t *testing.T) {
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"prompt", Request{Prompt: "Once"}, "Once"},
		{"empty", Request{}, ""},
		{"chat", Request{Messages: []Message{{"system", "Be brief."}, {"user", "Hi"}}},
			"system: Be brief.\nuser: Hi\nassistant:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.req.Text(); got != tc.want {
				t.Errorf("Text() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	for _, f := range []Format{Auto, JSONL, OpenAIBatch, Text} {
		got, err := ParseFormat(strings.ToUpper(f.String()))
		if err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("csv"); err == nil || !strings.Contains(err.Error(), "auto, jsonl, openai, text") {
		t.Errorf("ParseFormat(csv) = %v", err)
	}
	if got := fmt.Sprint(Format(7)); got != "Format(7)" {
		t.Errorf("Format(7) prints %q", got)
	}
}
