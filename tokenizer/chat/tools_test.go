package chat

import (
	"encoding/json"
	"testing"
)

// A Hermes/Qwen-style template sees the tools, an assistant turn's
// tool_calls and a tool turn's tool_call_id as Hugging Face passes them;
// without tools the variable is undefined.
func TestRenderTools(t *testing.T) {
	tmpl, err := Parse("tools", `{%- if tools -%}<tools>{% for t in tools %}{{ t.function.name }};{% endfor %}</tools>{%- endif -%}
{%- for m in messages -%}
[{{ m.role }}{% if m.tool_call_id %} for {{ m.tool_call_id }}{% endif %}]{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<call>{{ c.function.name }}({{ c.function.arguments }})</call>{% endfor %}{% endif %}
{%- endfor -%}`)
	if err != nil {
		t.Fatal(err)
	}
	var tools, calls []any
	if err := json.Unmarshal([]byte(`[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]`), &tools); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`[{"id":"call_1","type":"function","function":{"name":"get_time","arguments":"{\"zone\":\"UTC\"}"}}]`), &calls); err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "time?"}, {Role: "assistant", ToolCalls: calls}, {Role: "tool", Content: "12:00", ToolCallID: "call_1"}}
	got, err := tmpl.Render(msgs, Options{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	want := `<tools>get_weather;get_time;</tools>[user]time?[assistant]<call>get_time({"zone":"UTC"})</call>[tool for call_1]12:00`
	if got != want {
		t.Errorf("with tools:\n got %s\nwant %s", got, want)
	}
	if got, err := tmpl.Render(msgs[:1], Options{}); err != nil || got != "[user]time?" {
		t.Errorf("without tools: %q, %v", got, err)
	}
}
