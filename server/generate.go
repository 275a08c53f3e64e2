package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/jobs"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

// Limits on parameters.
const (
	maxStops     = 16
	maxStopBytes = 1024
	maxLogprobs  = 20
)

// params are a request's validated generation parameters.
type params struct {
	maxTokens  int // 0: the pipeline's max_new_tokens
	sampling   sample.Options
	seeded     bool
	n          int
	stops      []string
	stopTokens []int32
	logprobs   int // alternatives per token; -1: no logprobs
	stream     bool
	usage      bool
	bestOf     int // > n: one best_of request per prompt (runBestOf); 0: none
	logitBias  map[int32]float32
	grammar    *grammar.Spec
}

// job is one HTTP generation request: its prompts × n choices.
type job struct {
	chat     bool
	endpoint string
	id       string
	created  int64
	prompts  [][]int32
	echo     []string // completions with echo: each prompt's text
	p        params
	// toolCall: the output is a forced tool call, returned as the
	// message's tool_calls (finish_reason tool_calls), not as content.
	toolCall bool
	// toolAuto is the call syntax the output is read with under
	// tool_choice auto ("" otherwise): calls found become tool_calls.
	toolAuto string
	// oneCall: parallel_tool_calls false, so a turn keeps its first call.
	oneCall bool
}

// event is a piece of one choice's output, in order; the last has final set.
type event struct {
	index  int
	text   string
	lps    []tokenLP
	final  bool
	finish string
	err    *apiError
	ntok   int
	cached int // prompt tokens from the prefix cache
}

// decode reads the body, within Options.BodyTimeout and MaxBodyBytes, into v.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	rc := http.NewResponseController(w)
	// Without a connection under it (a handler called directly) there is
	// no deadline to set, and nothing to hold.
	timed := rc.SetReadDeadline(time.Now().Add(s.o.BodyTimeout)) == nil
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// The deadline stays passed, so net/http does not wait for the rest
		// of the body after the reply either: it closes the connection.
		w.Header().Set("Connection", "close")
		return errBodyTimeout(s.o.BodyTimeout)
	}
	if timed {
		rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		return decodeError(err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return decodeError(errEmptyBody)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return decodeError(err)
	}
	return nil
}

func (s *Server) checkModel(name string) *apiError {
	if name != "" && name != s.o.Model {
		return withCode(notFound("The model '%s' does not exist: this server serves '%s'.", name, s.o.Model), "model_not_found")
	}
	return nil
}

