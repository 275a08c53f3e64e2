package server

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// samplingFields are the generation parameters completions and chat
// completions share. Pointers tell "not given" from zero.
type samplingFields struct {
	Model       string   `json:"model"`
	MaxTokens   *int     `json:"max_tokens"`
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	TopK        *int     `json:"top_k"`
	MinP        *float64 `json:"min_p"`
	// RepeatPenalty (llama-server) and RepetitionPenalty (vLLM) are the
	// same CTRL-style penalty, sample.Options.RepeatPenalty.
	RepeatPenalty     *float64           `json:"repeat_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	N                 *int               `json:"n"`
	Stream            bool               `json:"stream"`
	StreamOptions     *streamOptions     `json:"stream_options"`
	Stop              stopList           `json:"stop"`
	Seed              *int64             `json:"seed"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	// ResponseFormat is OpenAI's: text, json_object or json_schema (and
	// llama-server's "schema" beside the type). Grammar and JSONSchema are
	// llama-server's fields: a GBNF grammar, a JSON Schema.
	ResponseFormat *responseFormat `json:"response_format"`
	Grammar        *string         `json:"grammar"`
	JSONSchema     json.RawMessage `json:"json_schema"`
}

// responseFormat is "response_format".
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema"`
	Schema     json.RawMessage `json:"schema"`
}

// jsonSchemaSpec is response_format.json_schema. The schema is enforced
// as strictly whatever Strict says: the grammar never loosens it.
type jsonSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type completionRequest struct {
	samplingFields
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Logprobs *int            `json:"logprobs"`
	Suffix   *string         `json:"suffix"`
	BestOf   *int            `json:"best_of"`
}

type chatRequest struct {
	samplingFields
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// stopList is "stop": a string, a list of strings or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return badRequest("stop", "Invalid type for 'stop': expected a string or an array of strings.")
	}
	*s = many
	return nil
}

// promptTokens is the "prompt" of a completion request: a string, an array
// of strings, an array of token ids or an array of arrays of token ids. Each
// element is one prompt; texts are tokenized later.
type prompt struct {
	text   string
	tokens []int32
	isText bool
}

func parsePrompts(raw json.RawMessage) ([]prompt, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, badRequest("prompt", "'prompt' is required.")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, badRequest("prompt", "Invalid 'prompt': %v.", err)
		}
		return []prompt{{text: s, isText: true}}, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, badRequest("prompt", "Invalid type for 'prompt': expected a string, an array of strings, an array of token ids or an array of arrays of token ids.")
	}
	if len(list) == 0 {
		return nil, badRequest("prompt", "'prompt' is an empty array.")
	}
	// An array of numbers is one tokenized prompt.
	if first := bytes.TrimSpace(list[0]); len(first) > 0 && (first[0] == '-' || (first[0] >= '0' && first[0] <= '9')) {
		var ids []int32
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, badRequest("prompt", "Invalid 'prompt': an array of token ids must hold only integers: %v.", err)
		}
		return []prompt{{tokens: ids}}, nil
	}
	out := make([]prompt, 0, len(list))
	for i, el := range list {
		el = bytes.TrimSpace(el)
		if len(el) > 0 && el[0] == '"' {
			if err := json.Unmarshal(el, &s); err != nil {
				return nil, badRequest("prompt", "Invalid 'prompt[%d]': %v.", i, err)
			}
			out = append(out, prompt{text: s, isText: true})
			continue
		}
		var ids []int32
		if err := json.Unmarshal(el, &ids); err != nil {
			return nil, badRequest("prompt", "Invalid 'prompt[%d]': expected a string or an array of token ids.", i)
		}
		if len(ids) == 0 {
			return nil, badRequest("prompt", "'prompt[%d]' is an empty array of token ids.", i)
		}
		out = append(out, prompt{tokens: ids})
	}
	return out, nil
}

// messageText is a message's content: a string, null, or an array of
// {"type": "text", "text": ...} parts (joined).
func messageText(i int, raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", badRequest(fmt.Sprintf("messages[%d].content", i), "Invalid content: %v.", err)
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(fmt.Sprintf("messages[%d].content", i), "Invalid type for 'messages[%d].content': expected a string or an array of content parts.", i)
	}
	var b bytes.Buffer
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", badRequest(fmt.Sprintf("messages[%d].content[%d]", i, j), "Content part type %q is not supported: only text parts are.", p.Type)
		}
		b.WriteString(*p.Text)
	}
	return b.String(), nil
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
