package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/grammar"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/server"
	"github.com/sluicehq/sluice/session"
	"github.com/sluicehq/sluice/tokenizer/chat"
)

const runUsage = "run [PIPELINE|PRESET] --prompts IN|- --out OUT|- [-m MODEL] [--tokenizer T] [-n N] [--temp T] [--seed S] [--format auto|jsonl|openai|text] [--out-format auto|sluice|openai] [--retry-errors] [--lora DIR[:scale]]..."

// progressEvery is how often a run without a terminal logs its progress.
var progressEvery = 5 * time.Second

// cmdRun runs every prompt of a file through a pipeline. Lines that cannot be
// parsed or run become error results; the batch goes on, and exits non-zero
// with their count. OUT is appended to, locked while the run writes it, and
// already-finished custom_ids are skipped, so a killed run resumes.
func cmdRun(ctx context.Context, e *env, args []string) error {
	fs := e.flags("run")
	mf := addModelFlags(fs, "model")
	fs.StringVar(mf.model, "m", "", "model file (same as --model)")
	sf := addSpecFlags(fs)
	eos := addEOSFlag(fs)
	in := fs.String("prompts", "", "prompt file: JSONL, OpenAI Batch JSONL, or plain text (one prompt a line); - is standard input")
	out := fs.String("out", "", "results file (JSONL, appended; finished custom_ids are skipped); - is standard output (no resume)")
	format := fs.String("format", "auto", "prompt file format: auto, jsonl, openai, text")
	outFormat := fs.String("out-format", "auto", "results format: sluice ({custom_id, text, ...}), openai (OpenAI Batch output lines), auto (openai when the prompts are an OpenAI Batch file)")
	n := fs.Int("n", 0, "new tokens per line that gives no max_tokens (default: the pipeline's max_new_tokens)")
	temp := fs.Float64("temp", 0, "temperature of lines that give none; 0 is greedy (default: the pipeline's; without PIPELINE, picks the sample preset when > 0)")
	seed := fs.Uint64("seed", 0, "sampling seed of lines that give none (default: the pipeline's, else random: give one so a resumed sampled run is repeatable)")
	tmplName := fs.String("chat-template", "", "chat lines: "+strings.Join(chat.Builtins(), ", ")+" or a Jinja file (default: the model's own)")
	retry := fs.Bool("retry-errors", false, "run the lines that have an error result in OUT again (their error lines are removed first)")
	lf := addLoraFlags(fs, `each under its directory's base name; a line picks one with "adapter": "NAME"`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	set := setFlags(fs)
	for _, c := range []struct {
		name string
		v    int
	}{{"n", *n}, {"threads", *mf.threads}, {"ctx", *mf.ctx}, {"page-tokens", *mf.pageTk}} {
		if c.v < 0 {
			return fmt.Errorf("run: -%s is %d: it must be ≥ 0: %w", c.name, c.v, errUsage)
		}
	}
	if *temp < 0 {
		return fmt.Errorf("run: --temp is %g: it must be ≥ 0 (0 is greedy): %w", *temp, errUsage)
	}
	sets, err := eachSet(lf.specs())
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("run: want at most one PIPELINE (a file or a preset: %s), got %q: %w", strings.Join(pipelines.Presets(), ", "), pos, errUsage)
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("run: --prompts and --out are required: %w", errUsage)
	}
	f, err := batch.ParseFormat(*format)
	if err != nil {
		return err
	}
	if *outFormat != "auto" && *outFormat != "sluice" && *outFormat != "openai" {
		return fmt.Errorf("run: --out-format %q: want auto, sluice or openai: %w", *outFormat, errUsage)
	}
	p, err := runPipeline(pos, *temp > 0)
	if err != nil {
		return err
	}
	mf.apply(p)
	if err := sf.noBeams("run"); err != nil {
		return err
	}
	if err := sf.apply(p); err != nil {
		return err
	}
	if s, ok := p.StageOfKind(pipelines.KindScheduler); ok && set["n"] {
		s.Params.(*pipelines.SchedulerParams).MaxNewTokens = *n
	}
	if set["temp"] || set["seed"] {
		s, ok := p.StageOfKind(pipelines.KindSample)
		if !ok {
			return fmt.Errorf("run: --temp and --seed need a sample stage, and %s has none", p.Source)
		}
		ps := s.Params.(*pipelines.SampleParams)
		if set["temp"] {
			ps.Temperature = *temp
		}
		if set["seed"] {
			ps.Seed = seed
		}
	}
	seedPipeline(e, p)

	// The prompts: a file, or standard input spooled to one (it is read
	// twice: once to check the ids and count the lines, once to run them).
	name, prefix := *in, filepath.Base(*in)+":"
	if *in == "-" {
		tmp, err := spool(e.stdin)
		if err != nil {
			return err
		}
		defer os.Remove(tmp)
		*in, name, prefix = tmp, "stdin", "stdin:"
	}
	if *out != "-" && sameFile(*in, *out) {
		return fmt.Errorf("run: --out %s is the prompts file: results are appended to OUT, so it must be another file: %w", *out, errUsage)
	}

	// Every line is read once before anything runs: repeated custom_ids
	// refuse the batch, and the count drives the progress.
	src, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer src.Close()
	check, err := batch.Precheck(src, name, f, prefix, nil)
	if err != nil {
		return err
	}
	// The results: locked, resumed.
	done := map[string]bool{}
	var dst io.Writer = e.stdout
	earlier := 0 // error lines already in OUT, counted as done
	if *out != "-" {
		res, err := batch.OpenResults(*out, batch.ResumeOptions{RetryErrors: *retry})
		if err != nil {
			return err
		}
		defer res.Close()
		done, dst, earlier = res.Done, res.File, res.Errors
		if res.Retried > 0 {
			e.log.Info().Int("lines", res.Retried).Msg("--retry-errors: error lines removed, running them again")
		}
	}
	if len(done) > 0 {
		if _, err := src.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if check, err = batch.Precheck(src, name, f, prefix, done); err != nil {
			return err
		}
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return err
	}
	openaiOut := *outFormat == "openai" || *outFormat == "auto" && check.Format == batch.OpenAIBatch

	eng, err := openEngine(ctx, e, p, sets...)
	if err != nil {
		return err
	}
	if err := eos.check(eng.Loaded().Model.Arch().Vocab); err != nil {
		closeEngine(e, eng)
		return err
	}
	modelName := strings.TrimSuffix(filepath.Base(p.Model.Path), filepath.Ext(p.Model.Path))
	rn := &batchRun{
		e: e, w: batch.NewWriter(dst), openai: openaiOut, model: modelName,
		todo: check.Todo, start: time.Now(),
	}
	rn.progress(e)
	so := p.SessionOptions().Sampling
	var cp *server.ChatPrompt // the chat rendering, on the first chat line
	submitErr := func() error {
		rd := batch.NewReader(src, name, f)
		rd.SetIDPrefix(prefix)
		for {
			r, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if done[r.CustomID] {
				rn.skipped++
				continue
			}
			if r.Err != nil {
				rn.fail(r, batch.CodeInvalidRequest, r.Err.Error())
				continue
			}
			req := sluice.Request{ID: r.CustomID, Index: uint64(r.Line), MaxNewTokens: r.MaxTokens, Adapter: r.Adapter, BestOf: r.BestOf}
			stops := r.Stop
			if len(r.Messages) > 0 {
				if cp == nil {
					var tmpl *chat.Template
					if *tmplName != "" {
						if tmpl, err = chat.Load(*tmplName); err != nil {
							return err
						}
					}
					if cp, err = server.NewChatPrompt(eng, tmpl); err != nil {
						return err
					}
				}
				msgs := make([]chat.Message, len(r.Messages))
				for i, m := range r.Messages {
					msgs[i] = chat.Message{Role: m.Role, Content: m.Content}
				}
				if req.Tokens, err = cp.Tokens(msgs); err != nil {
					rn.fail(r, batch.CodeInvalidRequest, fmt.Sprintf("%s:%d: %v", name, r.Line, err))
					continue
				}
				ids, txt := cp.Stops()
				req.StopTokens, stops = ids, append(append([]string(nil), stops...), txt...)
			} else {
				req.Prompt = r.Prompt
			}
			req.StopTokens = eos.stops(req.StopTokens)
			if r.Temperature != nil || r.Seed != nil || r.TopP != nil || r.TopK != nil || r.MinP != nil {
				o := so
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
					rn.fail(r, batch.CodeInvalidRequest, fmt.Sprintf("%s:%d: %v", name, r.Line, err))
					continue
				}
				req.Sampling = &o
			}
			if len(r.Schema) > 0 || r.Grammar != "" {
				// Compiled once per distinct constraint by the engine's
				// cache; one it cannot enforce fails this line alone.
				sp := &grammar.Spec{Schema: r.Schema, GBNF: r.Grammar}
				if _, err := eng.Grammars().Matcher(*sp); err != nil {
					what := "response_format"
					if r.Grammar != "" {
						what = "grammar"
					}
					rn.fail(r, batch.CodeInvalidRequest, fmt.Sprintf("%s:%d: %s: %v", name, r.Line, what, err))
					continue
				}
				req.Grammar = sp
			}
			if err := rn.submit(ctx, eng, r, req, stops); err != nil {
				return err
			}
		}
	}()
	if submitErr == nil {
		submitErr = eng.Drain(ctx)
	}
	err = errors.Join(submitErr, closeEngine(e, eng), rn.writeErr)
	rn.stopProgress()
	if err != nil {
		return err
	}
	where := *out
	if where == "-" {
		where = "standard output"
	}
	e.log.Info().Int("ok", rn.ok).Int("errors", rn.errs).Int("skipped", rn.skipped).Str("out", where).Msg("batch done")
	fmt.Fprintf(e.stderr, "sluice run: %d done, %d errors, %d already in %s\n", rn.ok, rn.errs, rn.skipped, where)
	if failed := rn.errs + earlier; failed > 0 {
		return fmt.Errorf("run: %d line(s) failed (%d in this run, %d in an earlier one): see their error results in %s; --retry-errors runs them again", failed, rn.errs, earlier, where)
	}
	return nil
}

