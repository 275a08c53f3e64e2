package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tensor"
)

// metric reads one unlabelled sample from /metrics (retrying while the
// server refuses the connection: TestMaxConns).
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	var b []byte
	// A fresh connection per attempt, retried: a server at its
	// --max-conns refuses one until it has noticed a closed one go, and a
	// pooled idle connection can be closed under the request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		resp, err := client.Get(base + "/metrics")
		if err != nil {
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			continue
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
		}
	}
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("/metrics has no %s", name)
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type completionReply struct {
	status int
	text   string
	finish string
	body   string
}

func postCompletion(base, prompt string, maxTokens int) completionReply {
	body := fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, prompt, maxTokens)
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return completionReply{body: err.Error()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var c struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	r := completionReply{status: resp.StatusCode, body: string(b)}
	if json.Unmarshal(b, &c) == nil && len(c.Choices) == 1 {
		r.text, r.finish = c.Choices[0].Text, c.Choices[0].FinishReason
	}
	return r
}

// A shutdown gives the grace to every request the server accepted: with one
// sequence in the engine at a time, sixteen requests are accepted, most
// waiting for room in the engine's queue when the shutdown begins, and all
// finish with their whole text (those not yet submitted to the engine used
// to get 503 shutting_down at once).
func TestShutdownGivesQueuedRequestsTheGrace(t *testing.T) {
	const n, maxNew = 16, 200
	eng := engine(t, synthModel(t), 1, maxNew)
	want := complete(t, eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: maxNew})
	s, err := server.New(server.Options{Engine: eng, Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	base, stop, done := serveOn(t, s, time.Minute)
	replies := make([]completionReply, n)
	var wg sync.WaitGroup
	var answered atomic.Int64
	for i := range n {
		wg.Go(func() {
			replies[i] = postCompletion(base, "once upon a time", maxNew)
			answered.Add(1)
		})
	}
	// Shut down once every request is accepted: answered, or in flight
	// (read in that order, a request is never counted twice).
	var waiting float64
	for {
		a := answered.Load()
		in := metric(t, base, "sluice_server_requests_in_flight")
		if float64(a)+in >= n {
			waiting = in - 1 // one runs in the engine
			break
		}
		time.Sleep(time.Millisecond)
	}
	stop()
	t.Logf("shut down with %g requests accepted and waiting for the engine", waiting)
	wg.Wait()
	for i, r := range replies {
		if r.status != http.StatusOK || r.text != want.Completion || r.finish != "length" {
			t.Errorf("request %d: %d %s %q; want 200 with the whole text (%q)", i, r.status, r.finish, r.body, want.Completion)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// With a grace of a nanosecond, requests still waiting for the engine are
// refused (503 shutting_down) or cancelled, never left hanging, and Serve
// returns.
func TestShutdownWithoutGrace(t *testing.T) {
	eng := engine(t, synthModel(t), 1, 200)
	s, err := server.New(server.Options{Engine: eng, Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	base, stop, done := serveOn(t, s, time.Nanosecond)
	replies := make([]completionReply, 8)
	var wg sync.WaitGroup
	var answered atomic.Int64
	for i := range replies {
		wg.Go(func() {
			replies[i] = postCompletion(base, "once upon a time", 200)
			answered.Add(1)
		})
	}
	for a := answered.Load(); float64(a)+metric(t, base, "sluice_server_requests_in_flight") < 8; a = answered.Load() {
		time.Sleep(time.Millisecond)
	}
	stop()
	wg.Wait()
	for i, r := range replies {
		if r.status == 0 || r.status == http.StatusOK && r.finish == "" {
			t.Errorf("request %d: %d %q", i, r.status, r.body)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A client that sends its headers and part of its body, then stalls, gets
// 408 request_timeout once Options.BodyTimeout has passed, and the server
// closes the connection; the server goes on serving.
func TestStalledBodyIsCut(t *testing.T) {
	f := newFixture(t, server.Options{BodyTimeout: 50 * time.Millisecond})
	c, err := net.Dial("tcp", strings.TrimPrefix(f.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":", testKey)
	// No deadline of our own but a generous one against a hang: the test is
	// that the server answers, not how fast.
	c.SetReadDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"code":"request_timeout"`) || !strings.Contains(string(b), "50ms") {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("the connection stayed open after the 408: %v", err)
	}
	if code, body := f.post(t, "/v1/completions", `{"prompt":"once","max_tokens":2}`); code != http.StatusOK {
		t.Fatalf("after the stalled client: %d %s", code, body)
	}
}

// Serve holds at most MaxConns connections: one more is answered 503
// too_many_connections and closed; once a held connection closes, a new one
// is served.
func TestMaxConns(t *testing.T) {
	eng := engine(t, synthModel(t), 1, 8)
	s, err := server.New(server.Options{Engine: eng, Model: "tiny", MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	base, stop, done := serveOn(t, s, time.Second)
	defer func() { stop(); <-done }()
	addr := strings.TrimPrefix(base, "http://")
	get := func(c net.Conn) (*http.Response, string, error) {
		fmt.Fprint(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return nil, "", err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b), nil
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp, body, err := get(c); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d: %v %s", len(held), err, body)
		}
		held = append(held, c)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	resp, body, err := get(c)
	c.Close()
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "too_many_connections") || !strings.Contains(body, "2 connections") {
		t.Fatalf("third connection: %v %v %s", resp, err, body)
	}
	held[0].Close()
	deadline := time.Now().Add(time.Minute)
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp, body, err := get(c)
		c.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one closed: %v %s", err, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := metric(t, base, "sluice_http_connections_refused_total"); got < 1 {
		t.Errorf("sluice_http_connections_refused_total %g after a refusal", got)
	}
}

// A text prompt too long in bytes to fit the context whatever its tokens is
// refused from its length, before tokenizing (the message gives bytes, not
// a token count); one that passes that bound but not the context in tokens
// is still refused by its tokens; chat messages alike.
func TestOversizedPromptRefusedUntokenized(t *testing.T) {
	f := newFixture(t, server.Options{MaxBodyBytes: 16 << 20})
	huge := strings.Repeat("once upon a time ", 5<<20/17)
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", fmt.Sprintf(`{"prompt":%q}`, huge)},
		{"/v1/chat/completions", fmt.Sprintf(`{"messages":[{"role":"user","content":%q}]}`, huge)},
	} {
		code, body := f.post(t, c.path, c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, "context_length_exceeded") || !strings.Contains(body, fmt.Sprintf("the prompt is %d bytes", len(huge))) {
			t.Errorf("%s with %d bytes: %d %.300s", c.path, len(huge), code, body)
		}
	}
	// Over the context in tokens, within the byte bound: tokenized and
	// refused with its token count.
	long := strings.Repeat("a ", f.eng.Context())
	code, body := f.post(t, "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, long))
	if code != http.StatusBadRequest || !strings.Contains(body, "context_length_exceeded") || !strings.Contains(body, "tokens; the prompt has") {
		t.Errorf("%d bytes: %d %.300s", len(long), code, body)
	}
}

// After a request meets a memory fault reading a model file truncated under
// the mmap tier, /health is a 503 naming the fault; once the file is whole
// again and a request completes, it is ok again.
func TestHealthReportsMemoryFault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "six.gguf")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	pr := synth.Preset{Name: "six", Dim: 64, Hidden: 192, Layers: 6, Heads: 4, KVHeads: 2, Context: 128, Vocab: 512}
	if err := synth.Write(fh, synth.Options{Preset: pr, DType: tensor.Q8_0, Seed: 5}); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	l, err := model.Load(context.Background(), model.LoadOptions{Path: path, Tier: offload.Mmap, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	f := newFixture(t, server.Options{Engine: engine(t, l, 2, 4)})
	health := func() (int, string) {
		resp, err := http.Get(f.ts.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := health(); code != http.StatusOK {
		t.Fatalf("health before: %d %s", code, body)
	}
	bad, _ := l.Store.Lookup("blk.3.ffn_up.weight")
	if err := os.Truncate(path, (bad.Offset+bad.Size/2)&^4095); err != nil {
		t.Fatal(err)
	}
	if code, body := f.post(t, "/v1/completions", `{"prompt":"once","max_tokens":4}`); code != http.StatusInternalServerError || !strings.Contains(body, "memory fault") {
		t.Fatalf("completion on the truncated file: %d %s", code, body)
	}
	code, body := health()
	if code != http.StatusServiceUnavailable || !strings.Contains(body, `"status":"model_fault"`) || !strings.Contains(body, "memory fault") || !strings.Contains(body, "six.gguf") {
		t.Fatalf("health after the fault: %d %s", code, body)
	}
	if err := os.WriteFile(path, whole, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := f.post(t, "/v1/completions", `{"prompt":"once","max_tokens":4}`); code != http.StatusOK {
		t.Fatalf("completion on the restored file: %d %s", code, body)
	}
	if code, body := health(); code != http.StatusOK {
		t.Fatalf("health after a completion on the restored file: %d %s", code, body)
	}
}
