package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tensor"
)

// synthModel loads the tiny synthetic llama (seeded random weights, a
// 512-piece vocabulary), written once per test binary.
func synthModel(t testing.TB) *model.Loaded {
	t.Helper()
	path := synthfile.Path(t, synthfile.Options{DType: tensor.Q8_0, Seed: 3})
	l, err := model.Load(context.Background(), model.LoadOptions{Path: path, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// engine runs the greedy preset with inFlight sequences and maxNew tokens.
func engine(t testing.TB, l *model.Loaded, inFlight, maxNew int) *sluice.Engine {
	t.Helper()
	p := pipelines.Greedy()
	sc := p.Scheduler()
	sc.MaxInFlight, sc.PrefillChunk, sc.MaxNewTokens = inFlight, 16, maxNew
	e, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

type fixture struct {
	eng    *sluice.Engine
	srv    *server.Server
	ts     *httptest.Server
	client openai.Client
}

const testKey = "sk-test"

// newFixture serves an engine (4 in flight, 24 new tokens by default) on a
// loopback httptest server with the API key testKey.
func newFixture(t testing.TB, o server.Options) *fixture {
	t.Helper()
	if o.Engine == nil {
		o.Engine = engine(t, synthModel(t), 4, 24)
	}
	if o.Model == "" {
		o.Model = "tiny"
	}
	if o.APIKey == "" {
		o.APIKey = testKey
	}
	s, err := server.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	c := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(o.APIKey), option.WithMaxRetries(0))
	return &fixture{eng: o.Engine, srv: s, ts: ts, client: c}
}

// post sends a raw body with the key and returns the status and body.
func (f *fixture) post(t testing.TB, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// complete is the engine's own greedy completion of prompt.
func complete(t testing.TB, e *sluice.Engine, req sluice.Request) sluice.Result {
	t.Helper()
	r, err := e.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