// runPipeline is the PIPELINE argument: a pipeline file, else a preset name;
// none is the greedy preset, or the sample preset when sampled is set.
func runPipeline(pos []string, sampled bool) (*pipelines.Pipeline, error) {
	if len(pos) == 0 {
		if sampled {
			return pipelines.Preset("sample")
		}
		return pipelines.Preset("greedy")
	}
	if _, err := os.Stat(pos[0]); err == nil || strings.ContainsAny(pos[0], `/\.`) {
		return pipelines.Load(pos[0])
	}
	p, err := pipelines.Preset(pos[0])
	if errors.Is(err, pipelines.ErrUnknownPreset) {
		return nil, fmt.Errorf("run: %q is neither a pipeline file nor a preset (%s)", pos[0], strings.Join(pipelines.Presets(), ", "))
	}
	return p, err
}

// spool copies r into a temporary file and returns its name.
func spool(r io.Reader) (string, error) {
	f, err := os.CreateTemp("", "sluice-prompts-*")
	if err != nil {
		return "", err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("run: read standard input: %w", err)
	}
	return f.Name(), nil
}

// sameFile reports whether two paths name one file (or, for a file not yet
// created, the same path).
func sameFile(a, b string) bool {
	ai, err1 := os.Stat(a)
	bi, err2 := os.Stat(b)
	if err1 == nil && err2 == nil {
		return os.SameFile(ai, bi)
	}
	aa, err1 := filepath.Abs(a)
	ba, err2 := filepath.Abs(b)
	return err1 == nil && err2 == nil && aa == ba
}

