// Package server is sluice's OpenAI-compatible HTTP API over one engine:
//
//	POST /v1/completions        text completions (stream or not)
//	POST /v1/chat/completions   chat completions through the model's chat template
//	GET  /v1/models             the one model served
//	GET  /health                {"status":"ok"}; 503 while shutting down, or after a
//	                            memory fault reading the model (the fault and its time)
//	GET  /metrics               Prometheus text format
//
// Requests from every client join the engine's one continuous batch: each
// choice of each request is one sluice.Request, so n = 4 is four sequences
// in the batch. A client that disconnects cancels its requests at once (the
// HTTP request's context is the engine request's), which frees their KV
// pages at the next step. Streams are server-sent events ending with
// "data: [DONE]".
//
// # Parameters
//
// Both endpoints take model, max_tokens (chat also max_completion_tokens),
// temperature, top_p, top_k and min_p (as llama-server takes them; top_k
// -1 or 0 is off), repeat_penalty or repetition_penalty, n, stop (a string
// or up to 16 strings), seed, stream and stream_options.include_usage.
// Completions take logprobs (0-20 alternatives) and echo; chat takes
// logprobs and top_logprobs (0-20). A parameter left out takes the serving
// pipeline's value (its sample stage and max_new_tokens), as llama-server
// takes its command line's: with the greedy preset, an omitted temperature
// is greedy.
//
// A stop string ends the choice with finish_reason "stop" and is cut, with
// everything after it, from the text. While streaming, text that could be
// the start of a stop string is held back until it is known not to be one,
// so a stop string split across tokens is never sent. The engine stops
// generating at the next step (the request is cancelled).
//
// Seeds: with a seed, choice i of a request draws its tokens from
// sample.Uniform(seed, i, t), so the same seed, prompt and parameters give
// the same text on every call, and the n choices differ from one another.
// Without one, each choice gets a random seed and a request index unique in
// the server.
//
// Log-probabilities are of the raw model distribution: log-softmax of the
// logits, before temperature, penalties and top-k/top-p/min-p (what vLLM
// reports by default), computed from Request.OnLogits. The sampled token's
// log-probability is reported even when it is not among the top ones.
// A speculative pipeline (one with a verify stage) samples verified drafts
// without OnLogits, so there logprobs are a 400.
//
// logit_bias (token id → bias in [-100, 100]) is a logits processor of the
// request (sample.LogitBias), applied in every decoding mode; best_of > n
// samples best_of candidates per prompt and returns the n with the highest
// cumulative log-probability, counting all of them in usage (not with
// stream or logprobs). presence_penalty and frequency_penalty are not
// implemented: a non-zero value is a 400 naming the parameter, as is
// suffix.
//
// # Structured output
//
// response_format (json_object: any JSON object; json_schema: the values of
// its schema, strict or not, since the grammar never loosens a schema) on
// chat and completions, and llama-server's grammar (GBNF) and json_schema
// fields, constrain every choice through the engine's grammar (see package
// grammar): the output is compact JSON, and finish_reason is stop when the
// value is complete, length when max_tokens ran out first. A schema or
// grammar the engine cannot compile or enforce is a 400 naming the problem.
//
// # Tool calls
//
// tools (functions) on chat completions are given to the chat template as
// its tools variable; assistant turns with tool_calls and tool turns with
// tool_call_id go back to it as given. tool_choice "required" and a named
// function force calls by a grammar, on any model: {"name", "arguments"}
// with the arguments under the function's parameters schema (under
// "required" with parallel_tool_calls, the default, an array of 1 to 4),
// returned as message.tool_calls (id, function.name, function.arguments as
// a JSON string) with finish_reason tool_calls, or in a stream as
// delta.tool_calls chunks when the turn is complete. "none" generates text
// without the tools. "auto" (the default with tools) lets the model write
// text or calls in its template family's syntax, Hermes/Qwen
// <tool_call>{...}</tool_call>, Llama 3's {"name", "parameters"} or
// Mistral's [TOOL_CALLS][...], read
// back when the choice ends (a stream sends text as content up to where a
// call may begin, and holds the rest until then); with a
// template that defines neither it is a 400 naming the choices that work.
//
// # Errors and limits
//
// Errors are OpenAI error objects {"error": {"message", "type", "param",
// "code"}}: 400 for bad JSON and bad parameters (a prompt longer than the
// context is code context_length_exceeded), 401 for a missing or wrong API
// key, 404 for another model name or path, 405 for a wrong method, 408 for a
// body that did not arrive within Options.BodyTimeout, 413 for a body over
// Options.MaxBodyBytes, 503 (with Retry-After) when Options.MaxWaiting
// requests already wait for the engine, or while shutting down. A text
// prompt too long in bytes to fit the context whatever its tokens is
// refused (context_length_exceeded) before it is tokenized. Serve answers a
// connection beyond Options.MaxConns with a 503 (too_many_connections) and
// closes it. A panic in a handler is a 500, never a crash.
package server

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/jobs"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/tokenizer"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

