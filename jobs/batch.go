package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/sample"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

// Batch runs the lines of a batch file (package batch) through an engine:
// each line becomes an engine request as the server would make it from the
// same body (chat rendering through the model's template, sampling
// overrides, stop strings, best_of, a response_format or grammar), and each
// result the line the file's format wants (sluice's, or an OpenAI Batch
// output line with the server's response shapes). sluice run is a Batch
// behind flags, files and a progress bar.
type Batch struct {
	eng *sluice.Engine
	o   BatchOptions

	mu sync.Mutex
	cp *ChatPrompt // the chat rendering, made on the first chat line
}

// BatchOptions configure a Batch.
type BatchOptions struct {
	// Template renders chat lines; nil is the model's own.
	Template *chat.Template
	// StopTokens are end-of-sequence ids every line adds (--eos-id).
	StopTokens []int32
	// OpenAI writes OpenAI Batch output lines; else sluice's result lines.
	OpenAI bool
	// Model is the model name of OpenAI bodies whose line names none.
	Model string
}

// NewBatch runs lines on eng.
func NewBatch(eng *sluice.Engine, o BatchOptions) *Batch { return &Batch{eng: eng, o: o} }

// Request is line r's engine request and its stop strings. An error is the
// line's own (an invalid_request result line), naming the line.
func (b *Batch) Request(r batch.Request, where string) (sluice.Request, []string, error) {
	req := sluice.Request{ID: r.CustomID, Index: uint64(r.Line), MaxNewTokens: r.MaxTokens, Adapter: r.Adapter, BestOf: r.BestOf}
	at := func(err error) error { return fmt.Errorf("%s:%d: %w", where, r.Line, err) }
	stops := r.Stop
	if len(r.Messages) > 0 {
		cp, err := b.chat()
		if err != nil {
			return req, nil, at(err)
		}
		msgs := make([]chat.Message, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
		}
		if req.Tokens, err = cp.Tokens(msgs); err != nil {
			return req, nil, at(err)
		}
		ids, txt := cp.Stops()
		req.StopTokens, stops = ids, append(append([]string(nil), stops...), txt...)
	} else {
		req.Prompt = r.Prompt
	}
	req.StopTokens = append(append([]int32(nil), req.StopTokens...), b.o.StopTokens...)
	if r.Temperature != nil || r.Seed != nil || r.TopP != nil || r.TopK != nil || r.MinP != nil {
		o := b.eng.Pipeline().SessionOptions().Sampling
		if r.Temperature != nil {
			o.Temperature = float32(*r.Temperature)
		}
		if r.TopP != nil {
			o.TopP = float32(*r.TopP)
		}
		if r.TopK != nil {
			o.TopK = *r.TopK
		}
		if r.MinP != nil {
			o.MinP = float32(*r.MinP)
		}
		if r.Seed != nil {
			o.Seed = *r.Seed
		}
		if err := o.Validate(); err != nil {
			return req, nil, at(err)
		}
		req.Sampling = &sample.Options{}
		*req.Sampling = o
	}
	if len(r.Schema) > 0 || r.Grammar != "" {
		// Compiled once per distinct constraint by the engine's cache; one
		// it cannot enforce fails this line alone.
		sp := &grammar.Spec{Schema: r.Schema, GBNF: r.Grammar}
		if _, err := b.eng.Grammars().Matcher(*sp); err != nil {
			what := "response_format"
			if r.Grammar != "" {
				what = "grammar"
			}
			return req, nil, at(fmt.Errorf("%s: %w", what, err))
		}
		req.Grammar = sp
	}
	return req, stops, nil
}

// chat is the chat rendering, made once.
func (b *Batch) chat() (*ChatPrompt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cp == nil {
		cp, err := NewChatPrompt(b.eng, b.o.Template)
		if err != nil {
			return nil, err
		}
		b.cp = cp
	}
	return b.cp, nil
}

