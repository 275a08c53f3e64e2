package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxLineBytes bounds one input line. Lines of a few MiB (long documents as
// prompts) are fine; a longer one is returned as an error request without
// being held in memory, and the batch goes on.
const MaxLineBytes = 64 << 20

// Reader reads requests from a prompt file, one line at a time, so a file of
// any length streams in constant memory (plus one entry per custom_id, to
// catch duplicates).
type Reader struct {
	br       *bufio.Reader
	name     string
	format   Format // as asked
	resolved Format // Auto until the first non-blank line decides
	line     int
	seen     map[string]int // custom_id → first line
	detect   bool           // Auto chose JSON: the first JSON line picks JSONL or OpenAIBatch for Format
	buf      []byte
	maxLine  int
	prefix   string // of generated custom_ids
	err      error  // sticky read error
}

// NewReader reads requests in format f from r; name labels errors
// (usually the file name).
func NewReader(r io.Reader, name string, f Format) *Reader {
	return &Reader{
		br: bufio.NewReaderSize(r, 64<<10), name: name, format: f, resolved: f,
		seen: map[string]int{}, maxLine: MaxLineBytes,
	}
}

// SetIDPrefix makes the custom_id of a line without one prefix+"line-N"
// instead of "line-N". With the prompt file's name as the prefix, two files
// written into one results file do not skip each other's lines.
func (r *Reader) SetIDPrefix(prefix string) { r.prefix = prefix }

// Format reports the format in use: the one given to NewReader, or for Auto
// the one detected from the first non-blank line (JSONL or Text; Auto while
// nothing has been read). A JSON file detected as JSONL still reads lines
// that have a "body" as OpenAI Batch requests.
func (r *Reader) Format() Format { return r.resolved }

// Next returns the next request, skipping blank lines, and io.EOF after the
// last. A line that cannot be read as a request comes back with Err set and
// a nil error: the batch goes on. A non-nil error means the input itself
// failed (an I/O error) and is sticky.
func (r *Reader) Next() (Request, error) {
	if r.err != nil {
		return Request{}, r.err
	}
	if r.format > Text {
		r.err = fmt.Errorf("batch: %s: unknown format %d", r.name, r.format)
		return Request{}, r.err
	}
	for {
		line, tooLong, err := r.readLine()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("batch: read %s: line %d: %w", r.name, r.line+1, err)
			}
			r.err = err
			return Request{}, err
		}
		r.line++
		if r.line == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // UTF-8 BOM
		}
		if !tooLong && len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if r.resolved == Auto {
			r.resolved = Text
			if t := bytes.TrimLeft(line, " \t"); len(t) > 0 && t[0] == '{' || tooLong {
				r.resolved, r.detect = JSONL, true
			}
		}
		req := Request{Line: r.line}
		if tooLong {
			req.Err = r.lineErr(ErrBadLine, fmt.Sprintf("line is longer than %d bytes", r.maxLine))
		} else if r.resolved == Text {
			req.Prompt = string(line)
		} else {
			r.parseJSON(line, &req)
		}
		if req.CustomID == "" {
			req.CustomID = r.prefix + "line-" + strconv.Itoa(r.line)
		}
		if first, dup := r.seen[req.CustomID]; dup {
			req = Request{Line: r.line, CustomID: req.CustomID, Err: r.lineErr(ErrDuplicateID,
				fmt.Sprintf("duplicate custom_id %q (first on line %d)", req.CustomID, first))}
		} else {
			r.seen[req.CustomID] = r.line
		}
		if req.Err != nil {
			req.Prompt, req.Messages, req.Schema, req.Grammar = "", nil, nil, ""
		}
		return req, nil
	}
}

