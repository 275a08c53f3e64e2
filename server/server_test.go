package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/internal/testutil/synthfile"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tokenizer"
	"github.com/sluicehq/sluice/tokenizer/chat"
	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines and removes the synthetic models
// the tests wrote.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		synthfile.RemoveAll()
		os.Exit(code)
	}))
}

var prompts = []string{"once upon a time", "the little dog", "Lily and Tom went to the park", "a"}

func completionParams(prompt string, maxTokens int) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:     "tiny",
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens: openai.Int(int64(maxTokens)),
	}
}

// Greedy text through the server, streaming or not, is the engine's own
// completion of the same prompt.
func TestCompletionGreedyMatchesEngine(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	for _, pr := range prompts {
		want := complete(t, f.eng, sluice.Request{Prompt: pr, MaxNewTokens: 20})
		got, err := f.client.Completions.New(ctx, completionParams(pr, 20))
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Choices) != 1 || got.Choices[0].Text != want.Completion {
			t.Fatalf("%q: server %+v, engine %q", pr, got.Choices, want.Completion)
		}
		if fr := string(got.Choices[0].FinishReason); fr != want.Finish {
			t.Fatalf("%q: finish %q, engine %q", pr, fr, want.Finish)
		}
		if got.Usage.PromptTokens != int64(want.PromptTokens) || got.Usage.CompletionTokens != int64(want.CompletionTokens) {
			t.Fatalf("%q: usage %+v, engine %d+%d", pr, got.Usage, want.PromptTokens, want.CompletionTokens)
		}
		if got.Object != "text_completion" || got.Model != "tiny" || !strings.HasPrefix(got.ID, "cmpl-") {
			t.Fatalf("response header fields: %+v", got)
		}

		p := completionParams(pr, 20)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		st := f.client.Completions.NewStreaming(ctx, p)
		var text strings.Builder
		var finish string
		var u openai.CompletionUsage
		chunks := 0
		for st.Next() {
			c := st.Current()
			chunks++
			for _, ch := range c.Choices {
				text.WriteString(ch.Text)
				if ch.FinishReason != "" {
					finish = string(ch.FinishReason)
				}
			}
			if c.Usage.TotalTokens > 0 {
				u = c.Usage
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want.Completion || finish != want.Finish {
			t.Fatalf("%q streamed: %q (%s), engine %q (%s)", pr, text.String(), finish, want.Completion, want.Finish)
		}
		if u.CompletionTokens != int64(want.CompletionTokens) || u.PromptTokens != int64(want.PromptTokens) {
			t.Fatalf("%q streamed usage %+v", pr, u)
		}
		if want.CompletionTokens > 2 && chunks < 3 {
			t.Fatalf("%q: %d chunks for %d tokens: not streamed", pr, chunks, want.CompletionTokens)
		}
	}
}

// The raw stream is server-sent events ending with data: [DONE].
func TestStreamWireFormat(t *testing.T) {
	f := newFixture(t, server.Options{})
	code, body := f.post(t, "/v1/completions", `{"prompt":"once upon a time","max_tokens":5,"stream":true}`)
	if code != 200 {
		t.Fatal(code, body)
	}
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("last event %q", events[len(events)-1])
	}
	for _, ev := range events[:len(events)-1] {
		var v map[string]any
		if !strings.HasPrefix(ev, "data: ") || json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &v) != nil {
			t.Fatalf("bad event %q", ev)
		}
	}
}

func chatParams(msgs ...openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, MaxCompletionTokens: openai.Int(16)}
}

// A chat is its rendered template completed by the engine; the stream has
// the assistant role first.
func TestChatCompletion(t *testing.T) {
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Chat: tmpl})
	ctx := context.Background()
	msgs := []chat.Message{{Role: "system", Content: "You tell stories."}, {Role: "user", Content: "Tell me about a dog."}}
	text, err := tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := f.eng.Loaded().Tokenizer
	want := complete(t, f.eng, sluice.Request{Tokens: tok.Encode(text, tokenizer.EncodeOptions{BOS: true, ParseSpecial: true}), MaxNewTokens: 16})

	p := chatParams(openai.SystemMessage("You tell stories."), openai.UserMessage("Tell me about a dog."))
	got, err := f.client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != want.Completion || got.Choices[0].Message.Role != "assistant" {
		t.Fatalf("chat: %+v, engine %q", got.Choices, want.Completion)
	}
	if got.Object != "chat.completion" || got.Usage.PromptTokens != int64(want.PromptTokens) {
		t.Fatalf("chat response: %+v", got)
	}

	st := f.client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	first := true
	for st.Next() {
		c := st.Current()
		if first && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant") {
			t.Fatalf("first chunk %+v", c)
		}
		first = false
		acc.AddChunk(c)
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != want.Completion {
		t.Fatalf("streamed chat %q, engine %q", got, want.Completion)
	}
	if string(acc.Choices[0].FinishReason) != want.Finish {
		t.Fatalf("streamed finish %q, engine %q", acc.Choices[0].FinishReason, want.Finish)
	}
}

