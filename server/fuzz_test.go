package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/server"
)

var badBodies = []string{
	``,
	`{`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": true, "stream_options": {"include_usage": true}}`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "n": 2, "logprobs": true, "top_logprobs": 3, "stop": ["a", "b"]}`,
	`{"messages": "hi"}`,
	`{"messages": []}`,
	`{"messages": [{}]}`,
	`{"messages": [{"role": "user", "content": null}], "max_tokens": 2}`,
	`{"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text"}]}]}`,
	`{"messages": [{"role": "user", "content": "hi"}], "n": 1000000}`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1000000000}`,
	`{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0}`,
	`{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}`,
	`{"messages": [{"role": "user", "content": "hi"}], "seed": 1.5}`,
	`{"messages": [{"role": "user", "content": "hi"}], "stop": [1, 2]}`,
	`{"messages": [{"role": "user", "content": "hi"}], "top_k": -5}`,
	`{"messages": [{"role": "user", "content": "hi"}], "model": "other"}`,
	`{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 3000) + `"}]}`,
	`{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"enum": [1, "b"]}}}}}}`,
	`{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object", "schema": {"$ref": "#"}}}`,
	`{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema"}, "grammar": "root ::= [a-"}`,
	`{"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= \"\\u00e9\" [0-9]*", "max_tokens": 4}`,
	`{"messages": [{"role": "user", "content": "hi"}], "json_schema": {"type": "string", "pattern": "^(a|b)+$"}}`,
	`null`,
	`[]`,
	`"string"`,
	"\xff\xfe",
}

// FuzzChatCompletions feeds arbitrary bodies to the chat handler: every
// answer is a 200 chat completion (or stream) or an OpenAI error with a 4xx
// status (503 if the queue is full); never a panic or a 500. Run by count in
// CI, e.g. -fuzz FuzzChatCompletions -fuzztime 2000x.
func FuzzChatCompletions(f *testing.F) {
	for _, b := range badBodies {
		f.Add([]byte(b))
	}
	l := synthModel(f)
	p := pipelines.Greedy()
	p.Model.Context = 64
	p.Scheduler().MaxInFlight, p.Scheduler().MaxNewTokens = 4, 8
	eng, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { eng.Close() })
	s, err := server.New(server.Options{Engine: eng, Model: "tiny", MaxBodyBytes: 64 << 10, MaxN: 4})
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, body []byte) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "/v1/chat/completions", strings.NewReader(string(body)))
		h.ServeHTTP(rec, req)
		checkAnswer(t, rec, body)
	})
}

func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, body []byte) {
	t.Helper()
	short := string(body[:min(len(body), 120)])
	switch code := rec.Code; {
	case code == 200 && strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream"):
		if !strings.HasSuffix(rec.Body.String(), "data: [DONE]\n\n") {
			t.Fatalf("%q: stream without [DONE]: %q", short, rec.Body.String())
		}
	case code == 200:
		var v struct {
			Object  string `json:"object"`
			Choices []any  `json:"choices"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil || v.Object != "chat.completion" || len(v.Choices) == 0 {
			t.Fatalf("%q: 200 with %q", short, rec.Body.String())
		}
	case code >= 400 && code < 500 || code == 503:
		var e struct {
			Error *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%q: %d without an OpenAI error: %q", short, code, rec.Body.String())
		}
	default:
		t.Fatalf("%q: status %d: %q", short, code, rec.Body.String())
	}
}

// Bad requests, a 10 MB body among them, hammer the server while a good
// client streams: the good client's text is the engine's own.
func TestBadInputDoesNotDisturb(t *testing.T) {
	f := newFixture(t, server.Options{})
	want := complete(t, f.eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 24}).Completion
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		huge := `{"messages": [{"role": "user", "content": "` + strings.Repeat("x", 10<<20) + `"}]}`
		for _, b := range append(badBodies, huge) {
			code, body := f.post(t, "/v1/chat/completions", b)
			if code == 500 || code == 0 {
				t.Errorf("%q: %d %s", b[:min(len(b), 80)], code, body)
			}
			if b == huge && code != 413 {
				t.Errorf("10 MB body: %d, want 413", code)
			}
		}
	}()
	for range 3 {
		st := f.client.Completions.NewStreaming(ctx, completionParams("once upon a time", 24))
		var text strings.Builder
		for st.Next() {
			for _, c := range st.Current().Choices {
				text.WriteString(c.Text)
			}
		}
		if err := st.Err(); err != nil || text.String() != want {
			t.Fatalf("good client: %q (%v), want %q", text.String(), err, want)
		}
	}
	wg.Wait()
}
