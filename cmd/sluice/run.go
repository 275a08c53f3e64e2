package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"

	"github.com/schollz/progressbar/v3"
	"github.com/sluicehq/sluice/batch"
	"github.com/sluicehq/sluice/decode"
	"github.com/sluicehq/sluice/graph"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/stages"
)

// cmdRun runs every prompt of a file through a pipeline. Lines that cannot be
// parsed or run become error results; the batch goes on. OUT is appended to
// and already-finished custom_ids are skipped, so a killed run resumes.
func cmdRun(ctx context.Context, e *env, args []string) error {
	fs := e.flags("run")
	mf := addModelFlags(fs, "model")
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
	o := p.EngineOptions()

	var bar *progressbar.ProgressBar
	if e.stderrTTY {
		bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription("prompts"),
			progressbar.OptionShowCount(), progressbar.OptionClearOnFinish())
	}
	var nOK, nErr, nSkip atomic.Int64
	record := func(r batch.Result) error {
		if r.Error != "" {
			nErr.Add(1)
		} else {
			nOK.Add(1)
		}
		if bar != nil {
			bar.Add(1)
		}
		return w.Write(r)
	}
	reqs := func(ctx context.Context, emit graph.Emit[decode.Request]) error {
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
				if err := record(batch.Result{CustomID: r.CustomID, Error: r.Err.Error()}); err != nil {
					return err
				}
				continue
			}
			req := decode.Request{ID: r.CustomID, Index: uint64(r.Line), Prompt: r.Text(), MaxNewTokens: r.MaxTokens, Adapter: r.Adapter}
			if r.Temperature != nil || r.Seed != nil {
				so := o.Sampling
				if r.Temperature != nil {
					so.Temperature = float32(*r.Temperature)
				}
				if r.Seed != nil {
					so.Seed = *r.Seed
				}
				req.Sampling = &so
			}
			if err := emit(ctx, req); err != nil {
				return err
			}
		}
	}
	results := func(_ context.Context, r stages.Result) error {
		s := r.Seq
		res := batch.Result{CustomID: s.Req.ID, PromptTokens: s.NPrompt, CompletionTokens: s.Generated(), FinishReason: s.Finish}
		if s.Err != nil {
			res = batch.Result{CustomID: s.Req.ID, Error: s.Err.Error()}
		} else {
			res.Text = r.Completion
			if !s.FirstToken.IsZero() {
				res.PrefillMS = float64(s.FirstToken.Sub(s.Start).Microseconds()) / 1000
				res.DecodeMS = float64(s.End.Sub(s.FirstToken).Microseconds()) / 1000
			}
		}
		return record(res)
	}
	l, _, err := runPipeline(ctx, e, p, o, reqs, results, sets...)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	defer l.Close()
	e.log.Info().Int64("ok", nOK.Load()).Int64("errors", nErr.Load()).Int64("skipped", nSkip.Load()).Str("out", *out).Msg("batch done")
	fmt.Fprintf(e.stderr, "sluice run: %d done, %d errors, %d already in %s\n", nOK.Load(), nErr.Load(), nSkip.Load(), *out)
	return nil
}