// n = 2 with a seed: two different choices, the same on every call; another
// seed gives other text.
func TestNAndSeed(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	run := func(seed int64, stream bool) [2]string {
		p := completionParams("once upon a time", 24)
		p.N, p.Seed, p.Temperature = openai.Int(2), openai.Int(seed), openai.Float(1.0)
		var out [2]string
		if !stream {
			r, err := f.client.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Choices) != 2 {
				t.Fatalf("%d choices", len(r.Choices))
			}
			for _, c := range r.Choices {
				out[c.Index] = c.Text
			}
			return out
		}
		st := f.client.Completions.NewStreaming(ctx, p)
		for st.Next() {
			for _, c := range st.Current().Choices {
				out[c.Index] += c.Text
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a, b, s, c := run(7, false), run(7, false), run(7, true), run(8, false)
	if a != b || a != s {
		t.Fatalf("seed 7 twice (and streamed) differ: %q, %q, %q", a, b, s)
	}
	if a[0] == a[1] {
		t.Fatalf("n = 2 gave the same text twice: %q", a[0])
	}
	if a == c {
		t.Fatalf("seeds 7 and 8 gave the same text: %q", a)
	}
}

// A stop string ends the choice and is cut, streaming or not, and is never
// sent even when its tokens arrive one at a time.
func TestStopStrings(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	full := complete(t, f.eng, sluice.Request{Prompt: "once upon a time", MaxNewTokens: 24}).Completion
	if len(full) < 12 {
		t.Fatalf("completion too short to cut: %q", full)
	}
	stop := full[6:10]
	want := full[:strings.Index(full, stop)]
	p := completionParams("once upon a time", 24)
	p.Stop = openai.CompletionNewParamsStopUnion{OfStringArray: []string{"\x00never", stop}}
	r, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if r.Choices[0].Text != want || r.Choices[0].FinishReason != "stop" {
		t.Fatalf("stop %q: %q (%s), want %q", stop, r.Choices[0].Text, r.Choices[0].FinishReason, want)
	}
	if r.Usage.CompletionTokens >= 24 {
		t.Fatalf("generated %d tokens past the stop", r.Usage.CompletionTokens)
	}
	st := f.client.Completions.NewStreaming(ctx, p)
	var text strings.Builder
	for st.Next() {
		for _, c := range st.Current().Choices {
			text.WriteString(c.Text)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want {
		t.Fatalf("streamed with stop %q: %q, want %q", stop, text.String(), want)
	}
}

// Logprobs are the raw distribution's: under greedy decoding the sampled
// token is the top alternative, with the same log-probability.
func TestLogprobs(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	p := completionParams("once upon a time", 8)
	p.Logprobs = openai.Int(3)
	r, err := f.client.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	lp := r.Choices[0].Logprobs
	if int64(len(lp.TokenLogprobs)) != r.Usage.CompletionTokens || len(lp.TopLogprobs) != len(lp.Tokens) {
		t.Fatalf("logprobs for %d tokens: %+v", r.Usage.CompletionTokens, lp)
	}
	for i, top := range lp.TopLogprobs {
		if len(top) == 0 || len(top) > 3 || lp.TokenLogprobs[i] > 0 {
			t.Fatalf("token %d: %v, top %v", i, lp.TokenLogprobs[i], top)
		}
		best := -1e9
		for _, v := range top {
			best = max(best, v)
		}
		if lp.TokenLogprobs[i] != best {
			t.Fatalf("token %d: greedy token logprob %v, best alternative %v", i, lp.TokenLogprobs[i], best)
		}
	}

	cp := chatParams(openai.UserMessage("hello"))
	cp.Logprobs, cp.TopLogprobs = openai.Bool(true), openai.Int(2)
	cr, err := f.client.Chat.Completions.New(ctx, cp)
	if err != nil {
		t.Fatal(err)
	}
	content := cr.Choices[0].Logprobs.Content
	if int64(len(content)) != cr.Usage.CompletionTokens {
		t.Fatalf("chat logprobs: %d entries for %d tokens", len(content), cr.Usage.CompletionTokens)
	}
	for _, c := range content {
		if len(c.TopLogprobs) != 2 || c.TopLogprobs[0].Logprob != c.Logprob || c.TopLogprobs[0].Token != c.Token {
			t.Fatalf("chat logprob entry %+v", c)
		}
	}
}

func apiErr(t *testing.T, err error, status int, param, code string) {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want an API error", err, err)
	}
	if e.StatusCode != status || e.Param != param || e.Code != code || e.Message == "" || e.Type == "" {
		t.Fatalf("error: status %d param %q code %q type %q message %q; want %d %q %q", e.StatusCode, e.Param, e.Code, e.Type, e.Message, status, param, code)
	}
}

func TestClientErrors(t *testing.T) {
	f := newFixture(t, server.Options{})
	ctx := context.Background()
	bad := openai.NewClient(option.WithBaseURL(f.ts.URL+"/v1/"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	_, err := bad.Completions.New(ctx, completionParams("x", 2))
	apiErr(t, err, 401, "", "invalid_api_key")
	_, err = bad.Models.List(ctx)
	if err == nil {
		t.Fatal("models without the key")
	}

	p := completionParams("x", 2)
	p.Model = "gpt-4"
	_, err = f.client.Completions.New(ctx, p)
	apiErr(t, err, 404, "", "model_not_found")
	cp := chatParams(openai.UserMessage("x"))
	cp.Model = "gpt-4"
	_, err = f.client.Chat.Completions.New(ctx, cp)
	apiErr(t, err, 404, "", "model_not_found")

	for _, c := range []struct {
		mod   func(*openai.CompletionNewParams)
		param string
	}{
		{func(p *openai.CompletionNewParams) { p.Temperature = openai.Float(-1) }, "temperature"},
		{func(p *openai.CompletionNewParams) { p.TopP = openai.Float(1.5) }, "top_p"},
		{func(p *openai.CompletionNewParams) { p.N = openai.Int(1000) }, "n"},
		{func(p *openai.CompletionNewParams) { p.MaxTokens = openai.Int(1 << 30) }, "max_tokens"},
		{func(p *openai.CompletionNewParams) { p.PresencePenalty = openai.Float(0.5) }, "presence_penalty"},
		{func(p *openai.CompletionNewParams) { p.FrequencyPenalty = openai.Float(0.5) }, "frequency_penalty"},
		{func(p *openai.CompletionNewParams) { p.Logprobs = openai.Int(50) }, "logprobs"},
		{func(p *openai.CompletionNewParams) { p.Seed = openai.Int(-7) }, "seed"},
		{func(p *openai.CompletionNewParams) {
			p.Prompt = openai.CompletionNewParamsPromptUnion{OfString: openai.String(strings.Repeat("once upon a time ", 200))}
		}, "prompt"},
		{func(p *openai.CompletionNewParams) {
			p.Prompt = openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 99999}}
		}, "prompt"},
	} {
		p := completionParams("x", 2)
		c.mod(&p)
		_, err := f.client.Completions.New(ctx, p)
		code := ""
		if strings.HasPrefix(c.param, "prompt") && p.Prompt.OfString.Valid() {
			code = "context_length_exceeded"
		}
		apiErr(t, err, 400, c.param, code)
	}
	cp = chatParams()
	_, err = f.client.Chat.Completions.New(ctx, cp)
	apiErr(t, err, 400, "messages", "")
	cp = chatParams(openai.UserMessage("x"))
	cp.TopLogprobs = openai.Int(2)
	_, err = f.client.Chat.Completions.New(ctx, cp)
	apiErr(t, err, 400, "top_logprobs", "")

	ms, err := f.client.Models.List(ctx)
	if err != nil || len(ms.Data) != 1 || ms.Data[0].ID != "tiny" {
		t.Fatalf("models: %+v %v", ms, err)
	}
	if _, err := f.client.Models.Get(ctx, "other"); err == nil {
		t.Fatal("unknown model found")
	}
}

// More choices than the server may hold waiting get 503 at once.
func TestOverloaded(t *testing.T) {
	f := newFixture(t, server.Options{MaxWaiting: 1, Engine: engine(t, synthModel(t), 1, 4)})
	p := completionParams("x", 2)
	p.N = openai.Int(3)
	_, err := f.client.Completions.New(context.Background(), p)
	apiErr(t, err, 503, "", "server_overloaded")
	p.N = openai.Int(2)
	if _, err := f.client.Completions.New(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// Malformed requests get OpenAI-shaped 4xx errors, over plain HTTP.
func TestMalformed(t *testing.T) {
	f := newFixture(t, server.Options{MaxBodyBytes: 1 << 20})
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/completions", `{"prompt": "x", "max_tokens": 3`, 400, ""},
		{"/v1/completions", ``, 400, ""},
		{"/v1/completions", `[1, 2]`, 400, ""},
		{"/v1/completions", `{"prompt": 5}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "x", "max_tokens": "ten"}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "x", "stop": 3}`, 400, "stop"},
		{"/v1/completions", `{"prompt": "x", "n": 0}`, 400, "n"},
		{"/v1/completions", `{"prompt": "x", "temperature": 1e400}`, 400, "temperature"},
		{"/v1/completions", `{"prompt": "x"} trailing`, 400, ""},
		{"/v1/completions", `{}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": []}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "x", "stream_options": {"include_usage": true}}`, 400, "stream_options"},
		{"/v1/chat/completions", `{"messages": "hi"}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages": []}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages": [{"role": "wizard", "content": "x"}]}`, 400, "messages[0].role"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content[0]"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": 7}]}`, 400, "messages[0].content"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}`, 400, "tools[0].function.name"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": -1}`, 400, "max_completion_tokens"},
		{"/v1/completions", `{"prompt": "` + strings.Repeat("a", 2<<20) + `"}`, 413, ""},
		{"/v1/nothing", `{}`, 404, ""},
	} {
		code, body := f.post(t, c.path, c.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		short := c.body[:min(len(c.body), 80)]
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
			t.Fatalf("%s %s: %d %q is not an OpenAI error", c.path, short, code, body)
		}
		param := ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if code != c.status || param != c.param {
			t.Fatalf("%s %s: %d param %q (%s), want %d param %q", c.path, short, code, param, e.Error.Message, c.status, c.param)
		}
	}
	resp, err := http.Get(f.ts.URL + "/v1/completions")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Fatalf("GET /v1/completions: %d", resp.StatusCode)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	f := newFixture(t, server.Options{})
	if _, err := f.client.Completions.New(context.Background(), completionParams("once", 4)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(f.ts.URL + "/health")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"ok"`) {
		t.Fatalf("health: %d %s", resp.StatusCode, b)
	}
	req, _ := http.NewRequest("GET", f.ts.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"sluice_queue_depth 0", "sluice_running_sequences 0", "sluice_kv_pages_in_use 0", "sluice_kv_pages ", "sluice_kv_frames_resident 0", "sluice_kv_frame_misses_total 0", "sluice_kv_spill_read_bytes_total 0",
		"sluice_steps_total ", "sluice_generation_tokens_total 4", "sluice_prompt_tokens_total ", `sluice_http_requests_total{code="200",endpoint="completions"} 1`} {
		if !strings.Contains(string(b), m) {
			t.Fatalf("metrics lack %q:\n%s", m, b)
		}
	}
	resp, err = http.Get(f.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("metrics without the key: %d", resp.StatusCode)
	}
}

// The real stories260K model through HTTP prints llama2.c's golden text.
func TestStories260KGolden(t *testing.T) {
	dir := testutil.Models(t)
	l, err := model.Load(context.Background(), model.LoadOptions{
		Path: filepath.Join(dir, "stories260K", "stories260K.bin"), Tokenizer: filepath.Join(dir, "stories260K", "tok512.bin"), Threads: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	golden, err := os.ReadFile(filepath.Join(dir, "stories260K", "expected-greedy-prompt-lily-tom-64.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Engine: engine(t, l, 4, 256)})
	r, err := f.client.Completions.New(context.Background(), completionParams("Lily and Tom", 60))
	if err != nil {
		t.Fatal(err)
	}
	if got := "Lily and Tom" + r.Choices[0].Text + "\n"; got != string(golden) {
		t.Fatalf("got %q\nwant %q", got, golden)
	}
}
