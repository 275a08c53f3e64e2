package batch

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// OpenAIResult is one line of an OpenAI Batch output file:
//
//	{"id": "batch_req_…", "custom_id": "a", "response": {"status_code": 200,
//	 "request_id": "…", "body": {…a chat.completion or text_completion…}}, "error": null}
//
// A request that failed has "response": null and "error": {"code", "message"}.
type OpenAIResult struct {
	ID       string          `json:"id"`
	CustomID string          `json:"custom_id"`
	Response *OpenAIResponse `json:"response"`
	Error    *OpenAIError    `json:"error"`
}

// OpenAIResponse is the HTTP response a batch line stands for.
type OpenAIResponse struct {
	StatusCode int    `json:"status_code"`
	RequestID  string `json:"request_id"`
	Body       any    `json:"body"`
}

// OpenAIError is why a line failed.
type OpenAIError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Error codes of OpenAIError.
const (
	CodeInvalidRequest = "invalid_request"         // the line could not be read as a request
	CodeContextLength  = "context_length_exceeded" // the prompt does not fit the context
	CodeServerError    = "server_error"            // the engine failed the request
	CodeTimeout        = "timeout"                 // the pipeline's timeout passed
)

// NewID returns prefix and 24 random hex digits ("batch_req_…").
func NewID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// Check is what Precheck found.
type Check struct {
	Requests int    // lines that are requests (bad ones included)
	Todo     int    // those whose custom_id is not done yet
	Format   Format // the format the file resolved to
}

// Precheck reads a whole prompt file ahead of a run, as a Reader with the
// same format and id prefix would, and counts its requests, and those not in
// done (a results file's Done). Repeated custom_ids are an error wrapping
// ErrDuplicateID that lists them, so a batch with any is refused before it
// runs: their results could not be told apart.
func Precheck(r io.Reader, name string, f Format, prefix string, done map[string]bool) (Check, error) {
	rd := NewReader(r, name, f)
	rd.SetIDPrefix(prefix)
	var c Check
	var dups []string
	ndup := 0
	for {
		req, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		c.Format = rd.Format()
		if err != nil {
			return c, err
		}
		c.Requests++
		if !done[req.CustomID] {
			c.Todo++
		}
		if le, ok := errors.AsType[*LineError](req.Err); ok && le.Kind == ErrDuplicateID {
			if ndup++; len(dups) < 5 {
				dups = append(dups, fmt.Sprintf("line %d: %s", le.Line, le.Msg))
			}
		}
	}
	if ndup > 0 {
		more := ""
		if ndup > len(dups) {
			more = fmt.Sprintf("; and %d more", ndup-len(dups))
		}
		return c, fmt.Errorf("%w: %s: %d line(s) repeat an earlier line's custom_id (%s%s); results are keyed by custom_id, so each must be unique: nothing was run",
			ErrDuplicateID, name, ndup, strings.Join(dups, "; "), more)
	}
	return c, nil
}
