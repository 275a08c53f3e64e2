package batch

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A second batch on the same results file is refused while the first holds
// it, and may go once the first has closed it.
func TestResultsLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.jsonl")
	r1, err := OpenResults(path, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = OpenResults(path, ResumeOptions{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "being written by another batch") {
		t.Fatalf("second writer: %v, want ErrLocked", err)
	}
	if _, _, err := Resume(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("Resume: %v, want ErrLocked", err)
	}
	r1.Close()
	r2, err := OpenResults(path, ResumeOptions{})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	r2.Close()
}

// Error lines (sluice's "error" string, OpenAI's "error" object or a
// status other than 200) count as done unless RetryErrors, which removes
// them, and the torn tail, and keeps every other line as it was.
func TestRetryErrors(t *testing.T) {
	content := `{"custom_id":"ok1","text":"a"}
{"custom_id":"bad1","error":"x"}
{"id":"batch_req_1","custom_id":"ok2","response":{"status_code":200,"request_id":"r","body":{}},"error":null}
{"id":"batch_req_2","custom_id":"bad2","response":null,"error":{"code":"invalid_request","message":"m"}}
{"id":"batch_req_3","custom_id":"bad3","response":{"status_code":400,"request_id":"r","body":{}},"error":null}
{"custom_id":"ok3","text":"b","error":""}
{"custom_id":"torn`
	path := writeFile(t, "out.jsonl", content)
	r, err := OpenResults(path, ResumeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Done) != 6 || r.Errors != 3 || r.Retried != 0 {
		t.Fatalf("without retry: %d done, %d errors, %d retried; want 6, 3, 0", len(r.Done), r.Errors, r.Retried)
	}
	r.Close()

	r, err = OpenResults(path, ResumeOptions{RetryErrors: true})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"ok1": true, "ok2": true, "ok3": true}
	if d := cmp.Diff(want, r.Done); d != "" || r.Errors != 0 || r.Retried != 3 {
		t.Fatalf("retry: done (-want +got):\n%s errors %d retried %d", d, r.Errors, r.Retried)
	}
	if _, err := io.WriteString(r.File, "{\"custom_id\":\"bad1\",\"text\":\"c\"}\n"); err != nil {
		t.Fatal(err)
	}
	// The renamed file is the locked one.
	if _, err := OpenResults(path, ResumeOptions{}); !errors.Is(err, ErrLocked) {
		t.Fatalf("the rewritten file is not locked: %v", err)
	}
	r.Close()
	lines := strings.Split(content, "\n")
	got, _ := os.ReadFile(path)
	wantFile := lines[0] + "\n" + lines[2] + "\n" + lines[5] + "\n" + `{"custom_id":"bad1","text":"c"}` + "\n"
	if string(got) != wantFile {
		t.Fatalf("file after retry:\n%s\nwant:\n%s", got, wantFile)
	}
	if m, _ := filepath.Glob(path + ".retry-*"); len(m) > 0 {
		t.Fatalf("left behind: %v", m)
	}
}

// Duplicated custom_ids are refused before a run, all of them named;
// generated ids carry the prefix.
func TestPrecheck(t *testing.T) {
	c, err := Precheck(strings.NewReader("{\"custom_id\":\"a\",\"prompt\":\"x\"}\n{\"prompt\":\"y\"}\n{\"custom_id\":\"a\",\"prompt\":\"z\"}\n"), "p.jsonl", Auto, "", nil)
	if !errors.Is(err, ErrDuplicateID) || c.Requests != 3 || c.Format != JSONL ||
		!strings.Contains(err.Error(), `p.jsonl: 1 line(s) repeat an earlier line's custom_id (line 3: duplicate custom_id "a" (first on line 1))`) {
		t.Fatalf("check %+v err %v", c, err)
	}
	c, err = Precheck(strings.NewReader("one\n\ntwo\n"), "p.txt", Auto, "p.txt:", map[string]bool{"p.txt:line-1": true})
	if err != nil || c != (Check{Requests: 2, Todo: 1, Format: Text}) {
		t.Fatalf("text: %+v %v", c, err)
	}
	rd := NewReader(strings.NewReader("one\n\ntwo\n"), "p.txt", Auto)
	rd.SetIDPrefix("p.txt:")
	rd.Next()
	if r, _ := rd.Next(); r.CustomID != "p.txt:line-3" {
		t.Fatalf("prefixed id %q", r.CustomID)
	}
}

// stop, top_p, top_k and min_p are read; n, logprobs and the other options
// a batch cannot honour are refused unless neutral, never dropped.
func TestReaderOptions(t *testing.T) {
	rd := NewReader(strings.NewReader(`{"custom_id":"a","prompt":"x","stop":"\n","top_p":0.9,"top_k":-1,"min_p":0.1,"n":1,"logprobs":null,"stream":false,"presence_penalty":0}
{"custom_id":"b","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"stop":["a","","b"],"top_k":5}}
{"custom_id":"c","prompt":"x","n":2}
{"custom_id":"d","prompt":"x","logprobs":3}
{"custom_id":"e","prompt":"x","top_p":1.5}
{"custom_id":"f","prompt":"x","stop":[1]}
{"custom_id":"g","url":"/v1/completions","body":{"prompt":"x","echo":true}}
{"custom_id":"h","prompt":"x","frequency_penalty":0.5}
`), "p.jsonl", Auto)
	var got []Request
	for {
		r, err := rd.Next()
		if err != nil {
			break
		}
		got = append(got, r)
	}
	k0, k5 := 0, 5
	if d := cmp.Diff(Request{Line: 1, CustomID: "a", Prompt: "x", Stop: []string{"\n"}, TopP: f64(0.9), TopK: &k0, MinP: f64(0.1)}, got[0]); d != "" {
		t.Errorf("line 1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff(Request{Line: 2, CustomID: "b", Messages: []Message{{"user", "hi"}}, Stop: []string{"a", "b"}, TopK: &k5}, got[1]); d != "" {
		t.Errorf("line 2 (-want +got):\n%s", d)
	}
	for i, want := range []string{
		`p.jsonl:3: "n" is 2: not supported (one choice per line: write a line per choice, each with its own custom_id and seed)`,
		`p.jsonl:4: "logprobs" is 3: not supported`,
		`p.jsonl:5: "top_p" must be a number from 0 to 1, got 1.5`,
		`p.jsonl:6: "stop" must be a string or an array of strings, got [1]`,
		`p.jsonl:7: "body.echo" is true: not supported`,
		`p.jsonl:8: "frequency_penalty" is 0.5: not supported`,
	} {
		r := got[i+2]
		if r.Err == nil || !strings.HasPrefix(r.Err.Error(), want) {
			t.Errorf("line %d: %v, want %s…", r.Line, r.Err, want)
		}
	}
}
