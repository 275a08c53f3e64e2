package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/schollz/progressbar/v3"
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/pipelines"
)

// cmdRun runs every prompt of a file through a pipeline. Lines that cannot be
// parsed or run become error results; the batch goes on. OUT is appended to
// and already-finished custom_ids are skipped, so a killed run resumes.
func cmdRun(ctx context.Context, e *env, args []string) error {
	fs := e.flags("run")
	mf := addModelFlags(fs, "model")
	sf := addSpecFlags(fs)
	in := fs.String("prompts", "", "prompt file: JSONL, OpenAI Batch JSONL, or plain text (one prompt a line)")
	out := fs.String("out", "", "results file (JSONL, appended; finished custom_ids are skipped)")
	format := fs.String("format", "auto", "prompt file format: auto, jsonl, openai, text")
	lf := addLoraFlags(fs, `each under its directory's base name; a line picks one with "adapter": "NAME"`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	sets, err := eachSet(lf.specs())
	if err != nil {
		return err
	}
	path, err := oneArg(pos, "PIPELINE")
	if err != nil {
		return err
	}
	if *in == "" || *out == "" {
		return fmt.Errorf("run: --prompts and --out are required: %w", errUsage)
	}
	f, err := batch.ParseFormat(*format)
	if err != nil {
		return err
	}
	p, err := pipelines.Load(path)
	if err != nil {
		return err
	}
	mf.apply(p)
	if err := sf.apply(p); err != nil {
		return err
	}
	seedPipeline(e, p)
	src, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer src.Close()
	done, dst, err := batch.Resume(*out)
	if err != nil {
		return err
	}
	defer dst.Close()
	w := batch.NewWriter(dst)
	so := p.SessionOptions().Sampling

	var bar *progressbar.ProgressBar
	if e.stderrTTY {
		bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("prompts"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	var nOK, nErr, nSkip atomic.Int64
	var mu sync.Mutex // results come from the engine's goroutine and from bad lines here
	var writeErr error
	record := func(r batch.Result) {
		mu.Lock()
		defer mu.Unlock()
		if r.Error != "" {
			nErr.Add(1)
		} else {
			nOK.Add(1)
		}
		if bar != nil {
			bar.Add(1)
		}
		if err := w.Write(r); err != nil && writeErr == nil {
			writeErr = err
		}
	}
	done2 := func(res sluice.Result) {
		if res.Finish == sluice.FinishCancelled {
			return // not a result: the run was interrupted, a rerun does this line
		}
		r := batch.Result{CustomID: res.ID, PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, FinishReason: res.Finish}
		if res.Err != nil {
			r = batch.Result{CustomID: res.ID, Error: res.Err.Error()}
		} else {
			r.Text = res.Completion
			if !res.FirstToken.IsZero() {
				r.PrefillMS = float64(res.FirstToken.Sub(res.Start).Microseconds()) / 1000
				r.DecodeMS = float64(res.End.Sub(res.FirstToken).Microseconds()) / 1000
			}
		}
		record(r)
	}
	eng, err := openEngine(ctx, e, p, sets...)
	if err != nil {
		return err
	}
	submitErr := func() error {
		rd := batch.NewReader(src, *in, f)
		for {
			r, err := rd.Next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			if done[r.CustomID] {
				nSkip.Add(1)
				continue
			}
			if r.Err != nil {
				record(batch.Result{CustomID: r.CustomID, Error: r.Err.Error()})
				continue
			}
			req := sluice.Request{ID: r.CustomID, Index: uint64(r.Line), Prompt: r.Text(), MaxNewTokens: r.MaxTokens, Adapter: r.Adapter}
			if r.Temperature != nil || r.Seed != nil {
				o := so
				if r.Temperature != nil {
					o.Temperature = float32(*r.Temperature)
				}
				if r.Seed != nil {
					o.Seed = *r.Seed
				}
				req.Sampling = &o
			}
			if err := eng.Submit(ctx, req, done2); err != nil {
				return err
			}
		}
	}()
	if submitErr == nil {
		submitErr = eng.Drain(ctx)
	}
	err = errors.Join(submitErr, closeEngine(e, eng), writeErr)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	e.log.Info().Int64("ok", nOK.Load()).Int64("errors", nErr.Load()).Int64("skipped", nSkip.Load()).Str("out", *out).Msg("batch done")
	fmt.Fprintf(e.stderr, "sluice run: %d done, %d errors, %d already in %s\n", nOK.Load(), nErr.Load(), nSkip.Load(), *out)
	return nil
}
