// Package batch reads prompt files and writes result files for batch
// generation: requests in (OpenAI Batch JSONL, plain JSONL or one prompt
// per text line), one JSON result per line out, keyed by custom_id.
//
// Two promises shape the API. One bad input line never stops a batch: the
// Reader returns it as a Request with Err set, and the caller writes an error
// Result for it and carries on. A batch killed at any moment resumes without
// losing or duplicating a result (DESIGN.md invariant 4): the Writer emits
// each result as one complete line in a single write, Done reads back the
// custom_ids that made it to disk, ignoring a torn last line, and Resume
// trims that torn line before appending.
package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors.
var (
	// ErrBadLine: an input line could not be turned into a request.
	ErrBadLine = errors.New("batch: bad input line")
	// ErrDuplicateID: an input line reuses an earlier line's custom_id.
	ErrDuplicateID = errors.New("batch: duplicate custom_id")
	// ErrLocked: another process holds the results file.
	ErrLocked = errors.New("batch: results file in use")
	// ErrCorrupt: a results file has a complete line that is not a result.
	ErrCorrupt = errors.New("batch: corrupt results file")
)

// LineError is why one input line was rejected. Its text has no package
// prefix because it goes verbatim into the error field of that line's Result:
// "prompts.jsonl:3: invalid JSON: ...".
type LineError struct {
	Name string // the name given to NewReader
	Line int    // 1-based
	Msg  string
	Kind error // ErrBadLine or ErrDuplicateID
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.Name, e.Line, e.Msg) }

func (e *LineError) Unwrap() error { return e.Kind }

// Format is the layout of a prompt file.
type Format uint8

const (
	// Auto picks the format from the first non-blank line: one starting
	// with "{" means JSON lines (each line with a "body" is read as an
	// OpenAI Batch request, any other as plain JSONL); anything else means
	// Text.
	Auto Format = iota
	// JSONL: {"custom_id": "a", "prompt": "...", "max_tokens": 64,
	// "temperature": 0.7, "seed": 1}; only prompt (or messages) is required.
	JSONL
	// OpenAIBatch: {"custom_id": "a", "method": "POST", "url":
	// "/v1/completions", "body": {"model": "...", "prompt": "...",
	// "max_tokens": 64}}, or url "/v1/chat/completions" with body.messages.
	OpenAIBatch
	// Text: one prompt per line, custom_id "line-N" (see
	// Reader.SetIDPrefix); blank lines skipped.
	Text
)

var formatNames = [...]string{Auto: "auto", JSONL: "jsonl", OpenAIBatch: "openai", Text: "text"}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// ParseFormat is the inverse of String, for command-line flags.
func ParseFormat(s string) (Format, error) {
	for f, name := range formatNames {
		if strings.EqualFold(s, name) {
			return Format(f), nil
		}
	}
	return Auto, fmt.Errorf("batch: unknown format %q; want one of %s", s, strings.Join(formatNames[:], ", "))
}

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// MaxBestOf bounds a line's best_of: each candidate is a sequence of the
// engine's continuous batch (max_in_flight bounds them too).
const MaxBestOf = 64

// Request is one prompt read from a file.
type Request struct {
	Line     int    // 1-based line in the input
	CustomID string // from the file, else "line-N"
	Prompt   string // plain completion prompt; "" for chat requests
	Messages []Message
	// MaxTokens caps generated tokens; 0 = the pipeline's default.
	MaxTokens int
	// BestOf > 1 samples that many candidates and keeps the one with the
	// highest cumulative log-probability (OpenAI's best_of; the line's one
	// choice); usage counts every candidate's tokens. 0 or 1: none.
	BestOf int
	// Temperature, TopP, TopK, MinP and Seed override the pipeline's
	// sampler when non-nil.
	Temperature *float64
	TopP        *float64
	TopK        *int
	MinP        *float64
	Seed        *uint64
	// Stop strings end the completion (cut before the first one found).
	Stop []string
	// Schema constrains the output to a JSON Schema's values
	// ("response_format": json_object is {"type":"object"}, json_schema its
	// "schema"); Grammar to a GBNF grammar's language (llama-server's
	// "grammar"). At most one is set; the reader checks their shape, the
	// engine compiles them (a schema it cannot enforce fails the line).
	Schema  json.RawMessage
	Grammar string
	// Model is the body's "model", echoed in OpenAI output ("" if none).
	Model string
	// Adapter names the LoRA adapter to run the line with ("adapter", or
	// "body.adapter" in OpenAI Batch files); "" is the base model.
	Adapter string
	// Err is non-nil when the line could not be read as a request (a
	// *LineError); Prompt and Messages are then empty, and CustomID is the
	// line's custom_id if it could be read, else "line-N".
	Err error
}

// Text is the prompt to tokenize. For chat requests it renders a plain
// fallback, one "role: content" line per message followed by "assistant:".
// This is a placeholder until the tokenizer applies the model's chat template.
func (r Request) Text() string {
	if len(r.Messages) == 0 {
		return r.Prompt
	}
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	b.WriteString("assistant:")
	return b.String()
}

// Result is one line of the output file.
type Result struct {
	CustomID         string  `json:"custom_id"`
	Text             string  `json:"text,omitempty"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	CachedTokens     int     `json:"cached_tokens,omitempty"` // prompt tokens the prefix cache supplied
	FinishReason     string  `json:"finish_reason,omitempty"` // "stop" (EOS), "length" (max tokens or context)
	PrefillMS        float64 `json:"prefill_ms,omitempty"`
	DecodeMS         float64 `json:"decode_ms,omitempty"`
	Error            string  `json:"error,omitempty"`
}