// params validates the shared fields. maxTokens is max_tokens or chat's
// max_completion_tokens, named param.
func (s *Server) params(f *samplingFields, maxTokens *int, maxParam string) (params, *apiError) {
	p := params{sampling: s.samplingDefaults(), n: 1, logprobs: -1, stream: f.Stream}
	so := &p.sampling
	if f.N != nil {
		if *f.N < 1 || *f.N > s.o.MaxN {
			return p, badRequest("n", "'n' is %d: it must be between 1 and %d.", *f.N, s.o.MaxN)
		}
		p.n = *f.N
	}
	if maxTokens != nil {
		if *maxTokens < 1 || *maxTokens > s.eng.Context() {
			return p, badRequest(maxParam, "'%s' is %d: it must be between 1 and the context, %d tokens.", maxParam, *maxTokens, s.eng.Context())
		}
		p.maxTokens = *maxTokens
	}
	if f.Temperature != nil {
		if !(*f.Temperature >= 0) {
			return p, badRequest("temperature", "'temperature' is %g: it must be ≥ 0 (0 is greedy).", *f.Temperature)
		}
		so.Temperature = float32(*f.Temperature)
	}
	if f.TopP != nil {
		if !(*f.TopP >= 0 && *f.TopP <= 1) {
			return p, badRequest("top_p", "'top_p' is %g: it must be in [0, 1] (0 or 1 is off).", *f.TopP)
		}
		so.TopP = float32(*f.TopP)
	}
	if f.TopK != nil {
		if *f.TopK < -1 {
			return p, badRequest("top_k", "'top_k' is %d: it must be ≥ -1 (-1 or 0 is off).", *f.TopK)
		}
		so.TopK = max(*f.TopK, 0)
	}
	if f.MinP != nil {
		if !(*f.MinP >= 0 && *f.MinP <= 1) {
			return p, badRequest("min_p", "'min_p' is %g: it must be in [0, 1] (0 is off).", *f.MinP)
		}
		so.MinP = float32(*f.MinP)
	}
	for _, rp := range []struct {
		name string
		v    *float64
	}{{"repeat_penalty", f.RepeatPenalty}, {"repetition_penalty", f.RepetitionPenalty}} {
		if rp.v == nil {
			continue
		}
		if !(*rp.v >= 0 && *rp.v <= 100) {
			return p, badRequest(rp.name, "'%s' is %g: it must be in [0, 100] (1 is off).", rp.name, *rp.v)
		}
		so.RepeatPenalty = float32(*rp.v)
	}
	for _, pen := range []struct {
		name string
		v    *float64
	}{{"presence_penalty", f.PresencePenalty}, {"frequency_penalty", f.FrequencyPenalty}} {
		if pen.v != nil && *pen.v != 0 {
			return p, badRequest(pen.name, "'%s' is not supported by this server (only 0); use repetition_penalty.", pen.name)
		}
	}
	if len(f.LogitBias) > 0 {
		p.logitBias = make(map[int32]float32, len(f.LogitBias))
		v := s.tok.VocabSize()
		for k, b := range f.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 || int(id) >= v {
				return p, badRequest("logit_bias", "'logit_bias' names token %q: keys must be token ids from 0 to %d.", k, v-1)
			}
			if !(b >= -100 && b <= 100) {
				return p, badRequest("logit_bias", "'logit_bias' gives token %s the bias %g: it must be in [-100, 100].", k, b)
			}
			p.logitBias[int32(id)] = float32(b)
		}
	}
	if len(f.Stop) > maxStops {
		return p, badRequest("stop", "'stop' has %d strings: at most %d are allowed.", len(f.Stop), maxStops)
	}
	for _, st := range f.Stop {
		if len(st) > maxStopBytes {
			return p, badRequest("stop", "A stop string is %d bytes long: at most %d are allowed.", len(st), maxStopBytes)
		}
		if st != "" {
			p.stops = append(p.stops, st)
		}
	}
	if f.Seed != nil {
		switch {
		case *f.Seed >= 0:
			so.Seed, p.seeded = uint64(*f.Seed), true
		case *f.Seed != -1:
			return p, badRequest("seed", "'seed' is %d: it must be ≥ 0 (or -1 for a random seed).", *f.Seed)
		}
	}
	if e := s.constraint(f, &p); e != nil {
		return p, e
	}
	if f.StreamOptions != nil {
		if !f.Stream {
			return p, badRequest("stream_options", "'stream_options' is only allowed when 'stream' is true.")
		}
		p.usage = f.StreamOptions.IncludeUsage
	}
	if err := so.Validate(); err != nil {
		return p, badRequest("", "Invalid sampling parameters: %v.", err)
	}
	return p, nil
}

// constraint reads the output constraint of a request: response_format
// (OpenAI's json_object and json_schema, llama-server's "schema" beside
// either type), or llama-server's grammar (GBNF) or json_schema fields; at
// most one of them. It compiles the constraint through the engine's cache,
// so a schema that is not JSON, a keyword the engine cannot enforce, an
// empty enum, a schema no value satisfies or a GBNF syntax error is a 400
// naming the parameter and the problem, before anything is generated.
func (s *Server) constraint(f *samplingFields, p *params) *apiError {
	var sp *grammar.Spec
	param := ""
	given := func(name string, x *grammar.Spec) *apiError {
		if sp != nil {
			return badRequest(name, "'%s' and '%s' both constrain the output: give one.", param, name)
		}
		sp, param = x, name
		return nil
	}
	present := func(raw json.RawMessage) bool {
		raw = bytes.TrimSpace(raw)
		return len(raw) > 0 && !bytes.Equal(raw, []byte("null"))
	}
	if rf := f.ResponseFormat; rf != nil {
		switch rf.Type {
		case "", "text":
			if rf.JSONSchema != nil || present(rf.Schema) {
				return badRequest("response_format", "'response_format' of type %q takes no schema: use type json_schema.", rf.Type)
			}
		case "json_object":
			if rf.JSONSchema != nil {
				return badRequest("response_format.json_schema", "'response_format.json_schema' belongs to type json_schema, not json_object.")
			}
			schema := json.RawMessage(`{"type":"object"}`)
			if present(rf.Schema) {
				schema = rf.Schema
			}
			if e := given("response_format", &grammar.Spec{Schema: schema}); e != nil {
				return e
			}
		case "json_schema":
			var schema json.RawMessage
			switch {
			case rf.JSONSchema != nil && present(rf.JSONSchema.Schema):
				schema = rf.JSONSchema.Schema
			case rf.JSONSchema == nil && present(rf.Schema):
				schema = rf.Schema
			default:
				return badRequest("response_format.json_schema.schema", "'response_format' of type json_schema needs 'json_schema': {'name': ..., 'schema': {...}}.")
			}
			if e := given("response_format", &grammar.Spec{Schema: schema}); e != nil {
				return e
			}
		default:
			return badRequest("response_format.type", "Invalid 'response_format.type' %q: expected text, json_object or json_schema.", rf.Type)
		}
	}
	if f.Grammar != nil && *f.Grammar != "" {
		if e := given("grammar", &grammar.Spec{GBNF: *f.Grammar}); e != nil {
			return e
		}
	}
	if present(f.JSONSchema) {
		if e := given("json_schema", &grammar.Spec{Schema: f.JSONSchema}); e != nil {
			return e
		}
	}
	if sp == nil {
		return nil
	}
	if _, err := s.eng.Grammars().Matcher(*sp); err != nil {
		what := "JSON Schema"
		if sp.GBNF != "" {
			what = "grammar"
		}
		return badRequest(param, "Invalid %s in '%s': %v.", what, param, err)
	}
	p.grammar = sp
	return nil
}

