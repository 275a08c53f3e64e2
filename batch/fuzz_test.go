package batch

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"strings"
	"testing"
)

// FuzzReader feeds arbitrary bytes in every format. The reader must never
// panic or stop early: every non-blank line yields exactly one request, in
// order, with a custom_id, and either a prompt/messages or a *LineError.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"custom_id": "a", "prompt": "Once upon"}` + "\n" + `{"prompt": 3}`,
		`{"custom_id": "r", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "seed": 1}}`,
		"\xef\xbb\xbfplain text\r\n\n{not json\n",
		`{"custom_id": "a", "prompt": "x"}` + "\n" + `{"custom_id": "a", "prompt": "y"}`,
		strings.Repeat("x", 300) + "\n" + `{"max_tokens": 1e3, "temperature": -0, "prompt": "\u00e9"}`,
		`{"body": null, "url": 5, "messages": [{"role": "", "content": null}]}`,
		`{"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}}}}` + "\n" + `{"prompt": "b", "grammar": "root ::= \"x\"", "response_format": {"type": "json_object", "schema": 3}}`,
		`{"custom_id": "o", "body": {"prompt": "p", "response_format": {"type": "text", "json_schema": null}}}`,
	} {
		for format := range uint8(Text + 1) {
			f.Add([]byte(s), format)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, format uint8) {
		r := NewReader(bytes.NewReader(data), "fuzz", Format(format%uint8(Text+1)))
		r.maxLine = 256
		lines := bytes.Count(data, []byte("\n")) + 1
		nonBlank := 0
		for i, l := range bytes.Split(data, []byte("\n")) {
			tooLong := len(bytes.TrimSuffix(l, []byte("\r"))) > r.maxLine
			if i == 0 {
				l = bytes.TrimPrefix(l, []byte("\xef\xbb\xbf"))
			}
			if len(bytes.TrimSpace(l)) > 0 || tooLong {
				nonBlank++
			}
		}
		ids := map[string]bool{}
		last, n := 0, 0
		for {
			req, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			n++
			if req.Line <= last || req.Line > lines {
				t.Fatalf("line %d after %d (input has %d lines)", req.Line, last, lines)
			}
			last = req.Line
			if req.CustomID == "" {
				t.Fatalf("line %d: empty CustomID", req.Line)
			}
			if req.Err != nil {
				le, ok := req.Err.(*LineError)
				if !ok || le.Line != req.Line || req.Prompt != "" || req.Messages != nil {
					t.Fatalf("line %d: bad error request %+v", req.Line, req)
				}
				continue
			}
			if ids[req.CustomID] {
				t.Fatalf("line %d: custom_id %q returned twice without an error", req.Line, req.CustomID)
			}
			ids[req.CustomID] = true
			if req.MaxTokens < 0 || req.Temperature != nil && !(*req.Temperature >= 0) {
				t.Fatalf("line %d: accepted bad values %+v", req.Line, req)
			}
			_ = req.Text()
		}
		if n != nonBlank {
			t.Fatalf("%d requests for %d non-blank lines", n, nonBlank)
		}
	})
}

// FuzzDone reads arbitrary results files: never a panic, and every id it
// reports comes from a complete line.
func FuzzDone(f *testing.F) {
	f.Add([]byte("{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\",\"te"))
	f.Add([]byte("\n\n{\"custom_id\":\"\"}\n"))
	f.Add([]byte("{\"custom_id\":1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := scanDone(bytes.NewReader(data), "fuzz", nil)
		done, end := sc.done, sc.end
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if end != int64(bytes.LastIndexByte(data, '\n')+1) {
			t.Fatalf("end = %d, want just past the last newline", end)
		}
		// The torn tail must not matter: the complete part alone gives the same ids.
		sc2, err := scanDone(bytes.NewReader(data[:end]), "fuzz", nil)
		again, end2 := sc2.done, sc2.end
		if err != nil || end2 != end || !maps.Equal(done, again) {
			t.Fatalf("complete part gives %v, %d, %v; whole file gave %v, %d", again, end2, err, done, end)
		}
	})
}