// Options configure a Server.
type Options struct {
	// Engine runs the requests. Serve drains and closes it; a caller that
	// only uses Handler keeps it.
	Engine *sluice.Engine
	// Model is the id clients name in "model" and /v1/models lists. A
	// request with an empty model is served too.
	Model string
	// APIKey, when set, is required as "Authorization: Bearer KEY" on
	// /v1/ and /metrics (/health stays open for probes).
	APIKey string
	// Chat is the chat template; nil is the model's own (chat.ForModel).
	Chat *chat.Template
	// MaxWaiting bounds the choices accepted beyond what the engine runs at
	// once (its max_in_flight); more get 503. 0 = 256.
	MaxWaiting int
	// MaxBodyBytes bounds a request body; 0 = 8 MiB.
	MaxBodyBytes int64
	// BodyTimeout bounds the time to read a request body once its headers
	// are in (the headers have their own 30 s): a client that stalls gets
	// 408 and its connection back, instead of holding it and a file
	// descriptor for as long as it likes. 0 = 30 s.
	BodyTimeout time.Duration
	// MaxConns bounds the connections Serve holds open at once; one beyond
	// it is answered 503 and closed at once. 0 = 1024.
	MaxConns int
	// MaxN bounds n (choices per prompt) and the choices of one request;
	// 0 = 16.
	MaxN   int
	Logger zerolog.Logger
}

// Server serves one engine over HTTP.
type Server struct {
	o       Options
	eng     *sluice.Engine
	tok     tokenizer.Tokenizer
	chat    *jobs.ChatPrompt
	chatIDs []int32  // the template's end-of-turn token ids
	chatTxt []string // its end-of-turn markers the vocabulary lacks
	created int64
	m       *metrics
	mux     *http.ServeMux

	// speculative: the pipeline verifies drafts, which samples without
	// Request.OnLogits, so logprobs cannot be computed.
	speculative bool

	// maxPromptBytes is the longest text prompt that can fit the context:
	// context × tokenizer.MaxBytesPerToken (0: no such bound).
	maxPromptBytes int

	capacity int
	mu       sync.Mutex
	inflight int
	idle     chan struct{} // closed when inflight drops to 0 (made by waitIdle)
	draining atomic.Bool   // set under mu, so no choice is admitted after drain saw none
	index    atomic.Uint64 // request indices of unseeded choices

	// fault is the last memory fault a request met reading the model's
	// mapped weights, until a request completes again (see health).
	fault atomic.Pointer[faultReport]
}

// faultReport is what /health says about a memory fault.
type faultReport struct {
	err  string
	when time.Time
}

// New builds a server over o.Engine.
func New(o Options) (*Server, error) {
	if o.Engine == nil {
		return nil, errors.New("server: no engine")
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = 256
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 8 << 20
	}
	if o.MaxN <= 0 {
		o.MaxN = 16
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = 30 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 1024
	}
	l := o.Engine.Loaded()
	if o.Model == "" {
		o.Model = "sluice"
	}
	s := &Server{o: o, eng: o.Engine, tok: l.Tokenizer, created: time.Now().Unix()}
	var err error
	if s.chat, err = jobs.NewChatPrompt(o.Engine, o.Chat); err != nil {
		return nil, err
	}
	s.chatIDs, s.chatTxt = s.chat.Stops()
	s.capacity = o.Engine.Pipeline().Scheduler().MaxInFlight + o.MaxWaiting
	if b := tokenizer.MaxBytesPerToken(s.tok); b > 0 {
		s.maxPromptBytes = o.Engine.Context() * b
	}
	_, s.speculative = o.Engine.Pipeline().StageOfKind(pipelines.KindVerify)
	s.m = newMetrics(o.Engine, s)
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/v1/completions", s.route("completions", http.MethodPost, s.auth(s.completions)))
	s.mux.HandleFunc("/v1/chat/completions", s.route("chat", http.MethodPost, s.auth(s.chatCompletions)))
	s.mux.HandleFunc("/v1/models", s.route("models", http.MethodGet, s.auth(s.models)))
	s.mux.HandleFunc("/v1/models/{id}", s.route("models", http.MethodGet, s.auth(s.model)))
	s.mux.HandleFunc("/health", s.route("health", http.MethodGet, s.health))
	metricsHandler := promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{})
	s.mux.HandleFunc("/metrics", s.route("metrics", http.MethodGet, s.auth(metricsHandler.ServeHTTP)))
	s.mux.HandleFunc("/", s.route("other", "", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("Unknown path %s %s.", r.Method, r.URL.Path))
	}))
	return s, nil
}