// logprobsOK refuses logprobs where they cannot be computed.
func (s *Server) logprobsOK(param string) *apiError {
	if s.speculative {
		return badRequest(param, "'%s' is not available with this server's speculative pipeline: drafts are verified without the full distribution of every token.", param)
	}
	return nil
}

// checkPrompt checks one tokenized prompt against the vocabulary and context.
func (s *Server) checkPrompt(param string, toks []int32) *apiError {
	if len(toks) == 0 {
		return badRequest(param, "The prompt is empty (and the model adds no BOS token).")
	}
	if c := s.eng.Context(); len(toks) > c {
		return withCode(badRequest(param, "This model's maximum context length is %d tokens; the prompt has %d tokens.", c, len(toks)), "context_length_exceeded")
	}
	v := s.tok.VocabSize()
	for i, t := range toks {
		if t < 0 || int(t) >= v {
			return badRequest(param, "Prompt token %d is id %d, outside the vocabulary of %d tokens.", i, t, v)
		}
	}
	return nil
}

// checkPromptBytes refuses, before tokenizing, a text prompt of n bytes that
// cannot fit the context: it encodes to at least n / MaxBytesPerToken tokens
// (tokenizer.MaxBytesPerToken), so a prompt of megabytes is refused in
// microseconds rather than after seconds of tokenizing.
func (s *Server) checkPromptBytes(param string, n int) *apiError {
	if s.maxPromptBytes == 0 || n <= s.maxPromptBytes {
		return nil
	}
	c := s.eng.Context()
	return withCode(badRequest(param, "This model's maximum context length is %d tokens; the prompt is %d bytes, which is more than %d tokens for this vocabulary (at most %d bytes a token).",
		c, n, c, s.maxPromptBytes/c), "context_length_exceeded")
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.completionJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.run(w, r, j, start)
}

func (s *Server) completionJob(req *completionRequest) (*job, *apiError) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	p, e := s.params(&req.samplingFields, req.MaxTokens, "max_tokens")
	if e != nil {
		return nil, e
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, badRequest("suffix", "'suffix' is not supported by this server.")
	}
	if req.BestOf != nil {
		switch k := *req.BestOf; {
		case k < p.n:
			return nil, badRequest("best_of", "'best_of' is %d: it must be ≥ n (%d).", k, p.n)
		case k > s.o.MaxN:
			return nil, badRequest("best_of", "'best_of' is %d: at most %d are allowed.", k, s.o.MaxN)
		case k > p.n && p.stream:
			return nil, badRequest("best_of", "'best_of' cannot be used with 'stream': the best candidates are known only when all have ended.")
		case k > p.n && req.Logprobs != nil:
			return nil, badRequest("best_of", "'best_of' greater than n cannot be combined with 'logprobs' on this server.")
		case k > p.n:
			p.bestOf = k
		}
	}
	if req.Logprobs != nil {
		if e := s.logprobsOK("logprobs"); e != nil {
			return nil, e
		}
		if *req.Logprobs < 0 || *req.Logprobs > maxLogprobs {
			return nil, badRequest("logprobs", "'logprobs' is %d: it must be between 0 and %d.", *req.Logprobs, maxLogprobs)
		}
		p.logprobs = *req.Logprobs
	}
	prompts, err := parsePrompts(req.Prompt)
	if err != nil {
		return nil, decodeError(err)
	}
	if p.bestOf > 0 && len(prompts)*p.bestOf > s.o.MaxN {
		return nil, badRequest("best_of", "%d prompts × best_of = %d is %d candidates: at most %d are allowed.", len(prompts), p.bestOf, len(prompts)*p.bestOf, s.o.MaxN)
	}
	if len(prompts)*p.n > s.o.MaxN {
		return nil, badRequest("n", "%d prompts × n = %d is %d choices: at most %d are allowed.", len(prompts), p.n, len(prompts)*p.n, s.o.MaxN)
	}
	j := &job{endpoint: "completions", id: newID("cmpl-"), created: time.Now().Unix(), p: p}
	for _, pr := range prompts {
		toks := pr.tokens
		if pr.isText {
			if e := s.checkPromptBytes("prompt", len(pr.text)); e != nil {
				return nil, e
			}
			toks = s.eng.Encode(pr.text)
		}
		if e := s.checkPrompt("prompt", toks); e != nil {
			return nil, e
		}
		j.prompts = append(j.prompts, toks)
		if req.Echo {
			text := pr.text
			if !pr.isText {
				text = s.eng.Text(toks)
			}
			j.echo = append(j.echo, text)
		}
	}
	return j, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	j, e := s.chatJob(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	s.run(w, r, j, start)
}

