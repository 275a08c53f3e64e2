package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/jobs"

	"github.com/sluicehq/sluice/grammar"
)

// toolSpec is one entry of "tools".
type toolSpec struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// maxParallelCalls bounds the calls of one forced turn under "required"
// with parallel_tool_calls.
const maxParallelCalls = 4

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// toolPlan is how a chat request's tools are used: rendered (the template's
// tools variable) and, when a call is forced, the grammar of the call.
type toolPlan struct {
	render []any  // decoded "tools", for the template; nil under "none"
	forced bool   // the output is a call: {"name": ..., "arguments": {...}}
	auto   string // "auto": the template's call syntax to parse the output with
}

// Call syntaxes of template families, for tool_choice "auto".
const (
	syntaxHermes  = "hermes"  // Hermes, Qwen: <tool_call>{"name", "arguments"}</tool_call>
	syntaxLlama3  = "llama3"  // Llama 3.x: {"name", "parameters"} (after <|python_tag|>)
	syntaxMistral = "mistral" // Mistral: [TOOL_CALLS][{"name", "arguments"}, ...]
)

// callSyntax is the call syntax the chat template's family defines, or ""
// when it defines none this server reads.
func callSyntax(src string) string {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return syntaxHermes
	case strings.Contains(src, "[TOOL_CALLS]"):
		return syntaxMistral
	case strings.Contains(src, "<|python_tag|>") || strings.Contains(src, "ipython") && strings.Contains(src, `"parameters"`):
		return syntaxLlama3
	}
	return ""
}

