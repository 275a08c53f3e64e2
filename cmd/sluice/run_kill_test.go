package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test start this binary as the sluice command: with
// SLUICE_TEST_MAIN=1 it runs main on its arguments instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("SLUICE_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// openAIPrompts writes n OpenAI Batch lines, every third a chat.
func openAIPrompts(t *testing.T, dir string, n, maxTokens int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		if i%3 == 0 {
			fmt.Fprintf(&b, `{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"tell me story %d"}],"max_tokens":%d}}`+"\n", i, i, maxTokens)
		} else {
			fmt.Fprintf(&b, `{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":"once upon a time %d","max_tokens":%d}}`+"\n", i, i, maxTokens)
		}
	}
	path := filepath.Join(dir, "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// batchLine is an OpenAI Batch output line, decoded strictly.
type batchLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int    `json:"status_code"`
		RequestID  string `json:"request_id"`
		Body       struct {
			ID      string `json:"id"`
			Object  string `json:"object"`
			Created int64  `json:"created"`
			Model   string `json:"model"`
			Choices []struct {
				Index   int     `json:"index"`
				Text    *string `json:"text"`
				Message *struct {
					Role    string `json:"role"`
					Content string `json:"content"`
				} `json:"message"`
				Logprobs     any    `json:"logprobs"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
				TotalTokens      int `json:"total_tokens"`
				Details          *struct {
					CachedTokens int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		} `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkBatchOutput checks every line of an OpenAI Batch output file against
// the schema (unknown keys are an error) and returns each custom_id's text,
// failing on a custom_id seen twice.
func checkBatchOutput(t *testing.T, path string, maxTokens int) map[string]string {
	t.Helper()
	texts := map[string]string{}
	data := readFile(t, path)
	if !strings.HasSuffix(data, "\n") {
		t.Fatalf("%s does not end with a newline", path)
	}
	for i, line := range strings.Split(strings.TrimSuffix(data, "\n"), "\n") {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var l batchLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line %d: %v: %s", i+1, err, line)
		}
		if _, dup := texts[l.CustomID]; dup {
			t.Fatalf("line %d: custom_id %q a second time", i+1, l.CustomID)
		}
		r := l.Response
		switch {
		case !strings.HasPrefix(l.ID, "batch_req_") || l.CustomID == "":
			t.Fatalf("line %d: id %q custom_id %q", i+1, l.ID, l.CustomID)
		case l.Error != nil || r == nil:
			t.Fatalf("line %d: error %+v", i+1, l.Error)
		case r.StatusCode != 200 || r.RequestID == "" || r.Body.Created == 0 || r.Body.Model != "m" || len(r.Body.Choices) != 1:
			t.Fatalf("line %d: response %+v", i+1, r)
		case r.Body.Usage == nil || r.Body.Usage.PromptTokens == 0 || r.Body.Usage.CompletionTokens != maxTokens ||
			r.Body.Usage.TotalTokens != r.Body.Usage.PromptTokens+r.Body.Usage.CompletionTokens ||
			r.Body.Usage.Details == nil || r.Body.Usage.Details.CachedTokens < 0 || r.Body.Usage.Details.CachedTokens >= r.Body.Usage.PromptTokens:
			t.Fatalf("line %d: usage %+v", i+1, r.Body.Usage)
		}
		c := r.Body.Choices[0]
		if c.Index != 0 || c.FinishReason != "length" || c.Logprobs != nil {
			t.Fatalf("line %d: choice %+v", i+1, c)
		}
		switch r.Body.Object {
		case "chat.completion":
			if c.Message == nil || c.Message.Role != "assistant" || c.Text != nil || !strings.HasPrefix(r.Body.ID, "chatcmpl-") {
				t.Fatalf("line %d: chat choice %+v", i+1, c)
			}
			texts[l.CustomID] = "chat:" + c.Message.Content
		case "text_completion":
			if c.Text == nil || c.Message != nil || !strings.HasPrefix(r.Body.ID, "cmpl-") {
				t.Fatalf("line %d: completion choice %+v", i+1, c)
			}
			texts[l.CustomID] = *c.Text
		default:
			t.Fatalf("line %d: object %q", i+1, r.Body.Object)
		}
	}
	return texts
}

// Issue "Serve and embed" item 3: an OpenAI Batch file gives OpenAI Batch
// output (chat lines through the chat template), and a run killed with
// SIGKILL at random moments, then rerun, loses and duplicates nothing: the
// final file has every custom_id once, with the text an uninterrupted run
// gives.
func TestRunOpenAIBatchKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the command several times")
	}
	tmp := t.TempDir()
	synth := filepath.Join(tmp, "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "--seed", "5", "-o", synth); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	const n, maxTokens = 200, 32
	in := openAIPrompts(t, tmp, n, maxTokens)
	command := func(out string) *exec.Cmd {
		c := exec.Command(os.Args[0], "run", "greedy", "-m", synth, "--threads", "1", "--prompts", in, "--out", out)
		c.Env = append(os.Environ(), "SLUICE_TEST_MAIN=1")
		return c
	}

	ref := filepath.Join(tmp, "ref.jsonl")
	start := time.Now()
	if b, err := command(ref).CombinedOutput(); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, b)
	}
	full := time.Since(start)
	want := checkBatchOutput(t, ref, maxTokens)
	if len(want) != n {
		t.Fatalf("uninterrupted run: %d results, want %d", len(want), n)
	}
	for id, text := range want {
		if id[0] != 'r' || (strings.HasPrefix(text, "chat:") != (atoi(id[1:])%3 == 0)) {
			t.Fatalf("%s: wrong object for its url", id)
		}
	}

	out := filepath.Join(tmp, "out.jsonl")
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	kills, lines := 0, 0
	for try := 0; try < 20 && kills < 5; try++ {
		c := command(out)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		// Somewhere in the run: loading, the first results, the middle
		// (each run has less left to do).
		wait := time.Duration(rng.Int64N(int64(full)/4 + 1))
		time.Sleep(wait)
		c.Process.Signal(syscall.SIGKILL)
		err := c.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || !ee.Sys().(syscall.WaitStatus).Signaled() {
			t.Logf("run %d ended by itself before the kill (%v)", try, err)
			break
		}
		kills++
		data, _ := os.ReadFile(out)
		torn := len(data) > 0 && data[len(data)-1] != '\n'
		lines = strings.Count(string(data), "\n")
		t.Logf("killed after %v: %d complete lines, torn tail %v (seed %d)", wait, lines, torn, seed)
	}
	if kills == 0 {
		t.Fatalf("no run was killed (seed %d)", seed)
	}
	if b, err := command(out).CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, b)
	}
	got := checkBatchOutput(t, out, maxTokens)
	if len(got) != n {
		t.Fatalf("after %d kills: %d results, want %d (seed %d)", kills, len(got), n, seed)
	}
	for id, text := range want {
		if got[id] != text {
			t.Fatalf("%s: %q after kills, %q uninterrupted (seed %d)", id, got[id], text, seed)
		}
	}
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}