func (s *Server) chatJob(req *chatRequest) (*job, *apiError) {
	if e := s.checkModel(req.Model); e != nil {
		return nil, e
	}
	maxTok, maxParam := req.MaxTokens, "max_tokens"
	if req.MaxCompletionTokens != nil {
		maxTok, maxParam = req.MaxCompletionTokens, "max_completion_tokens"
	}
	p, e := s.params(&req.samplingFields, maxTok, maxParam)
	if e != nil {
		return nil, e
	}
	plan, e := s.tools(req, &p)
	if e != nil {
		return nil, e
	}
	switch {
	case req.TopLogprobs != nil && (req.Logprobs == nil || !*req.Logprobs):
		return nil, badRequest("top_logprobs", "'top_logprobs' needs 'logprobs': true.")
	case req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > maxLogprobs):
		return nil, badRequest("top_logprobs", "'top_logprobs' is %d: it must be between 0 and %d.", *req.TopLogprobs, maxLogprobs)
	case req.Logprobs != nil && *req.Logprobs:
		if e := s.logprobsOK("logprobs"); e != nil {
			return nil, e
		}
		p.logprobs = 0
		if req.TopLogprobs != nil {
			p.logprobs = *req.TopLogprobs
		}
	}
	if len(req.Messages) == 0 {
		return nil, badRequest("messages", "'messages' is empty: a chat needs at least one message.")
	}
	msgs := make([]chat.Message, len(req.Messages))
	contentBytes := 0
	for i, m := range req.Messages {
		if _, ok := jobs.ChatRole(m.Role); !ok {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "Invalid role %q: expected system, developer, user, assistant or tool.", m.Role)
		}
		text, err := messageText(i, m.Content)
		if err != nil {
			return nil, decodeError(err)
		}
		msgs[i] = chat.Message{Role: m.Role, Content: text, ToolCallID: m.ToolCallID}
		if tc := bytes.TrimSpace(m.ToolCalls); len(tc) > 0 && !bytes.Equal(tc, []byte("null")) {
			if err := json.Unmarshal(tc, &msgs[i].ToolCalls); err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].tool_calls", i), "Invalid 'messages[%d].tool_calls': expected an array of calls: %v.", i, err)
			}
		}
		contentBytes += len(text) + len(m.ToolCalls)
	}
	// The template only adds text around the messages.
	if e := s.checkPromptBytes("messages", contentBytes); e != nil {
		return nil, e
	}
	var render []any
	if plan != nil {
		render = plan.render
	}
	toks, err := s.chat.TokensWithTools(msgs, render)
	if err != nil {
		return nil, badRequest("messages", "The chat template rejected the messages: %v.", err)
	}
	if e := s.checkPrompt("messages", toks); e != nil {
		return nil, e
	}
	p.stopTokens = s.chatIDs
	p.stops = append(p.stops, s.chatTxt...)
	j := &job{chat: true, endpoint: "chat", id: newID("chatcmpl-"), created: time.Now().Unix(), prompts: [][]int32{toks}, p: p}
	if plan != nil {
		j.toolCall, j.toolAuto = plan.forced, plan.auto
		j.oneCall = req.ParallelToolCalls != nil && !*req.ParallelToolCalls
	}
	return j, nil
}