// batchRun is one run's results: the writer, the counts and the progress.
type batchRun struct {
	e      *env
	w      *batch.Writer
	openai bool
	model  string
	todo   int
	start  time.Time

	mu           sync.Mutex // results come from the engine's goroutine and from bad lines
	ok, errs     int
	skipped      int // only touched by the submitting goroutine
	tokens       int64
	writeErr     error
	bar          *progressbar.ProgressBar
	stop         chan struct{}
	stopped      sync.WaitGroup
	lastDescribe time.Time
}

// submit runs one line. With stop strings its text is watched as it streams
// (server.Stopper): the first one found ends the request at the next step.
func (rn *batchRun) submit(ctx context.Context, eng *sluice.Engine, r batch.Request, req sluice.Request, stops []string) error {
	if req.BestOf > 1 {
		// No token streams while the candidates run: the best one's text is
		// cut at the first stop string once it is known, and usage counts
		// every candidate's tokens, as OpenAI's best_of does.
		tok := eng.Loaded().Tokenizer
		return eng.Submit(ctx, req, func(res sluice.Result) {
			if res.Err == nil {
				var cands [][]int32
				for _, h := range res.Beams {
					cands = append(cands, h.Tokens)
				}
				res.CompletionTokens = session.CandidateTokens(tok, cands, req.StopTokens)
				if len(stops) > 0 {
					st := server.NewStopper(stops)
					text, hit := st.Push(res.Completion)
					if hit {
						res.Completion, res.Finish = text, sluice.FinishStop
					}
				}
			}
			rn.result(r, res)
		})
	}
	if len(stops) == 0 {
		return eng.Submit(ctx, req, func(res sluice.Result) { rn.result(r, res) })
	}
	rctx, cancel := context.WithCancel(ctx)
	st := server.NewStopper(stops)
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
	err := eng.Submit(rctx, req, func(res sluice.Result) {
		defer cancel()
		mu.Lock()
		if hit {
			res.Completion, res.Finish, res.Err = text.String(), sluice.FinishStop, nil
		}
		mu.Unlock()
		rn.result(r, res)
	})
	if err != nil {
		cancel()
	}
	return err
}

