package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sluicehq/sluice/internal/enginetest"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

const (
	weatherParams = `{"type":"object","properties":{"city":{"type":"string","maxLength":16},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}`
	timeParams    = `{"type":"object","properties":{"zone":{"type":"string","pattern":"^[A-Z][a-z]{1,6}/[A-Z][a-z]{1,6}$"},"hours":{"type":"integer","minimum":0,"maximum":23}},"required":["zone"],"additionalProperties":false}`
)

func toolsParam(t *testing.T) []openai.ChatCompletionToolUnionParam {
	t.Helper()
	var w, tm map[string]any
	if err := json.Unmarshal([]byte(weatherParams), &w); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(timeParams), &tm); err != nil {
		t.Fatal(err)
	}
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("The weather in a city."), Parameters: w}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Parameters: tm}),
	}
}

// Forced tool calls through the official client on stories260K at
// temperature 0.8: tool_choice required (either function; 1 to 4 parallel
// calls by default, one with parallel_tool_calls false) and a named
// function, streamed and not, at 3 seeds; every call that completes names
// an allowed function, comes back as message.tool_calls with finish_reason
// tool_calls, and its arguments validate under the function's parameters.
// A tool turn answering the call is accepted back in the conversation.
func TestToolCallsForced(t *testing.T) {
	l := enginetest.Stories(t, 1)
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Engine: enginetest.Plain(t, l, 0.8, 1), Chat: tmpl})
	ctx := context.Background()
	params := map[string]*jsonschema.Schema{"get_weather": testutil.Schema(t, weatherParams), "get_time": testutil.Schema(t, timeParams)}
	checkCall := func(name, want, got, args string) {
		t.Helper()
		if want != "" && got != want {
			t.Errorf("%s: called %q, want %q", name, got, want)
		}
		v, ok := params[got]
		if !ok {
			t.Fatalf("%s: called an unknown function %q", name, got)
		}
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(args))
		if err != nil {
			t.Fatalf("%s: arguments %q are not JSON: %v", name, args, err)
		}
		if err := v.Validate(inst); err != nil {
			t.Errorf("%s: arguments %s do not validate: %v", name, args, err)
		}
	}
	calls := 0
	for seed := range int64(3) {
		for _, choice := range []struct {
			name     string
			opt      openai.ChatCompletionToolChoiceOptionUnionParam
			want     string
			parallel param.Opt[bool]
			one      bool
		}{
			{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, "", param.Opt[bool]{}, false},
			{"required one", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, "", openai.Bool(false), true},
			{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}), "get_time", param.Opt[bool]{}, true},
		} {
			p := chatParams(openai.UserMessage("What is the weather in Paris?"))
			p.Tools, p.ToolChoice = toolsParam(t), choice.opt
			p.MaxCompletionTokens, p.Temperature, p.Seed = openai.Int(400), openai.Float(0.8), openai.Int(seed)
			p.ParallelToolCalls = choice.parallel
			r, err := f.client.Chat.Completions.New(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			c := r.Choices[0]
			if c.FinishReason == "length" {
				t.Logf("%s seed %d: cut at max_tokens: %q", choice.name, seed, c.Message.Content)
				continue
			}
			// required: 1 to 4 parallel calls (OpenAI's default); named: one.
			if n := len(c.Message.ToolCalls); c.FinishReason != "tool_calls" || n < 1 || n > 4 || choice.one && n != 1 {
				t.Fatalf("%s: %+v", choice.name, c)
			}
			for _, tc := range c.Message.ToolCalls {
				if !strings.HasPrefix(tc.ID, "call_") || tc.Type != "function" {
					t.Errorf("%s: call %+v", choice.name, tc)
				}
				checkCall(choice.name, choice.want, tc.Function.Name, tc.Function.Arguments)
			}
			tc := c.Message.ToolCalls[0]
			calls++

			st := f.client.Chat.Completions.NewStreaming(ctx, p)
			var acc openai.ChatCompletionAccumulator
			var finished []openai.FinishedChatCompletionToolCall
			for st.Next() {
				acc.AddChunk(st.Current())
				if fc, ok := acc.JustFinishedToolCall(); ok {
					finished = append(finished, fc)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			sc := acc.Choices[0]
			if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != len(c.Message.ToolCalls) {
				t.Fatalf("%s streamed: %+v", choice.name, sc)
			}
			for k, want := range c.Message.ToolCalls {
				if got := sc.Message.ToolCalls[k].Function; got.Name != want.Function.Name || got.Arguments != want.Function.Arguments {
					t.Errorf("%s: streamed call %d %+v, not streamed %+v", choice.name, k, got, want.Function)
				}
			}
			if len(finished) == 0 || finished[0].Arguments != tc.Function.Arguments {
				t.Errorf("%s: the accumulator finished %+v", choice.name, finished)
			}

			// The call and the tool's answer go back into the conversation.
			next := chatParams(openai.UserMessage("What is the weather in Paris?"), c.Message.ToParam(), openai.ToolMessage(`{"ok":true}`, tc.ID))
			next.Tools, next.ToolChoice = toolsParam(t), openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
			if _, err := f.client.Chat.Completions.New(ctx, next); err != nil {
				t.Errorf("%s: the tool turn back: %v", choice.name, err)
			}
		}
	}
	if calls < 5 {
		t.Errorf("only %d of 9 forced turns completed", calls)
	}
}

// Tool requests that cannot be honoured are a 400 naming the parameter.
func TestToolCallsBadInput(t *testing.T) {
	tmpl, err := chat.Builtin("chatml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, server.Options{Chat: tmpl})
	tool := `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}`
	for _, c := range []struct{ name, fields, want string }{
		{"auto", `"tools":[` + tool + `]`, `'tool_choice' \"auto\"`},
		{"unknown function", `"tools":[` + tool + `],"tool_choice":{"type":"function","function":{"name":"g"}}`, "not among 'tools'"},
		{"bad name", `"tools":[{"type":"function","function":{"name":"a b"}}],"tool_choice":"required"`, "tools[0].function.name"},
		{"unenforceable parameters", `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","patternProperties":{"x":{}}}}}],"tool_choice":"required"`, `keyword \"patternProperties\"`},
		{"choice without tools", `"tool_choice":"required"`, "no 'tools'"},
		{"with response_format", `"tools":[` + tool + `],"tool_choice":"required","response_format":{"type":"json_object"}`, "both constrain"},
		{"not a function", `"tools":[{"type":"custom","custom":{"name":"x"}}],"tool_choice":"required"`, `only \"function\"`},
	} {
		code, body := f.post(t, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],`+c.fields+`}`)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.name, code, body, c.want)
		}
	}
	// tool_choice none generates text as if no tools were given.
	code, body := f.post(t, "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":4,"tools":[`+tool+`],"tool_choice":"none"}`)
	if code != 200 || strings.Contains(body, "tool_calls") {
		t.Errorf("none: %d %s", code, body)
	}
}

// Template families with a call syntax, for tool_choice auto: Hermes/Qwen,
// Llama 3 and Mistral style templates, written for the test.
const (
	hermesTemplate = `{%- if tools %}<|im_start|>system
You may call functions. <tools>{% for t in tools %}{{ t.function.name }} {% endfor %}</tools>
Call one as <tool_call>{"name": ..., "arguments": {...}}</tool_call><|im_end|>
{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`
	llama3Template = `{%- for m in messages %}<|start_header_id|>{% if m.role == 'tool' %}ipython{% else %}{{ m.role }}{% endif %}<|end_header_id|>

{% if m.tool_calls %}<|python_tag|>{"name": "{{ m.tool_calls[0].function.name }}", "parameters": {{ m.tool_calls[0].function.arguments }}}{% else %}{{ m.content }}{% endif %}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}`
	mistralTemplate = `{%- for m in messages %}{% if m.role == 'user' %}[INST] {{ m.content }} [/INST]{% elif m.tool_calls %}[TOOL_CALLS][{"name": "{{ m.tool_calls[0].function.name }}", "arguments": {{ m.tool_calls[0].function.arguments }}}]</s>{% else %}{{ m.content }}</s>{% endif %}{% endfor %}`
)

// tool_choice auto on the three families: what the model writes in its
// template's call syntax (held to it here by a grammar, since stories260K
// never learned one) comes back as tool_calls with finish_reason
// tool_calls, streamed and not; text without a call is content.
func TestToolCallsAuto(t *testing.T) {
	l := enginetest.Stories(t, 1)
	for _, fam := range []struct {
		name, tmpl, gbnf, plain string
	}{
		{"hermes", hermesTemplate, `root ::= "Let me check. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" [A-Z] [a-z]{2,6} "\", \"unit\": \"c\"}}\n</tool_call>"`, `root ::= "It is sunny."`},
		{"mistral", mistralTemplate, `root ::= "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" [A-Z] [a-z]{2,6} "\", \"unit\": \"c\"}}]"`, `root ::= "It is sunny."`},
		{"llama3", llama3Template, `root ::= "<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"" [A-Z] [a-z]{2,6} "\", \"unit\": \"f\"}}"`, `root ::= "It is sunny."`},
	} {
		t.Run(fam.name, func(t *testing.T) {
			tmpl, err := chat.Parse(fam.name, fam.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			f := newFixture(t, server.Options{Engine: enginetest.Plain(t, l, 0, 0), Chat: tmpl})
			ctx := context.Background()
			p := chatParams(openai.UserMessage("What is the weather in Paris?"))
			p.Tools, p.MaxCompletionTokens = toolsParam(t), openai.Int(120)
			r, err := f.client.Chat.Completions.New(ctx, p, option.WithJSONSet("grammar", fam.gbnf))
			if err != nil {
				t.Fatal(err)
			}
			c := r.Choices[0]
			if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("%+v", c)
			}
			tc := c.Message.ToolCalls[0]
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.Function.Arguments))
			if err != nil || tc.Function.Name != "get_weather" {
				t.Fatalf("call %+v: %v", tc, err)
			}
			if err := testutil.Schema(t, weatherParams).Validate(inst); err != nil {
				t.Errorf("arguments %s: %v", tc.Function.Arguments, err)
			}
			if fam.name == "hermes" && c.Message.Content != "Let me check. " {
				t.Errorf("content before the call: %q", c.Message.Content)
			}
			st := f.client.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("grammar", fam.gbnf))
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if sc := acc.Choices[0]; sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != 1 || sc.Message.ToolCalls[0].Function.Arguments != tc.Function.Arguments || sc.Message.Content != c.Message.Content {
				t.Errorf("streamed: %+v; not streamed: %+v", sc, c)
			}
			if fam.name == "hermes" {
				// Two calls; parallel_tool_calls false keeps the first.
				two := `root ::= "<tool_call>{\"name\": \"get_time\", \"arguments\": {\"zone\": \"Europe/Paris\"}}</tool_call><tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}</tool_call>"`
				long := p
				long.MaxCompletionTokens = openai.Int(400)
				r, err := f.client.Chat.Completions.New(ctx, long, option.WithJSONSet("grammar", two))
				if err != nil {
					t.Fatal(err)
				}
				if tc := r.Choices[0].Message.ToolCalls; len(tc) != 2 || tc[0].Function.Name != "get_time" || tc[1].Function.Name != "get_weather" {
					t.Errorf("two calls: %+v", tc)
				}
				one := long
				one.ParallelToolCalls = openai.Bool(false)
				r, err = f.client.Chat.Completions.New(ctx, one, option.WithJSONSet("grammar", two))
				if err != nil {
					t.Fatal(err)
				}
				if tc := r.Choices[0].Message.ToolCalls; len(tc) != 1 || tc[0].Function.Name != "get_time" {
					t.Errorf("parallel_tool_calls false: %+v", tc)
				}
			}
			r, err = f.client.Chat.Completions.New(ctx, p, option.WithJSONSet("grammar", fam.plain))
			if err != nil {
				t.Fatal(err)
			}
			if c := r.Choices[0]; c.FinishReason != "stop" || c.Message.Content != "It is sunny." || len(c.Message.ToolCalls) != 0 {
				t.Errorf("text without a call: %+v", c)
			}
		})
	}
}