// calls reads the tool calls of a choice's text under tool_choice auto;
// with parallel_tool_calls false only the first is kept.
func (j *job) calls(text string) (*string, []jobs.ToolCall) {
	content, calls := parseCalls(j.toolAuto, text)
	if j.oneCall && len(calls) > 1 {
		calls = calls[:1]
	}
	return content, calls
}

// run submits every choice of j and writes the response.
func (s *Server) run(w http.ResponseWriter, r *http.Request, j *job, start time.Time) {
	total, requests := len(j.prompts)*j.p.n, len(j.prompts)*j.p.n
	if j.p.bestOf > 0 {
		requests = len(j.prompts) // one engine request per prompt
	}
	if e := s.admit(requests); e != nil {
		writeError(w, e)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	events := make(chan event, 4*total)
	var wg sync.WaitGroup
	for i, pr := range j.prompts {
		if j.p.bestOf > 0 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer s.release()
				s.runBestOf(ctx, j, i, pr, events)
			}()
			continue
		}
		for c := range j.p.n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer s.release()
				s.runChoice(ctx, j, i*j.p.n+c, pr, events)
			}()
		}
	}
	go func() {
		wg.Wait()
		close(events)
	}()
	if j.p.stream {
		s.stream(w, j, events, cancel)
	} else {
		s.collect(w, j, events)
	}
	for range events {
		// The writer stopped early: wait for every choice to end.
	}
	s.m.duration.WithLabelValues(j.endpoint).Observe(time.Since(start).Seconds())
}

var errClientGone = &apiError{Status: 499, Type: "invalid_request_error", Message: "The client closed the request."}

// runChoice runs choice idx of j through the engine, sending its text as it
// comes (held back while it could be a stop string's start).
func (s *Server) runChoice(ctx context.Context, j *job, idx int, prompt []int32, events chan<- event) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	so := j.p.sampling
	var index uint64
	if j.p.seeded {
		index = uint64(idx)
	} else {
		so.Seed, index = newSeed(), s.index.Add(1)
	}
	req := sluice.Request{
		ID: fmt.Sprintf("%s-%d", j.id, idx), Index: index, Tokens: prompt,
		MaxNewTokens: j.p.maxTokens, Sampling: &so, StopTokens: j.p.stopTokens, LogitBias: j.p.logitBias, Grammar: j.p.grammar,
	}
	var lp *lpCapture
	if j.p.logprobs >= 0 {
		lp = newCapture(j.p.logprobs)
		req.OnLogits, req.OnToken = lp.logits, lp.token
	}
	s.m.promptTokens.Add(float64(len(prompt)))
	submitted := time.Now()
	st, err := s.eng.Generate(ctx, req)
	if err != nil {
		e := errShuttingDown
		if ctx.Err() != nil {
			e = errClientGone
		}
		events <- event{index: idx, final: true, err: e}
		return
	}
	stop := jobs.NewStopper(j.p.stops)
	ntok, textLen, stopped := 0, 0, false
	for t, ok := st.Next(ctx); ok; t, ok = st.Next(ctx) {
		if ntok == 0 && t.ID >= 0 {
			s.m.firstToken.Observe(time.Since(submitted).Seconds())
		}
		var lps []tokenLP
		if t.ID >= 0 {
			if lp != nil {
				e := lp.get(ntok)
				e.offset = textLen
				lps = []tokenLP{e}
			}
			ntok++
		}
		textLen += len(t.Text)
		emit, hit := stop.Push(t.Text)
		if emit != "" || lps != nil {
			events <- event{index: idx, text: emit, lps: lps}
		}
		if hit {
			stopped = true
			cancel() // the engine drops the request at its next step
			break
		}
	}
	res := st.Result()
	s.noteOutcome(res.Err, res.Finish == sluice.FinishStop || res.Finish == sluice.FinishLength)
	s.m.generationTokens.Add(float64(ntok))
	ev := event{index: idx, final: true, ntok: ntok, cached: res.CachedTokens, finish: res.Finish}
	switch {
	case stopped:
		ev.finish = sluice.FinishStop
	case res.Finish == sluice.FinishError && errors.Is(res.Err, session.ErrPromptTooLong):
		ev.err = withCode(badRequest("prompt", "%v", res.Err), "context_length_exceeded")
	case res.Finish == sluice.FinishError && errors.Is(res.Err, grammar.ErrNoToken):
		// The grammar needs text no token of the model's vocabulary
		// writes: the request's constraint is at fault, not the server.
		ev.err = badRequest("response_format", "The output constraint cannot be followed with this model's vocabulary: %v.", res.Err)
	case res.Finish == sluice.FinishError:
		ev.err = internalError(res.Err)
	default:
		// stop, length; or cancelled and timeout: the client left, the
		// server is shutting down or the pipeline's timeout passed.
		ev.text = stop.Flush()
	}
	events <- ev
}

