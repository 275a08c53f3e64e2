package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	results := []Result{
		{CustomID: "a", Text: "x < y & z", PromptTokens: 3, CompletionTokens: 5, FinishReason: "stop", PrefillMS: 1.23456789, DecodeMS: 20},
		{CustomID: "b", PromptTokens: 0, CompletionTokens: 0, Error: "p.jsonl:2: missing \"prompt\""},
		{CustomID: "c", Text: "é\n\"q\"", PrefillMS: math.NaN(), DecodeMS: math.Inf(1)},
	}
	for _, r := range results {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	want := `{"custom_id":"a","text":"x < y & z","prompt_tokens":3,"completion_tokens":5,"finish_reason":"stop","prefill_ms":1.235,"decode_ms":20}
{"custom_id":"b","prompt_tokens":0,"completion_tokens":0,"error":"p.jsonl:2: missing \"prompt\""}
{"custom_id":"c","text":"é\n\"q\"","prompt_tokens":0,"completion_tokens":0}
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// countingWriter records the size of every Write call.
type countingWriter struct{ writes []int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return len(p), nil
}

func TestWriterOneWritePerLine(t *testing.T) {
	var c countingWriter
	w := NewWriter(&c)
	for i := range 3 {
		if err := w.Write(Result{CustomID: fmt.Sprint(i), Text: strings.Repeat("t", 100<<10)}); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.writes) != 3 {
		t.Errorf("%d Write calls for 3 results; each line must be a single write", len(c.writes))
	}
}

func TestWriterFlushes(t *testing.T) {
	var b bytes.Buffer
	bw := bufio.NewWriterSize(&b, 1<<20)
	if err := NewWriter(bw).Write(Result{CustomID: "a"}); err != nil {
		t.Fatal(err)
	}
	if b.Len() == 0 {
		t.Error("the line is still in the bufio.Writer; Write must flush it")
	}
}

type failWriter struct {
	n   int
	err error
}

func (f failWriter) Write(p []byte) (int, error) { return min(f.n, len(p)), f.err }

func TestWriterErrors(t *testing.T) {
	boom := errors.New("disk full")
	tests := []struct {
		name string
		w    io.Writer
		want error
	}{
		{"write error", failWriter{0, boom}, boom},
		{"short write", failWriter{3, nil}, io.ErrShortWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := NewWriter(tc.w).Write(Result{CustomID: "a"})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `"a"`) {
				t.Errorf("Write = %v; want %v naming the custom_id", err, tc.want)
			}
		})
	}
}

func TestWriterConcurrent(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				if err := w.Write(Result{CustomID: fmt.Sprintf("%d-%d", g, i), Text: strings.Repeat("x", 1000)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	sc, err := scanDone(&b, "buf", nil)
	done := sc.done
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 200 {
		t.Errorf("%d distinct results read back, want 200", len(done))
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDone(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    map[string]bool
		wantErr string
	}{
		{"empty", "", map[string]bool{}, ""},
		{"complete lines", "{\"custom_id\":\"a\"}\n\n{\"custom_id\":\"b\",\"error\":\"x\"}\n", map[string]bool{"a": true, "b": true}, ""},
		{"torn last line ignored", "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\",\"te", map[string]bool{"a": true}, ""},
		{"unterminated complete object ignored too", "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\"}", map[string]bool{"a": true}, ""},
		{"long line", "{\"custom_id\":\"a\",\"text\":\"" + strings.Repeat("z", 2<<20) + "\"}\n", map[string]bool{"a": true}, ""},
		{"corrupt middle line", "{\"custom_id\":\"a\"}\n{\"custom_id\":\"b\",\"te{\"custom_id\":\"c\"}\n", nil,
			"batch: corrupt results file: out.jsonl:2: not a result line: invalid character 'c' after object key (at byte 23)"},
		{"no custom_id", "{\"text\":\"a\"}\n", nil, "batch: corrupt results file: out.jsonl:1: result has no custom_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done, err := Done(writeFile(t, "out.jsonl", tc.content))
			if tc.wantErr != "" {
				if !errors.Is(err, ErrCorrupt) || !strings.HasPrefix(err.Error(), "batch: corrupt results file: ") ||
					!strings.HasSuffix(err.Error(), strings.TrimPrefix(tc.wantErr, "batch: corrupt results file: out.jsonl")) {
					t.Errorf("Done = %v\nwant  %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, done); diff != "" {
				t.Errorf("Done (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDoneMissingFile(t *testing.T) {
	done, err := Done(filepath.Join(t.TempDir(), "none.jsonl"))
	if err != nil || len(done) != 0 {
		t.Errorf("Done(missing) = %v, %v; want an empty map", done, err)
	}
	if _, err := Done(t.TempDir()); err == nil {
		t.Error("Done(a directory) succeeded")
	}
}

// TestCrashAtEveryByte kills a batch (truncates its output) at every byte
// offset, resumes it, and checks that every request ends up in the file
// exactly once: nothing lost, nothing duplicated.
func TestCrashAtEveryByte(t *testing.T) {
	ids := []string{"a", "b", "c", "d"}
	result := func(id string) Result {
		return Result{CustomID: id, Text: "text of " + id + " <&>", PromptTokens: 2, CompletionTokens: 3, FinishReason: "length", DecodeMS: 1.5}
	}
	var full bytes.Buffer
	w := NewWriter(&full)
	for _, id := range ids {
		if err := w.Write(result(id)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	for cut := 0; cut <= full.Len(); cut++ {
		path := filepath.Join(dir, fmt.Sprintf("out-%d.jsonl", cut))
		if err := os.WriteFile(path, full.Bytes()[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		done, f, err := Resume(path)
		if err != nil {
			t.Fatalf("cut %d: Resume: %v", cut, err)
		}
		rw := NewWriter(f)
		for _, id := range ids {
			if !done[id] {
				if err := rw.Write(result(id)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		for i, line := range strings.Split(strings.TrimSuffix(string(got), "\n"), "\n") {
			var r Result
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("cut %d: line %d of the resumed file is broken: %v\n%s", cut, i+1, err, got)
			}
			if diff := cmp.Diff(result(r.CustomID), r); diff != "" {
				t.Fatalf("cut %d: result %q changed (-want +got):\n%s", cut, r.CustomID, diff)
			}
			count[r.CustomID]++
		}
		for _, id := range ids {
			if count[id] != 1 {
				t.Fatalf("cut %d: %q appears %d times", cut, id, count[id])
			}
		}
	}
}

func TestResumeCreates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.jsonl")
	done, f, err := Resume(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(done) != 0 {
		t.Errorf("done = %v", done)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("Resume did not create the file: %v", err)
	}
}

func TestResumeCorrupt(t *testing.T) {
	path := writeFile(t, "out.jsonl", "not json\n{\"custom_id\":\"a\"}\n")
	_, f, err := Resume(path)
	if !errors.Is(err, ErrCorrupt) || f != nil {
		t.Fatalf("Resume = %v, %v; want ErrCorrupt and no file", f, err)
	}
	got, _ := os.ReadFile(path)
	if string(got) != "not json\n{\"custom_id\":\"a\"}\n" {
		t.Errorf("Resume modified a corrupt file: %q", got)
	}
}