// readLine reads one line into r.buf and returns it without its "\n" or
// "\r\n". A line longer than maxLine is consumed but not kept (tooLong). The
// last line may lack a newline; io.EOF comes only when nothing is left.
func (r *Reader) readLine() (line []byte, tooLong bool, err error) {
	r.buf = r.buf[:0]
	n := 0
	for {
		frag, err := r.br.ReadSlice('\n')
		n += len(frag)
		if !tooLong {
			if n > r.maxLine+2 { // +2: the line's own "\r\n"
				tooLong, r.buf = true, r.buf[:0]
			} else {
				r.buf = append(r.buf, frag...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == nil:
		case errors.Is(err, io.EOF) && n > 0:
		default:
			return nil, false, err
		}
		line = chomp(r.buf)
		if !tooLong && len(line) > r.maxLine {
			tooLong, line = true, nil
		}
		return line, tooLong, nil
	}
}

// chomp drops one trailing "\n" and then one "\r".
func chomp(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

func (r *Reader) lineErr(kind error, msg string) *LineError {
	return &LineError{Name: r.name, Line: r.line, Msg: msg, Kind: kind}
}

// jsonLine has every key we read in either JSON format, left raw so each
// gets its own presence and type check (and a message that names it).
type jsonLine struct {
	CustomID json.RawMessage `json:"custom_id"`
	Method   json.RawMessage `json:"method"`
	URL      json.RawMessage `json:"url"`
	Body     json.RawMessage `json:"body"`
	params
}

// params are the request keys: at the top level of a JSONL line, inside
// "body" for OpenAI Batch.
type params struct {
	Prompt              json.RawMessage `json:"prompt"`
	Messages            json.RawMessage `json:"messages"`
	MaxTokens           json.RawMessage `json:"max_tokens"`
	MaxCompletionTokens json.RawMessage `json:"max_completion_tokens"`
	Temperature         json.RawMessage `json:"temperature"`
	Seed                json.RawMessage `json:"seed"`
	Adapter             json.RawMessage `json:"adapter"`
	TopP                json.RawMessage `json:"top_p"`
	TopK                json.RawMessage `json:"top_k"`
	MinP                json.RawMessage `json:"min_p"`
	Stop                json.RawMessage `json:"stop"`
	Model               json.RawMessage `json:"model"`
	BestOf              json.RawMessage `json:"best_of"`
	ResponseFormat      json.RawMessage `json:"response_format"`
	Grammar             json.RawMessage `json:"grammar"`
	unsupported
}

// unsupported are the OpenAI keys a local batch cannot honour. A line that
// sets one to anything but its neutral value is refused, so an option is
// never silently dropped.
type unsupported struct {
	N                json.RawMessage `json:"n"`
	Logprobs         json.RawMessage `json:"logprobs"`
	TopLogprobs      json.RawMessage `json:"top_logprobs"`
	Echo             json.RawMessage `json:"echo"`
	Stream           json.RawMessage `json:"stream"`
	Suffix           json.RawMessage `json:"suffix"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	PresencePenalty  json.RawMessage `json:"presence_penalty"`
	FrequencyPenalty json.RawMessage `json:"frequency_penalty"`
	Tools            json.RawMessage `json:"tools"`
}

// check names the first key set to a value other than its neutral one.
func (u *unsupported) check(prefix string) string {
	for _, k := range []struct {
		key     string
		raw     json.RawMessage
		neutral []string
		why     string
	}{
		{"n", u.N, []string{"1"}, "one choice per line: write a line per choice, each with its own custom_id and seed"},
		{"logprobs", u.Logprobs, []string{"false"}, "log-probabilities are served by sluice serve, not by batch files"},
		{"top_logprobs", u.TopLogprobs, []string{"0"}, "log-probabilities are served by sluice serve, not by batch files"},
		{"echo", u.Echo, []string{"false"}, "the prompt is not echoed"},
		{"stream", u.Stream, []string{"false"}, "batch results are not streamed"},
		{"suffix", u.Suffix, []string{`""`}, "insertion is not supported"},
		{"logit_bias", u.LogitBias, []string{"{}"}, "the sampler has no logit bias"},
		{"presence_penalty", u.PresencePenalty, []string{"0", "0.0"}, "the sampler has no presence penalty"},
		{"frequency_penalty", u.FrequencyPenalty, []string{"0", "0.0"}, "the sampler has no frequency penalty"},
		{"tools", u.Tools, []string{"[]"}, "tool calls are not supported"},
	} {
		if !present(k.raw) {
			continue
		}
		v := string(bytes.Join(bytes.Fields(k.raw), nil))
		if !slices.Contains(k.neutral, v) {
			return fmt.Sprintf("%q is %s: not supported (%s)", prefix+k.key, clip(k.raw), k.why)
		}
	}
	return ""
}

const (
	urlCompletions = "/v1/completions"
	urlChat        = "/v1/chat/completions"
)

// parseJSON fills req from one JSON line, or sets req.Err. Unknown keys are
// ignored: batch files often carry metadata, and OpenAI bodies carry options
// (model, stop, n, ...) that a local run does not use.
func (r *Reader) parseJSON(line []byte, req *Request) {
	fail := func(format string, args ...any) {
		req.Err = r.lineErr(ErrBadLine, fmt.Sprintf(format, args...))
	}
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		fail("invalid JSON: want one object {...} per line")
		return
	}
	var jl jsonLine
	if err := json.Unmarshal(line, &jl); err != nil {
		fail("invalid JSON: %s", jsonErrText(err))
		return
	}
	if present(jl.CustomID) {
		var id string
		if err := json.Unmarshal(jl.CustomID, &id); err != nil {
			fail(`"custom_id" must be a string, got %s`, clip(jl.CustomID))
			return
		}
		if id == "" {
			fail(`"custom_id" is empty`)
			return
		}
		req.CustomID = id
	}
	openai := r.format == OpenAIBatch || r.format != JSONL && present(jl.Body)
	if r.detect {
		r.detect = false
		if openai {
			r.resolved = OpenAIBatch
		}
	}
	if !openai {
		if !present(jl.Prompt) && !present(jl.Messages) && present(jl.Body) {
			fail(`missing "prompt" (the line has a "body": is this an OpenAI Batch file? use format openai or auto)`)
			return
		}
		if msg := r.fill(req, &jl.params, ""); msg != "" {
			fail("%s", msg)
		}
		return
	}

	if present(jl.Method) {
		var m string
		if json.Unmarshal(jl.Method, &m) != nil || m != "POST" {
			fail(`"method" is %s; want "POST"`, clip(jl.Method))
			return
		}
	}
	url := ""
	if present(jl.URL) {
		if json.Unmarshal(jl.URL, &url) != nil || url != urlCompletions && url != urlChat {
			fail(`"url" is %s; want %q or %q`, clip(jl.URL), urlCompletions, urlChat)
			return
		}
	}
	if !present(jl.Body) {
		fail(`missing "body"`)
		return
	}
	var body params
	if b := bytes.TrimSpace(jl.Body); b[0] != '{' {
		fail(`"body" must be an object, got %s`, clip(jl.Body))
		return
	}
	if err := json.Unmarshal(jl.Body, &body); err != nil {
		fail(`invalid JSON in "body": %s`, jsonErrText(err))
		return
	}
	switch url {
	case urlCompletions:
		if !present(body.Prompt) {
			fail(`missing "body.prompt" (url %s)`, url)
			return
		}
		if present(body.Messages) {
			fail(`"body.messages" with url %s; chat requests use %s`, url, urlChat)
			return
		}
	case urlChat:
		if !present(body.Messages) {
			fail(`missing "body.messages" (url %s)`, url)
			return
		}
		if present(body.Prompt) {
			fail(`"body.prompt" with url %s; completion requests use %s`, url, urlCompletions)
			return
		}
	}
	if msg := r.fill(req, &body, "body."); msg != "" {
		fail("%s", msg)
	}
}

// fill copies the request keys into req; it returns what is wrong, or "".
// prefix ("body.") is how messages name the keys.
func (r *Reader) fill(req *Request, p *params, prefix string) string {
	switch {
	case present(p.Prompt) && present(p.Messages):
		return fmt.Sprintf(`both %q and %q; give one`, prefix+"prompt", prefix+"messages")
	case present(p.Prompt):
		if err := json.Unmarshal(p.Prompt, &req.Prompt); err != nil {
			return fmt.Sprintf(`%q must be a string (arrays of prompts or tokens are not supported), got %s`, prefix+"prompt", clip(p.Prompt))
		}
	case present(p.Messages):
		msgs, msg := messages(p.Messages, prefix+"messages")
		if msg != "" {
			return msg
		}
		req.Messages = msgs
	default:
		return fmt.Sprintf("missing %q", prefix+"prompt")
	}

	maxTok, key := p.MaxTokens, "max_tokens"
	if present(p.MaxCompletionTokens) {
		maxTok, key = p.MaxCompletionTokens, "max_completion_tokens"
	}
	if present(maxTok) {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(maxTok)), 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return fmt.Sprintf("%q must be an integer from 0 to %d, got %s", prefix+key, math.MaxInt32, clip(maxTok))
		}
		req.MaxTokens = int(n)
	}
	if present(p.BestOf) {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(p.BestOf)), 10, 64)
		if err != nil || n < 1 || n > MaxBestOf {
			return fmt.Sprintf("%q must be an integer from 1 to %d, got %s", prefix+"best_of", MaxBestOf, clip(p.BestOf))
		}
		req.BestOf = int(n)
	}
	if present(p.Temperature) {
		var t float64
		if err := json.Unmarshal(p.Temperature, &t); err != nil || t < 0 {
			return fmt.Sprintf("%q must be a number ≥ 0, got %s", prefix+"temperature", clip(p.Temperature))
		}
		req.Temperature = &t
	}
	if present(p.Seed) {
		s, err := strconv.ParseUint(string(bytes.TrimSpace(p.Seed)), 10, 64)
		if err != nil {
			return fmt.Sprintf("%q must be an integer from 0 to 2^64-1, got %s", prefix+"seed", clip(p.Seed))
		}
		req.Seed = &s
	}
	if present(p.Adapter) {
		if err := json.Unmarshal(p.Adapter, &req.Adapter); err != nil || req.Adapter == "" {
			return fmt.Sprintf("%q must be a non-empty string (an adapter name), got %s", prefix+"adapter", clip(p.Adapter))
		}
	}
	if present(p.TopP) {
		var v float64
		if err := json.Unmarshal(p.TopP, &v); err != nil || !(v >= 0 && v <= 1) {
			return fmt.Sprintf("%q must be a number from 0 to 1, got %s", prefix+"top_p", clip(p.TopP))
		}
		req.TopP = &v
	}
	if present(p.MinP) {
		var v float64
		if err := json.Unmarshal(p.MinP, &v); err != nil || !(v >= 0 && v <= 1) {
			return fmt.Sprintf("%q must be a number from 0 to 1, got %s", prefix+"min_p", clip(p.MinP))
		}
		req.MinP = &v
	}
	if present(p.TopK) {
		n, err := strconv.ParseInt(string(bytes.TrimSpace(p.TopK)), 10, 32)
		if err != nil || n < -1 {
			return fmt.Sprintf("%q must be an integer ≥ -1 (-1 or 0 is off), got %s", prefix+"top_k", clip(p.TopK))
		}
		k := int(max(n, 0))
		req.TopK = &k
	}
	if present(p.Stop) {
		var one string
		if json.Unmarshal(p.Stop, &one) == nil {
			req.Stop = []string{one}
		} else if json.Unmarshal(p.Stop, &req.Stop) != nil {
			return fmt.Sprintf("%q must be a string or an array of strings, got %s", prefix+"stop", clip(p.Stop))
		}
		req.Stop = slices.DeleteFunc(req.Stop, func(s string) bool { return s == "" })
		if len(req.Stop) > MaxStops {
			return fmt.Sprintf("%q has %d strings; at most %d", prefix+"stop", len(req.Stop), MaxStops)
		}
		if len(req.Stop) == 0 {
			req.Stop = nil
		}
	}
	if present(p.Model) {
		if err := json.Unmarshal(p.Model, &req.Model); err != nil {
			return fmt.Sprintf("%q must be a string, got %s", prefix+"model", clip(p.Model))
		}
	}
	if msg := constraint(req, p, prefix); msg != "" {
		return msg
	}
	return p.unsupported.check(prefix)
}

// constraint reads "response_format" (OpenAI's text, json_object and
// json_schema, and llama-server's "schema" beside the type) and "grammar"
// (GBNF text) into req; it returns what is wrong, or "".
func constraint(req *Request, p *params, prefix string) string {
	if present(p.Grammar) {
		if err := json.Unmarshal(p.Grammar, &req.Grammar); err != nil || req.Grammar == "" {
			return fmt.Sprintf("%q must be a non-empty string (a GBNF grammar), got %s", prefix+"grammar", clip(p.Grammar))
		}
	}
	if !present(p.ResponseFormat) {
		return ""
	}
	key := prefix + "response_format"
	var rf struct {
		Type       json.RawMessage `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
		Schema     json.RawMessage `json:"schema"`
	}
	if b := bytes.TrimSpace(p.ResponseFormat); b[0] != '{' || json.Unmarshal(b, &rf) != nil {
		return fmt.Sprintf("%q must be an object {\"type\": ...}, got %s", key, clip(p.ResponseFormat))
	}
	var typ string
	if json.Unmarshal(rf.Type, &typ) != nil {
		return fmt.Sprintf("%q must be a string, got %s", key+".type", clip(rf.Type))
	}
	isObject := func(raw json.RawMessage) bool {
		b := bytes.TrimSpace(raw)
		return len(b) > 0 && (b[0] == '{' || bytes.Equal(b, []byte("true")) || bytes.Equal(b, []byte("false")))
	}
	switch typ {
	case "text":
		if present(rf.JSONSchema) || present(rf.Schema) {
			return fmt.Sprintf("%q of type text takes no schema; use type json_schema", key)
		}
		return ""
	case "json_object":
		if present(rf.JSONSchema) {
			return fmt.Sprintf("%q belongs to type json_schema, not json_object", key+".json_schema")
		}
		req.Schema = json.RawMessage(`{"type":"object"}`)
		if present(rf.Schema) {
			if !isObject(rf.Schema) {
				return fmt.Sprintf("%q must be a JSON Schema (an object), got %s", key+".schema", clip(rf.Schema))
			}
			req.Schema = rf.Schema
		}
	case "json_schema":
		switch {
		case present(rf.JSONSchema):
			var js struct {
				Schema json.RawMessage `json:"schema"`
			}
			if b := bytes.TrimSpace(rf.JSONSchema); b[0] != '{' || json.Unmarshal(b, &js) != nil {
				return fmt.Sprintf("%q must be an object {\"name\", \"schema\", \"strict\"}, got %s", key+".json_schema", clip(rf.JSONSchema))
			}
			if !present(js.Schema) || !isObject(js.Schema) {
				return fmt.Sprintf("%q must be a JSON Schema (an object), got %s", key+".json_schema.schema", clip(js.Schema))
			}
			req.Schema = js.Schema
		case present(rf.Schema) && isObject(rf.Schema):
			req.Schema = rf.Schema
		default:
			return fmt.Sprintf("%q of type json_schema needs \"json_schema\": {\"name\", \"schema\"}", key)
		}
	default:
		return fmt.Sprintf("%q is %s; want \"text\", \"json_object\" or \"json_schema\"", key+".type", clip(rf.Type))
	}
	if req.Grammar != "" {
		return fmt.Sprintf("both %q and %q constrain the output; give one", key, prefix+"grammar")
	}
	return ""
}

// MaxStops bounds the stop strings of one line (OpenAI allows 4; the
// server 16).
const MaxStops = 16

// messages decodes a chat message list. Content may be a string or an
// array of {"type": "text", "text": ...} parts, which are concatenated.
func messages(raw json.RawMessage, key string) ([]Message, string) {
	var list []struct {
		Role    json.RawMessage `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Sprintf("%q must be an array of {\"role\", \"content\"} objects, got %s", key, clip(raw))
	}
	if len(list) == 0 {
		return nil, fmt.Sprintf("%q is empty", key)
	}
	out := make([]Message, len(list))
	for i, m := range list {
		at := fmt.Sprintf("%s[%d]", key, i)
		if !present(m.Role) || json.Unmarshal(m.Role, &out[i].Role) != nil || out[i].Role == "" {
			return nil, fmt.Sprintf("%s: \"role\" must be a non-empty string, got %s", at, clip(m.Role))
		}
		if !present(m.Content) {
			return nil, fmt.Sprintf("%s: missing \"content\"", at)
		}
		if json.Unmarshal(m.Content, &out[i].Content) == nil {
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) != nil {
			return nil, fmt.Sprintf("%s: \"content\" must be a string or an array of text parts, got %s", at, clip(m.Content))
		}
		var b strings.Builder
		for j, p := range parts {
			if p.Type != "text" {
				return nil, fmt.Sprintf("%s.content[%d]: part type %q is not supported; only \"text\"", at, j, p.Type)
			}
			b.WriteString(p.Text)
		}
		out[i].Content = b.String()
	}
	return out, ""
}

// present reports whether a key was given with a non-null value.
func present(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// clip quotes a raw JSON value for a message, shortened if long.
func clip(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if s == "" {
		return "nothing"
	}
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// jsonErrText makes encoding/json's errors read well after "invalid JSON: ".
func jsonErrText(err error) string {
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Sprintf("%s (at byte %d)", se.Error(), se.Offset)
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok && te.Field != "" {
		return fmt.Sprintf("%q: got a JSON %s", te.Field, te.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}