// tools reads "tools" and "tool_choice". "none" generates text without the
// tools; "required" and a named function are forced by a grammar (a call
// object whose name is one of the allowed functions and whose arguments
// follow that function's parameters schema; under "required" with
// parallel_tool_calls, OpenAI's default, an array of 1 to 4 of them), on
// any model and template;
// "auto" lets the model write text or calls in its template family's own
// syntax (Hermes/Qwen <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS]),
// parsed back when the
// choice ends: with a template that defines no syntax this server reads it
// is a 400 naming the choices that work. A function whose parameters the
// engine cannot enforce is a 400 naming it.
func (s *Server) tools(req *chatRequest, p *params) (*toolPlan, *apiError) {
	raw := bytes.TrimSpace(req.Tools)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("[]")) {
		if c := bytes.TrimSpace(req.ToolChoice); len(c) > 0 && !bytes.Equal(c, []byte("null")) && !bytes.Equal(c, []byte(`"none"`)) {
			return nil, badRequest("tool_choice", "'tool_choice' is set but there are no 'tools'.")
		}
		return nil, nil
	}
	var specs []toolSpec
	if err := json.Unmarshal(raw, &specs); err != nil {
		return nil, badRequest("tools", "Invalid 'tools': expected an array of {\"type\": \"function\", \"function\": {...}}: %v.", err)
	}
	var render []any
	if err := json.Unmarshal(raw, &render); err != nil {
		return nil, badRequest("tools", "Invalid 'tools': %v.", err)
	}
	names := make([]string, len(specs))
	for i, t := range specs {
		if t.Type != "function" {
			return nil, badRequest(fmt.Sprintf("tools[%d].type", i), "Invalid 'tools[%d].type' %q: only \"function\" is supported.", i, t.Type)
		}
		if !toolName.MatchString(t.Function.Name) {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "Invalid 'tools[%d].function.name' %q: 1 to 64 letters, digits, '_' or '-'.", i, t.Function.Name)
		}
		if slices.Contains(names[:i], t.Function.Name) {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.name", i), "'tools' names the function %q twice.", t.Function.Name)
		}
		names[i] = t.Function.Name
	}
	choice := "auto"
	var named string
	if c := bytes.TrimSpace(req.ToolChoice); len(c) > 0 && !bytes.Equal(c, []byte("null")) {
		if c[0] == '"' {
			if err := json.Unmarshal(c, &choice); err != nil {
				return nil, badRequest("tool_choice", "Invalid 'tool_choice': %v.", err)
			}
		} else {
			var obj struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(c, &obj); err != nil || obj.Type != "function" {
				return nil, badRequest("tool_choice", "Invalid 'tool_choice': expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}.")
			}
			if !slices.Contains(names, obj.Function.Name) {
				return nil, badRequest("tool_choice.function.name", "'tool_choice' names the function %q, which is not among 'tools'.", obj.Function.Name)
			}
			choice, named = "function", obj.Function.Name
		}
	}
	switch choice {
	case "none":
		return nil, nil
	case "auto":
		syn := callSyntax(s.chat.Template().Source)
		if syn == "" {
			return nil, badRequest("tool_choice", "'tool_choice' \"auto\" (the default when 'tools' are given) needs a chat template whose family defines a tool-call syntax (Hermes/Qwen <tool_call>, Llama 3 JSON, Mistral [TOOL_CALLS]), and %s defines none: set it to \"required\", a function ({\"type\": \"function\", \"function\": {\"name\": ...}}) or \"none\".", s.chat.Template().Name)
		}
		if p.n > 1 || p.bestOf > 0 {
			return nil, badRequest("tool_choice", "Tool calls are read back once per request: 'n' and 'best_of' must be 1.")
		}
		return &toolPlan{render: render, auto: syn}, nil
	case "required", "function":
	default:
		return nil, badRequest("tool_choice", "Invalid 'tool_choice' %q: expected \"none\", \"auto\", \"required\" or a function.", choice)
	}
	if p.grammar != nil {
		return nil, badRequest("tool_choice", "A forced tool call and 'response_format' (or 'grammar') both constrain the output: give one.")
	}
	if p.n > 1 || p.bestOf > 0 {
		return nil, badRequest("tool_choice", "A forced tool call is generated once per request: 'n' and 'best_of' must be 1.")
	}
	var branches [][]byte
	for i, t := range specs {
		if named != "" && t.Function.Name != named {
			continue
		}
		params := bytes.TrimSpace(t.Function.Parameters)
		if len(params) == 0 || bytes.Equal(params, []byte("null")) {
			params = []byte(`{"type":"object","properties":{}}`)
		}
		name, _ := json.Marshal(t.Function.Name)
		call := []byte(`{"type":"object","properties":{"name":{"const":` + string(name) + `},"arguments":` + string(params) + `},"required":["name","arguments"],"additionalProperties":false}`)
		if _, err := s.eng.Grammars().Matcher(grammar.Spec{Schema: call}); err != nil {
			return nil, badRequest(fmt.Sprintf("tools[%d].function.parameters", i), "The parameters of function %q cannot be enforced: %v.", t.Function.Name, err)
		}
		branches = append(branches, call)
	}
	schema := branches[0]
	if len(branches) > 1 {
		schema = append([]byte(`{"anyOf":[`), bytes.Join(branches, []byte(","))...)
		schema = append(schema, "]}"...)
	}
	if named == "" && (req.ParallelToolCalls == nil || *req.ParallelToolCalls) {
		// "required" with parallel calls (OpenAI's default): an array of
		// 1 to maxParallelCalls calls.
		schema = []byte(fmt.Sprintf(`{"type":"array","items":%s,"minItems":1,"maxItems":%d}`, schema, maxParallelCalls))
	}
	sp := &grammar.Spec{Schema: schema}
	if _, err := s.eng.Grammars().Matcher(*sp); err != nil {
		return nil, badRequest("tools", "The tools' call grammar cannot be built: %v.", err)
	}
	p.grammar = sp
	return &toolPlan{render: render, forced: true}, nil
}