// runBestOf runs prompt i of j as one best_of request (decode.BestOf) and
// sends the n best candidates as choices i·n … i·n+n−1; usage counts every
// candidate's tokens, as OpenAI's does.
func (s *Server) runBestOf(ctx context.Context, j *job, i int, prompt []int32, events chan<- event) {
	so := j.p.sampling
	index := uint64(i)
	if !j.p.seeded {
		so.Seed, index = newSeed(), s.index.Add(1)
	}
	req := sluice.Request{
		ID: fmt.Sprintf("%s-%d", j.id, i), Index: index, Tokens: prompt, BestOf: j.p.bestOf,
		MaxNewTokens: j.p.maxTokens, Sampling: &so, StopTokens: j.p.stopTokens, LogitBias: j.p.logitBias, Grammar: j.p.grammar,
	}
	s.m.promptTokens.Add(float64(len(prompt)))
	res, err := s.eng.Complete(ctx, req)
	first := i * j.p.n
	switch {
	case err != nil && res.Finish == sluice.FinishError && errors.Is(res.Err, session.ErrPromptTooLong):
		events <- event{index: first, final: true, err: withCode(badRequest("prompt", "%v", res.Err), "context_length_exceeded")}
		return
	case err != nil && ctx.Err() != nil:
		events <- event{index: first, final: true, err: errClientGone}
		return
	case errors.Is(err, sluice.ErrClosed):
		events <- event{index: first, final: true, err: errShuttingDown}
		return
	case err != nil:
		events <- event{index: first, final: true, err: internalError(err)}
		return
	}
	var cands [][]int32
	for _, h := range res.Beams {
		cands = append(cands, h.Tokens)
	}
	ntok := session.CandidateTokens(s.tok, cands, j.p.stopTokens)
	s.m.generationTokens.Add(float64(ntok))
	for c := range j.p.n {
		ev := event{index: first + c, final: true, finish: sluice.FinishLength}
		if c == 0 {
			ev.ntok = ntok
		}
		if c < len(res.Beams) {
			h := res.Beams[c]
			if n := len(h.Tokens); n > 0 && session.IsStopToken(s.tok, h.Tokens[n-1], j.p.stopTokens) {
				ev.finish = sluice.FinishStop
			}
			stop := jobs.NewStopper(j.p.stops)
			text, hit := stop.Push(h.Text)
			if hit {
				ev.finish = sluice.FinishStop
			} else {
				text += stop.Flush()
			}
			ev.text = text
		}
		events <- ev
	}
}

func finishPtr(f string) *string {
	if f == "" {
		return nil
	}
	return &f
}

func (s *Server) completionLPs(lps []tokenLP) *jobs.CompletionLogprobs {
	out := &jobs.CompletionLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, e := range lps {
		out.Tokens = append(out.Tokens, pieceText(s.tok, e.id))
		out.TokenLogprobs = append(out.TokenLogprobs, e.lp)
		var top map[string]float64
		if len(e.top) > 0 {
			top = make(map[string]float64, len(e.top))
			for _, a := range e.top {
				top[pieceText(s.tok, a.id)] = a.lp
			}
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, e.offset)
	}
	return out
}

func (s *Server) chatLPs(lps []tokenLP) *jobs.ChatLogprobs {
	out := &jobs.ChatLogprobs{Content: []jobs.ChatTokenLogprob{}}
	for _, e := range lps {
		p := pieceText(s.tok, e.id)
		c := jobs.ChatTokenLogprob{Token: p, Logprob: e.lp, Bytes: byteList(p), TopLogprobs: []jobs.ChatTopLogprob{}}
		for _, a := range e.top {
			ap := pieceText(s.tok, a.id)
			c.TopLogprobs = append(c.TopLogprobs, jobs.ChatTopLogprob{Token: ap, Logprob: a.lp, Bytes: byteList(ap)})
		}
		out.Content = append(out.Content, c)
	}
	return out
}