// Template is the chat template the server renders chats with.
func (s *Server) Template() *chat.Template { return s.chat.Template() }

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// statusWriter records the status for the request counter.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(c int) {
	if w.code == 0 {
		w.code = c
	}
	w.ResponseWriter.WriteHeader(c)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// route checks the method, counts the request and turns a panic into a 500.
func (s *Server) route(name, method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.o.Logger.Error().Interface("panic", v).Str("path", r.URL.Path).Msg("handler panicked")
				if sw.code == 0 {
					writeError(sw, internalError(fmt.Errorf("internal error: %v", v)))
				}
			}
			s.m.requests.WithLabelValues(name, fmt.Sprint(sw.code)).Inc()
		}()
		if method != "" && r.Method != method {
			sw.Header().Set("Allow", method)
			writeError(sw, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
				Message: fmt.Sprintf("%s %s is not allowed: use %s.", r.Method, r.URL.Path, method)})
			return
		}
		h(sw, r)
	}
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.o.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.o.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, errBadKey)
			return
		}
		h(w, r)
	}
}

// health is {"status":"ok"}, or a 503: while shutting down, and after a
// request failed on a memory fault reading the model's mapped weights (the
// file was truncated or became unreadable under the mmap tier), with the
// fault and its time, until a later request completes, which shows the
// weights are readable again.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.draining.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"status":"shutting down"}`)
		return
	}
	if f := s.fault.Load(); f != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		json.NewEncoder(w).Encode(struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Since  string `json:"since"`
		}{"model_fault", f.err, f.when.UTC().Format(time.RFC3339Nano)})
		return
	}
	fmt.Fprintln(w, `{"status":"ok"}`)
}

// noteOutcome records whether a choice met a memory fault reading the
// model's mapped weights (for health), or completed (which clears one).
func (s *Server) noteOutcome(err error, completed bool) {
	var mf *offload.MapFault
	switch {
	case errors.As(err, &mf):
		s.fault.Store(&faultReport{err: mf.Error(), when: time.Now()})
		s.o.Logger.Error().Err(mf).Msg("memory fault reading the model: /health reports it until a request completes")
	case completed && s.fault.Load() != nil:
		s.fault.Store(nil)
	}
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.o.Model, Object: "model", Created: s.created, OwnedBy: "sluice"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", []modelObject{s.modelObject()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.o.Model {
		writeError(w, withCode(notFound("The model '%s' does not exist: this server serves '%s'.", id, s.o.Model), "model_not_found"))
		return
	}
	writeJSON(w, s.modelObject())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// admit reserves k choices, all or none.
func (s *Server) admit(k int) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining.Load() {
		return errShuttingDown
	}
	if s.inflight+k > s.capacity {
		return errOverloaded
	}
	s.inflight += k
	return nil
}

func (s *Server) release() {
	s.mu.Lock()
	s.inflight--
	if s.inflight == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
	s.mu.Unlock()
}

// drain stops admitting choices and waits until the admitted ones have
// ended or ctx is done: those still waiting for room in the engine's queue
// are in the engine only once they are submitted, so the engine must not be
// drained (which refuses submissions) before they are.
func (s *Server) drain(ctx context.Context) {
	s.mu.Lock()
	s.draining.Store(true)
	if s.inflight == 0 {
		s.mu.Unlock()
		return
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

func (s *Server) inFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

// Serve answers on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections and requests (new ones get 503), lets the requests
// it accepted finish for up to grace — those running and those still
// waiting for room in the engine's queue alike — cancels what is left (their
// streams end with finish_reason "cancelled"), and drains and closes the
// engine. It holds at most Options.MaxConns connections at once and closes
// keep-alive connections idle for two minutes.
func (s *Server) Serve(ctx context.Context, ln net.Listener, grace time.Duration) error {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(newLimitListener(ln, s.o.MaxConns, s.m.connsRefused)) }()
	select {
	case err := <-served:
		s.draining.Store(true)
		return errors.Join(err, s.eng.Close())
	case <-ctx.Done():
	}
	s.draining.Store(true)
	dctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	// The handlers end once their engine requests have; Shutdown waits for
	// them a little longer than the engine's grace, to write their last bytes.
	sctx, scancel := context.WithTimeout(context.Background(), grace+5*time.Second)
	defer scancel()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	s.drain(dctx)            // every accepted choice submitted and ended, or grace over
	err := s.eng.Drain(dctx) // after grace, the rest are cancelled
	if serr := <-shut; serr != nil {
		hs.Close()
	}
	if serr := <-served; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// newSeed is a random seed for a choice that came without one.
func newSeed() uint64 { return rand.Uint64() >> 1 }

// samplingDefaults is the pipeline's sampling, what an omitted parameter takes.
func (s *Server) samplingDefaults() sample.Options {
	return s.eng.Pipeline().SessionOptions().Sampling
}
