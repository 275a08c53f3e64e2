package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to write and read from two goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// serve starts on a free port, answers a chat completion with the key and
// refuses one without it, and shuts down cleanly when its context ends.
func TestServe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "-o", path); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "-m", path, "--addr", "127.0.0.1:0", "--api-key", "k", "--parallel", "2", "--chat-template", "chatml", "--threads", "1"},
			strings.NewReader(""), io.Discard, &stderr)
	}()
	re := regexp.MustCompile(`on (http://[0-9.:]+)`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); base == ""; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("serve ended: %v\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "serving tiny") || !strings.Contains(stderr.String(), "chat template chatml") {
		t.Fatalf("banner: %s", stderr.String())
	}
	post := func(key string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	if code, v := post("k"); code != 200 || v["object"] != "chat.completion" {
		t.Fatalf("chat: %d %v", code, v)
	}
	if code, _ := post("wrong"); code != 401 {
		t.Fatalf("bad key: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not shut down")
	}
}

// generate --chat prints only the reply to the prompt rendered as a user turn.
func TestGenerateChat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if _, stderr, err := cli(t, "", "gen-model", "--preset", "tiny", "--dtype", "q8_0", "-o", path); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	plain, _, err := cli(t, "", "generate", "-m", path, "--temp", "0", "-n", "8", "-p", "hi")
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, err := cli(t, "", "generate", "-m", path, "--temp", "0", "-n", "8", "-p", "hi", "--chat", "--chat-template", "chatml")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if out == plain || strings.Contains(out, "<|im_start|>") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("--chat printed %q (plain %q)", out, plain)
	}
	if _, _, err := cli(t, "", "generate", "-m", path, "-n", "2", "--chat", "--chat-template", "no-such"); err == nil || !strings.Contains(err.Error(), "no-such") {
		t.Fatalf("unknown template: %v", err)
	}
}
