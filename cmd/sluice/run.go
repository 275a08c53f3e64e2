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
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/pipelines"
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
	rn := &batchRun{e: e, w: batch.NewWriter(dst), todo: check.Todo, start: time.Now()}
	rn.progress(e)
	var tmpl *chat.Template // nil: the model's own
	if *tmplName != "" {
		if tmpl, err = chat.Load(*tmplName); err != nil {
			closeEngine(e, eng)
			return err
		}
	}
	rn.b = jobs.NewBatch(eng, jobs.BatchOptions{Template: tmpl, StopTokens: *eos, OpenAI: openaiOut, Model: modelName})
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
			req, stops, err := rn.b.Request(r, name)
			if err != nil {
				rn.fail(r, batch.CodeInvalidRequest, err.Error())
				continue
			}
			if err := rn.b.Submit(ctx, req, stops, func(res sluice.Result) { rn.result(r, res) }); err != nil {
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
	e     *env
	b     *jobs.Batch // the lines' requests and result lines
	w     *batch.Writer
	todo  int
	start time.Time

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

// result writes a finished request's line (none for a cancelled one: the
// run was interrupted, and a rerun does the line).
func (rn *batchRun) result(r batch.Request, res sluice.Result) {
	if line, isErr, ok := rn.b.Line(r, res); ok {
		rn.record(r.CustomID, line, isErr, res.CompletionTokens)
	}
}

// fail writes an error line.
func (rn *batchRun) fail(r batch.Request, code, msg string) {
	rn.record(r.CustomID, rn.b.ErrorLine(r, code, msg), true, 0)
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