// result writes a finished request's line.
func (rn *batchRun) result(r batch.Request, res sluice.Result) {
	switch {
	case res.Finish == sluice.FinishCancelled:
		return // not a result: the run was interrupted, a rerun does this line
	case res.Err != nil:
		code := batch.CodeServerError
		switch {
		case errors.Is(res.Err, session.ErrPromptTooLong):
			code = batch.CodeContextLength
		case res.Finish == sluice.FinishTimeout:
			code = batch.CodeTimeout
		}
		rn.fail(r, code, res.Err.Error())
		return
	}
	if !rn.openai {
		out := batch.Result{CustomID: r.CustomID, Text: res.Completion, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, CachedTokens: res.CachedTokens, FinishReason: res.Finish}
		if !res.FirstToken.IsZero() {
			out.PrefillMS = float64(res.FirstToken.Sub(res.Start).Microseconds()) / 1000
			out.DecodeMS = float64(res.End.Sub(res.FirstToken).Microseconds()) / 1000
		}
		rn.record(r.CustomID, out, false, res.CompletionTokens)
		return
	}
	model := r.Model
	if model == "" {
		model = rn.model
	}
	u := server.NewUsage(res.PromptTokens, res.CompletionTokens, res.CachedTokens)
	finish := res.Finish
	created := res.End.Unix()
	var body any
	if len(r.Messages) > 0 {
		text := res.Completion
		body = server.ChatResponse{
			ID: batch.NewID("chatcmpl-"), Object: "chat.completion", Created: created, Model: model, Usage: u,
			Choices: []server.ChatChoice{{Index: 0, Message: &server.ChatMessageOut{Role: "assistant", Content: &text}, FinishReason: &finish}},
		}
	} else {
		body = server.CompletionResponse{
			ID: batch.NewID("cmpl-"), Object: "text_completion", Created: created, Model: model, Usage: u,
			Choices: []server.CompletionChoice{{Text: res.Completion, Index: 0, FinishReason: &finish}},
		}
	}
	line := batch.OpenAIResult{
		ID: batch.NewID("batch_req_"), CustomID: r.CustomID,
		Response: &batch.OpenAIResponse{StatusCode: 200, RequestID: batch.NewID("req_"), Body: body},
	}
	rn.record(r.CustomID, line, false, res.CompletionTokens)
}

// fail writes an error line.
func (rn *batchRun) fail(r batch.Request, code, msg string) {
	if rn.openai {
		rn.record(r.CustomID, batch.OpenAIResult{ID: batch.NewID("batch_req_"), CustomID: r.CustomID, Error: &batch.OpenAIError{Code: code, Message: msg}}, true, 0)
		return
	}
	rn.record(r.CustomID, batch.Result{CustomID: r.CustomID, Error: msg}, true, 0)
}

func (rn *batchRun) record(id string, line any, isErr bool, tokens int) {
	var err error
	if r, ok := line.(batch.Result); ok {
		err = rn.w.Write(r)
	} else {
		err = rn.w.WriteLine(id, line)
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if isErr {
		rn.errs++
	} else {
		rn.ok++
	}
	rn.tokens += int64(tokens)
	if err != nil && rn.writeErr == nil {
		rn.writeErr = err
	}
	if rn.bar != nil {
		if now := time.Now(); now.Sub(rn.lastDescribe) > 250*time.Millisecond {
			rn.lastDescribe = now
			rn.bar.Describe(fmt.Sprintf("%.1f tok/s", rn.rateLocked()))
		}
		rn.bar.Add(1)
	}
}

func (rn *batchRun) rateLocked() float64 {
	s := time.Since(rn.start).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(rn.tokens) / s
}

// progress draws a bar (lines, tokens/s, ETA) on a terminal, and otherwise
// writes a line every progressEvery.
func (rn *batchRun) progress(e *env) {
	if rn.todo == 0 {
		return
	}
	if e.stderrTTY {
		rn.bar = progressbar.NewOptions(rn.todo, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("starting"),
			progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		return
	}
	rn.stop = make(chan struct{})
	rn.stopped.Add(1)
	go func() {
		defer rn.stopped.Done()
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			select {
			case <-rn.stop:
				return
			case <-t.C:
				rn.mu.Lock()
				n, rate := rn.ok+rn.errs, rn.rateLocked()
				rn.mu.Unlock()
				eta := "unknown"
				if el := time.Since(rn.start); n > 0 {
					eta = (time.Duration(float64(el) / float64(n) * float64(rn.todo-n))).Round(time.Second).String()
				}
				fmt.Fprintf(e.stderr, "sluice run: %d/%d lines, %.1f tok/s, ETA %s\n", n, rn.todo, rate, eta)
			}
		}
	}()
}

func (rn *batchRun) stopProgress() {
	if rn.bar != nil {
		rn.bar.Finish()
	}
	if rn.stop != nil {
		close(rn.stop)
		rn.stopped.Wait()
	}
}