// Submit runs req; done gets its result (on the engine's result goroutine).
// With stop strings its text is watched as it streams (Stopper): the first
// one found ends the request at the next step and the result's completion
// is cut before it. A best_of request's text is cut once it is known, and
// its CompletionTokens count every candidate's tokens, as OpenAI's usage
// does.
func (b *Batch) Submit(ctx context.Context, req sluice.Request, stops []string, done func(sluice.Result)) error {
	if req.BestOf > 1 {
		tok := b.eng.Loaded().Tokenizer
		return b.eng.Submit(ctx, req, func(res sluice.Result) {
			if res.Err == nil {
				var cands [][]int32
				for _, h := range res.Beams {
					cands = append(cands, h.Tokens)
				}
				res.CompletionTokens = session.CandidateTokens(tok, cands, req.StopTokens)
				if len(stops) > 0 {
					if text, hit := NewStopper(stops).Push(res.Completion); hit {
						res.Completion, res.Finish = text, sluice.FinishStop
					}
				}
			}
			done(res)
		})
	}
	if len(stops) == 0 {
		return b.eng.Submit(ctx, req, done)
	}
	rctx, cancel := context.WithCancel(ctx)
	st := NewStopper(stops)
	var mu sync.Mutex // OnToken and done run on different stage goroutines
	var text strings.Builder
	hit := false
	req.OnToken = func(_ int32, t string) {
		mu.Lock()
		defer mu.Unlock()
		if hit {
			return
		}
		emit, found := st.Push(t)
		text.WriteString(emit)
		if found {
			hit = true
			cancel()
		}
	}
	err := b.eng.Submit(rctx, req, func(res sluice.Result) {
		defer cancel()
		mu.Lock()
		if hit {
			res.Completion, res.Finish, res.Err = text.String(), sluice.FinishStop, nil
		}
		mu.Unlock()
		done(res)
	})
	if err != nil {
		cancel()
	}
	return err
}

// Line is the output line of line r's result and whether it is an error
// line; ok is false for a result that is no line (cancelled: the run was
// interrupted, and a rerun does the line).
func (b *Batch) Line(r batch.Request, res sluice.Result) (line any, isErr, ok bool) {
	switch {
	case res.Finish == sluice.FinishCancelled:
		return nil, false, false
	case res.Err != nil:
		code := batch.CodeServerError
		switch {
		case errors.Is(res.Err, session.ErrPromptTooLong):
			code = batch.CodeContextLength
		case res.Finish == sluice.FinishTimeout:
			code = batch.CodeTimeout
		}
		return b.ErrorLine(r, code, res.Err.Error()), true, true
	}
	if !b.o.OpenAI {
		out := batch.Result{CustomID: r.CustomID, Text: res.Completion, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, CachedTokens: res.CachedTokens, FinishReason: res.Finish}
		if !res.FirstToken.IsZero() {
			out.PrefillMS = float64(res.FirstToken.Sub(res.Start).Microseconds()) / 1000
			out.DecodeMS = float64(res.End.Sub(res.FirstToken).Microseconds()) / 1000
		}
		return out, false, true
	}
	model := r.Model
	if model == "" {
		model = b.o.Model
	}
	u := NewUsage(res.PromptTokens, res.CompletionTokens, res.CachedTokens)
	finish := res.Finish
	created := res.End.Unix()
	var body any
	if len(r.Messages) > 0 {
		text := res.Completion
		body = ChatResponse{
			ID: batch.NewID("chatcmpl-"), Object: "chat.completion", Created: created, Model: model, Usage: u,
			Choices: []ChatChoice{{Index: 0, Message: &ChatMessageOut{Role: "assistant", Content: &text}, FinishReason: &finish}},
		}
	} else {
		body = CompletionResponse{
			ID: batch.NewID("cmpl-"), Object: "text_completion", Created: created, Model: model, Usage: u,
			Choices: []CompletionChoice{{Text: res.Completion, Index: 0, FinishReason: &finish}},
		}
	}
	return batch.OpenAIResult{
		ID: batch.NewID("batch_req_"), CustomID: r.CustomID,
		Response: &batch.OpenAIResponse{StatusCode: 200, RequestID: batch.NewID("req_"), Body: body},
	}, false, true
}

// ErrorLine is line r's error line.
func (b *Batch) ErrorLine(r batch.Request, code, msg string) any {
	if b.o.OpenAI {
		return batch.OpenAIResult{ID: batch.NewID("batch_req_"), CustomID: r.CustomID, Error: &batch.OpenAIError{Code: code, Message: msg}}
	}
	return batch.Result{CustomID: r.CustomID, Error: msg}
}