// parseCalls reads the calls a choice wrote in the template family's
// syntax: the text before the first call, as written, is the message's
// content (nil when blank), as a stream sends it. No calls: the text is plain content.
func parseCalls(syntax, text string) (content *string, calls []jobs.ToolCall) {
	switch syntax {
	case syntaxHermes:
		rest := text
		first := strings.Index(rest, "<tool_call>")
		if first < 0 {
			return &text, nil
		}
		for {
			i := strings.Index(rest, "<tool_call>")
			if i < 0 {
				break
			}
			rest = rest[i+len("<tool_call>"):]
			j := strings.Index(rest, "</tool_call>")
			body := rest
			if j >= 0 {
				body, rest = rest[:j], rest[j+len("</tool_call>"):]
			} else {
				rest = ""
			}
			c, err := toolCall(strings.TrimSpace(body))
			if err != nil {
				return &text, nil // not a call after all: the text as written
			}
			calls = append(calls, c)
		}
		if pre := text[:first]; strings.TrimSpace(pre) != "" {
			content = &pre
		}
		return content, calls
	case syntaxMistral:
		i := strings.Index(text, "[TOOL_CALLS]")
		if i < 0 {
			return &text, nil
		}
		var list []json.RawMessage
		if json.Unmarshal([]byte(strings.TrimSpace(text[i+len("[TOOL_CALLS]"):])), &list) != nil || len(list) == 0 {
			return &text, nil
		}
		for _, raw := range list {
			c, err := toolCall(string(raw))
			if err != nil || c.Function.Name == "" {
				return &text, nil
			}
			calls = append(calls, c)
		}
		if pre := text[:i]; strings.TrimSpace(pre) != "" {
			content = &pre
		}
		return content, calls
	case syntaxLlama3:
		body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "<|python_tag|>"))
		if !strings.HasPrefix(body, "{") {
			return &text, nil
		}
		var raw struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
			Arguments  json.RawMessage `json:"arguments"`
		}
		if json.Unmarshal([]byte(body), &raw) != nil || raw.Name == "" {
			return &text, nil
		}
		args := raw.Parameters
		if len(args) == 0 {
			args = raw.Arguments
		}
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		b, _ := json.Marshal(map[string]any{"name": raw.Name, "arguments": args})
		c, err := toolCall(string(b))
		if err != nil {
			return &text, nil
		}
		return nil, []jobs.ToolCall{c}
	}
	return &text, nil
}

// holdState is where a streamed choice stands under tool_choice auto.
type holdState struct {
	holding bool // a call may have begun: hold the rest
	plain   bool // Llama 3: the output began as text, so it holds no call
}

// callStart is how much of a streamed choice's text can be sent as content
// now: all of it but what may begin a call (a marker, or a suffix that may
// grow into one; for Llama 3, whose call is the whole output, anything
// once it begins like one). Once a call may have begun it returns 0: what
// came before was returned already.
func callStart(syntax, text string, st *holdState) int {
	if st.holding {
		return 0
	}
	var marker string
	switch syntax {
	case syntaxHermes:
		marker = "<tool_call>"
	case syntaxMistral:
		marker = "[TOOL_CALLS]"
	case syntaxLlama3:
		if st.plain {
			return len(text)
		}
		const tag = "<|python_tag|>"
		t := strings.TrimLeft(text, " \t\r\n")
		switch {
		case t == "" || strings.HasPrefix(tag, t):
			return 0
		case strings.HasPrefix(t, "{") || strings.HasPrefix(t, tag):
			st.holding = true
			return 0
		}
		st.plain = true
		return len(text)
	default:
		return len(text)
	}
	upto := len(text)
	if i := strings.Index(text, marker); i >= 0 {
		st.holding, upto = true, i
	} else {
		for k := min(len(marker)-1, len(text)); k > 0; k-- {
			if strings.HasSuffix(text, marker[:k]) {
				upto = len(text) - k
				break
			}
		}
	}
	if strings.TrimSpace(text[:upto]) == "" {
		return 0 // blank text before a call is no content
	}
	return upto
}

// forcedCalls reads a forced turn's output back: one call object, or an
// array of them (tool_choice required with parallel calls).
func forcedCalls(text string) ([]jobs.ToolCall, error) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "[") {
		c, err := toolCall(t)
		if err != nil {
			return nil, err
		}
		return []jobs.ToolCall{c}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(t), &list); err != nil {
		return nil, fmt.Errorf("the forced tool calls are not a JSON array: %w", err)
	}
	var calls []jobs.ToolCall
	for _, raw := range list {
		c, err := toolCall(string(raw))
		if err != nil {
			return nil, err
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// toolCall reads a forced call's output back: {"name", "arguments"} into
// a tool call whose arguments are their compact JSON text.
func toolCall(text string) (jobs.ToolCall, error) {
	var out struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		return jobs.ToolCall{}, fmt.Errorf("the forced tool call is not JSON: %w", err)
	}
	var args bytes.Buffer
	if err := json.Compact(&args, out.Arguments); err != nil {
		return jobs.ToolCall{}, fmt.Errorf("the forced tool call's arguments: %w", err)
	}
	var id [12]byte
	rand.Read(id[:])
	return jobs.ToolCall{ID: "call_" + hex.EncodeToString(id[:]), Type: "function", Function: jobs.ToolFunction{Name: out.Name, Arguments: args.String()}}, nil
}