// collect gathers every choice and writes one response.
func (s *Server) collect(w http.ResponseWriter, j *job, events <-chan event) {
	total := len(j.prompts) * j.p.n
	texts := make([]strings.Builder, total)
	lps := make([][]tokenLP, total)
	finish := make([]string, total)
	var fail *apiError
	ntok, cached := 0, make([]int, len(j.prompts))
	for ev := range events {
		texts[ev.index].WriteString(ev.text)
		lps[ev.index] = append(lps[ev.index], ev.lps...)
		if ev.final {
			finish[ev.index], ntok = ev.finish, ntok+ev.ntok
			cached[ev.index/j.p.n] = max(cached[ev.index/j.p.n], ev.cached)
			if ev.err != nil && fail == nil {
				fail = ev.err
			}
		}
	}
	if fail != nil {
		writeError(w, fail)
		return
	}
	u := jobs.NewUsage(promptTokens(j.prompts), ntok, sum(cached))
	if j.chat {
		resp := jobs.ChatResponse{ID: j.id, Object: "chat.completion", Created: j.created, Model: s.o.Model, Usage: u, Choices: []jobs.ChatChoice{}}
		for i := range total {
			text := texts[i].String()
			c := jobs.ChatChoice{Index: i, Message: &jobs.ChatMessageOut{Role: "assistant", Content: &text}, FinishReason: finishPtr(finish[i])}
			if j.toolAuto != "" && finish[i] == sluice.FinishStop {
				if content, calls := j.calls(text); len(calls) > 0 {
					c.Message = &jobs.ChatMessageOut{Role: "assistant", Content: content, ToolCalls: calls}
					c.FinishReason = finishPtr("tool_calls")
				}
			}
			if j.toolCall && finish[i] == sluice.FinishStop {
				calls, err := forcedCalls(text)
				if err != nil {
					writeError(w, internalError(err))
					return
				}
				c.Message = &jobs.ChatMessageOut{Role: "assistant", ToolCalls: calls}
				c.FinishReason = finishPtr("tool_calls")
			}
			if j.p.logprobs >= 0 {
				c.Logprobs = s.chatLPs(lps[i])
			}
			resp.Choices = append(resp.Choices, c)
		}
		writeJSON(w, resp)
		return
	}
	resp := jobs.CompletionResponse{ID: j.id, Object: "text_completion", Created: j.created, Model: s.o.Model, Usage: u, Choices: []jobs.CompletionChoice{}}
	for i := range total {
		text := texts[i].String()
		if j.echo != nil {
			text = j.echo[i/j.p.n] + text
		}
		c := jobs.CompletionChoice{Text: text, Index: i, FinishReason: finishPtr(finish[i])}
		if j.p.logprobs >= 0 {
			c.Logprobs = s.completionLPs(lps[i])
		}
		resp.Choices = append(resp.Choices, c)
	}
	writeJSON(w, resp)
}

