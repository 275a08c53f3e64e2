package jobs

// The shapes of OpenAI's responses, which the server writes over HTTP and
// sluice run into OpenAI Batch output files.

// Usage is the token counts of a response.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is OpenAI's breakdown of PromptTokens (always
	// set by sluice's writers).
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
}

// PromptTokensDetails breaks down a response's prompt tokens.
type PromptTokensDetails struct {
	// CachedTokens are prompt tokens whose keys and values came from the
	// prefix cache (computed for an earlier request) instead of a prefill.
	CachedTokens int `json:"cached_tokens"`
}

// NewUsage is the usage of prompt, completion and cached prompt tokens.
func NewUsage(prompt, completion, cached int) *Usage {
	return &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion,
		PromptTokensDetails: &PromptTokensDetails{CachedTokens: cached}}
}

// CompletionLogprobs is a text_completion choice's logprobs.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// CompletionChoice is one choice of a text_completion.
type CompletionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

// CompletionResponse is a text_completion object (POST /v1/completions),
// and the body of a /v1/completions line of an OpenAI Batch output file.
type CompletionResponse struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// ChatTopLogprob is one alternative of a chat token's top_logprobs.
type ChatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// ChatTokenLogprob is one token of a chat choice's logprobs.
type ChatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []ChatTopLogprob `json:"top_logprobs"`
}

// ChatLogprobs is a chat choice's logprobs.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
	Refusal []ChatTokenLogprob `json:"refusal"`
}

// ChatMessageOut is a choice's message (or a stream chunk's delta).
type ChatMessageOut struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// ChatChoice is one choice of a chat.completion.
type ChatChoice struct {
	Index        int             `json:"index"`
	Message      *ChatMessageOut `json:"message,omitempty"`
	Delta        *ChatMessageOut `json:"delta,omitempty"`
	Logprobs     *ChatLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

// ChatResponse is a chat.completion object (POST /v1/chat/completions),
// and the body of a /v1/chat/completions line of an OpenAI Batch output file.
type ChatResponse struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
}

// ToolCall is one call in a message's tool_calls (Index only in a stream's
// delta).
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a call's function: its name and its arguments as a JSON
// string, as OpenAI sends them.
type ToolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}
