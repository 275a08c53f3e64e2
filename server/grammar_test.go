package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

func schemaFormat(t *testing.T, src string) openai.ChatCompletionNewParamsResponseFormatUnion {
	t.Helper()
	var schema map[string]any
	if err := json.Unmarshal([]byte(src), &schema); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "out", Schema: schema, Strict: openai.Bool(true)}}}
}

// response_format through the official client on stories260K at
// temperature 0.8: the property-test schemas (those that are objects, as
// OpenAI's json_schema wants) at 3 seeds on chat, and every schema at 3
// seeds on completions (response_format set as vLLM and llama-server take
// it); every choice that finished with stop validates. json_object gives an
// object.
func TestResponseFormatValid(t *testing.T) {
	l := enginetest.Stories(t, 1)
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Engine: enginetest.Plain(t, l, 0.8, 1), Chat: tmpl})
	b, err := os.ReadFile(filepath.Join(testutil.Root(), "grammar", "testdata", "property_schemas.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var mu sync.Mutex
	stopped, total := 0, 0
	check := func(i int, seed int64, src, out, finish string) {
		mu.Lock()
		defer mu.Unlock()
		total++
		if finish != "stop" {
			return
		}
		stopped++
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
		if err != nil {
			t.Errorf("schema %d seed %d: not JSON: %q", i, seed, out)
			return
		}
		if err := testutil.Schema(t, src).Validate(inst); err != nil {
			t.Errorf("schema %d seed %d: %q does not validate: %v", i, seed, out, err)
		}
	}
	var wg sync.WaitGroup
	for i, src := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if testing.Short() && i%4 != 0 {
			continue // the race, purego and simd builds: every fourth schema
		}
		for seed := range int64(3) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rf map[string]any
				if err := json.Unmarshal([]byte(`{"type":"json_schema","json_schema":{"name":"out","strict":true,"schema":`+src+`}}`), &rf); err != nil {
					t.Error(err)
					return
				}
				r, err := f.client.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
					MaxTokens: openai.Int(200), Temperature: openai.Float(0.8), Seed: openai.Int(seed)}, option.WithJSONSet("response_format", rf))
				if err != nil {
					t.Error(err)
					return
				}
				check(i, seed, src, r.Choices[0].Text, string(r.Choices[0].FinishReason))
				if !strings.HasPrefix(src, `{"type":"object"`) {
					return
				}
				p := chatParams(openai.UserMessage("Tell me about a dog."))
				p.MaxCompletionTokens, p.Temperature, p.Seed = openai.Int(200), openai.Float(0.8), openai.Int(seed)
				p.ResponseFormat = schemaFormat(t, src)
				c, err := f.client.Chat.Completions.New(ctx, p)
				if err != nil {
					t.Error(err)
					return
				}
				check(i, seed, src, c.Choices[0].Message.Content, c.Choices[0].FinishReason)
			}()
		}
	}
	wg.Wait()
	t.Logf("%d of %d choices finished with stop and validate", stopped, total)
	if stopped < total/2 {
		t.Errorf("only %d of %d choices finished", stopped, total)
	}
	p := chatParams(openai.UserMessage("Hi"))
	p.MaxCompletionTokens, p.Seed = openai.Int(200), openai.Int(4)
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	c, err := f.client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if out := c.Choices[0].Message.Content; !strings.HasPrefix(out, "{") {
		t.Errorf("json_object: %q", out)
	} else if c.Choices[0].FinishReason == "stop" {
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("json_object: %q: %v", out, err)
		}
	}
}

// A constrained stream carries the text the non-streamed request gives
// (greedy), and llama-server's grammar field constrains completions.
func TestResponseFormatStreamAndGrammar(t *testing.T) {
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Chat: tmpl})
	ctx := context.Background()
	const schema = `{"type":"object","properties":{"a":{"type":"integer","minimum":0,"maximum":99},"b":{"enum":["x","y"]}},"required":["a","b"],"additionalProperties":false}`
	p := chatParams(openai.UserMessage("Hi"))
	p.MaxCompletionTokens = openai.Int(24)
	p.ResponseFormat = schemaFormat(t, schema)
	want, err := f.client.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	out := want.Choices[0].Message.Content
	if want.Choices[0].FinishReason != "stop" {
		t.Fatalf("%q finished with %s", out, want.Choices[0].FinishReason)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := testutil.Schema(t, schema).Validate(inst); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	st := f.client.Chat.Completions.NewStreaming(ctx, p)
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != out {
		t.Errorf("streamed %q, not streamed %q", got, out)
	}
	code, body := f.post(t, "/v1/completions", `{"model":"tiny","prompt":"x","max_tokens":20,"grammar":"root ::= (\"yes\" | \"no\") \"!\""}`)
	if code != 200 {
		t.Fatalf("grammar: %d %s", code, body)
	}
	var cr struct {
		Choices []struct {
			Text         string `json:"text"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal([]byte(body), &cr); err != nil {
		t.Fatal(err)
	}
	if c := cr.Choices[0]; (c.Text != "yes!" && c.Text != "no!") || c.FinishReason != "stop" {
		t.Errorf("grammar: %q (%s)", c.Text, c.FinishReason)
	}
}

// Bad constraints are a 400 naming the parameter and the problem.
func TestResponseFormatBadInput(t *testing.T) {
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Chat: tmpl})
	rf := func(schema string) string {
		return `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + schema + `}}`
	}
	for _, c := range []struct {
		name, field, want string
	}{
		{"invalid schema", `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":"nope"}}`, "JSON Schema"},
		{"unsupported keyword", rf(`{"type":"object","patternProperties":{"a":{}}}`), `keyword \"patternProperties\"`},
		{"empty enum", rf(`{"enum":[]}`), `keyword \"enum\": empty`},
		{"empty language", rf(`{"type":"integer","minimum":3,"maximum":2}`), "no JSON value satisfies the schema"},
		{"gbnf syntax error", `"grammar":"root ::= [a-"`, "Invalid grammar in 'grammar'"},
		{"no schema", `"response_format":{"type":"json_schema"}`, "needs 'json_schema'"},
		{"unknown type", `"response_format":{"type":"xml"}`, "expected text, json_object or json_schema"},
		{"two constraints", rf(`{"type":"object"}`) + `,"grammar":"root ::= \"a\""`, "give one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, ep := range []struct{ path, body string }{
				{"/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],` + c.field + `}`},
				{"/v1/completions", `{"model":"tiny","prompt":"hi",` + c.field + `}`},
			} {
				code, body := f.post(t, ep.path, ep.body)
				if testing.Verbose() {
					t.Logf("%s: %s", ep.path, body)
				}
				if code != 400 || !strings.Contains(body, c.want) {
					t.Errorf("%s: %d %s, want 400 with %q", ep.path, code, body, c.want)
				}
			}
		})
	}
}