// stream writes server-sent events: a chunk per piece of text, a last chunk
// per choice with its finish_reason, the usage chunk when asked for, then
// "data: [DONE]". An error before the first byte is an ordinary error
// response; after it, an {"error": ...} event.
func (s *Server) stream(w http.ResponseWriter, j *job, events <-chan event, cancel context.CancelFunc) {
	rc := http.NewResponseController(w)
	started := false
	var werr error
	send := func(v any) {
		if werr != nil {
			return
		}
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, err := json.Marshal(v)
		if err != nil {
			werr = err
		} else if _, werr = fmt.Fprintf(w, "data: %s\n\n", b); werr == nil {
			werr = rc.Flush()
		}
		if werr != nil {
			cancel() // the client is gone: end its requests now
		}
	}
	total := len(j.prompts) * j.p.n
	begun := make([]bool, total)
	calls := make([]strings.Builder, total)
	sent := make([]int, total) // bytes of calls[i] sent as content (tool_choice auto)
	autoHold := make([]holdState, total)
	ntok, cached := 0, make([]int, len(j.prompts))
	chunk := func(idx int, text string, lps []tokenLP, finish string) any {
		if j.chat {
			c := jobs.ChatChoice{Index: idx, Delta: &jobs.ChatMessageOut{}, FinishReason: finishPtr(finish)}
			if !begun[idx] {
				c.Delta.Role = "assistant"
			}
			if text != "" || !begun[idx] {
				c.Delta.Content = &text
			}
			if lps != nil {
				c.Logprobs = s.chatLPs(lps)
			}
			begun[idx] = true
			return jobs.ChatResponse{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: s.o.Model, Choices: []jobs.ChatChoice{c}}
		}
		if !begun[idx] && j.echo != nil {
			text = j.echo[idx/j.p.n] + text
		}
		begun[idx] = true
		c := jobs.CompletionChoice{Text: text, Index: idx, FinishReason: finishPtr(finish)}
		if lps != nil {
			c.Logprobs = s.completionLPs(lps)
		}
		return jobs.CompletionResponse{ID: j.id, Object: "text_completion", Created: j.created, Model: s.o.Model, Choices: []jobs.CompletionChoice{c}}
	}
	// sendCalls streams a choice's tool calls, one delta each, then its
	// finish reason.
	sendCalls := func(idx int, found []jobs.ToolCall) {
		for k := range found {
			found[k].Index = &k
			send(jobs.ChatResponse{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: s.o.Model,
				Choices: []jobs.ChatChoice{{Index: idx, Delta: &jobs.ChatMessageOut{ToolCalls: found[k : k+1]}}}})
		}
		send(chunk(idx, "", nil, "tool_calls"))
	}
	for ev := range events {
		if ev.final && ev.err != nil {
			if !started {
				writeError(w, ev.err)
				started, werr = true, errors.New("error sent")
				cancel()
				continue
			}
			send(struct {
				Error *apiError `json:"error"`
			}{ev.err})
			continue
		}
		if j.toolAuto != "" {
			// Under auto the text streams as content up to where a call
			// may begin (callStart); from there it is held until the
			// choice ends, then sent as tool_calls deltas (or as content,
			// when it holds no call after all).
			calls[ev.index].WriteString(ev.text)
			if !begun[ev.index] {
				send(chunk(ev.index, "", nil, ""))
			}
			text := calls[ev.index].String()
			if !ev.final {
				if upto := callStart(j.toolAuto, text, &autoHold[ev.index]); upto > sent[ev.index] {
					send(chunk(ev.index, text[sent[ev.index]:upto], nil, ""))
					sent[ev.index] = upto
				}
				continue
			}
			ntok += ev.ntok
			cached[ev.index/j.p.n] = max(cached[ev.index/j.p.n], ev.cached)
			_, found := j.calls(text)
			if ev.finish != sluice.FinishStop || len(found) == 0 {
				if rest := text[sent[ev.index]:]; rest != "" {
					send(chunk(ev.index, rest, nil, ""))
				}
				send(chunk(ev.index, "", nil, ev.finish))
				continue
			}
			sendCalls(ev.index, found)
			continue
		}
		if j.toolCall {
			// Forced calls stream as tool_calls deltas when the turn is
			// complete (their arguments must parse), after the role chunk.
			calls[ev.index].WriteString(ev.text)
			if !begun[ev.index] {
				send(chunk(ev.index, "", nil, ""))
			}
			if !ev.final {
				continue
			}
			ntok += ev.ntok
			cached[ev.index/j.p.n] = max(cached[ev.index/j.p.n], ev.cached)
			if ev.finish != sluice.FinishStop {
				send(chunk(ev.index, calls[ev.index].String(), nil, ""))
				send(chunk(ev.index, "", nil, ev.finish))
				continue
			}
			found, err := forcedCalls(calls[ev.index].String())
			if err != nil {
				send(struct {
					Error *apiError `json:"error"`
				}{internalError(err)})
				continue
			}
			sendCalls(ev.index, found)
			continue
		}
		if ev.text != "" || ev.lps != nil || (j.chat && !begun[ev.index]) {
			send(chunk(ev.index, ev.text, ev.lps, ""))
		}
		if ev.final {
			ntok += ev.ntok
			cached[ev.index/j.p.n] = max(cached[ev.index/j.p.n], ev.cached)
			send(chunk(ev.index, "", nil, ev.finish))
		}
	}
	if j.p.usage {
		u := jobs.NewUsage(promptTokens(j.prompts), ntok, sum(cached))
		if j.chat {
			send(jobs.ChatResponse{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: s.o.Model, Choices: []jobs.ChatChoice{}, Usage: u})
		} else {
			send(jobs.CompletionResponse{ID: j.id, Object: "text_completion", Created: j.created, Model: s.o.Model, Choices: []jobs.CompletionChoice{}, Usage: u})
		}
	}
	if werr == nil && started {
		if _, werr = io.WriteString(w, "data: [DONE]\n\n"); werr == nil {
			rc.Flush()
		}
	}
}

// sum adds up the prompts' cached tokens. Usage counts a prompt's tokens
// once however many choices it has, so its cached tokens are its choices'
// most (the later choices usually map what the first computed).
func sum(cached []int) int {
	n := 0
	for _, c := range cached {
		n += c
	}
	return n
}

// promptTokens is the prompt tokens of a request's prompts, each once.
func promptTokens(prompts [][]int32) int {
	n := 0
	for _, p := range prompts {
		n += len(p)
	}
	return n
}
