package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/sluicehq/sluice/eval"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tokenizer"
)

// evalReport is `sluice eval --json`. NaN cannot be JSON, so the reference
// fields are pointers left out when there is no reference.
type evalReport struct {
	Model         string   `json:"model"`
	Text          string   `json:"text"`
	Perplexity    float64  `json:"perplexity"`
	Tokens        int      `json:"tokens"`
	Windows       int      `json:"windows"`
	Context       int      `json:"ctx"`
	Ref           string   `json:"ref,omitempty"`
	RefPerplexity *float64 `json:"ref_perplexity,omitempty"`
	KLDivergence  *float64 `json:"kl_divergence,omitempty"`
	Top1Agreement *float64 `json:"top1_agreement,omitempty"`
}

func cmdEval(ctx context.Context, e *env, args []string) error {
	fs := e.flags("eval")
	modelPath := fs.String("m", "", "model file: .gguf, or a llama2.c .bin (then --tokenizer is needed)")
	tok := fs.String("tokenizer", "", "llama2.c tokenizer.bin for -m")
	text := fs.String("text", "", "text file to score")
	ref := fs.String("ref", "", "reference model: report KL(P_ref ‖ P_model) and top-1 agreement")
	refTok := fs.String("ref-tokenizer", "", "llama2.c tokenizer.bin for --ref (default: --tokenizer when --ref is not a .gguf)")
	window := fs.Int("ctx", 0, fmt.Sprintf("window length in tokens, BOS included (default: min(model context, %d))", eval.DefaultContext))
	asJSON := fs.Bool("json", false, "print one JSON object")
	tier := fs.String("tier", "", "where weights live: auto (default: ram when the file fits in half the available memory, else mmap), ram or mmap")
	threads := fs.Int("threads", 0, "kernel threads (default: all cores)")
	makeText := fs.Bool("make-text", false, "sample a fixed-seed corpus from -m into -o instead of scoring")
	out := fs.String("o", "", "with --make-text: the corpus file to write")
	nTokens := fs.Int("tokens", 4096, "with --make-text: tokens to sample in all")
	seed := fs.Uint64("seed", 1, "with --make-text: sampling seed")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("eval: unexpected argument %q: %w", pos[0], errUsage)
	}
	if *modelPath == "" {
		return fmt.Errorf("eval: no model: give -m MODEL: %w", errUsage)
	}
	load := func(path, tokPath string) (*model.Loaded, error) {
		p := &pipelines.Pipeline{Source: "<eval>", Model: pipelines.ModelSpec{Path: path, Tokenizer: tokPath, Tier: *tier, Threads: *threads}}
		return loadModel(ctx, e, p)
	}
	if *makeText {
		if *out == "" {
			return fmt.Errorf("eval --make-text: no output: give -o FILE: %w", errUsage)
		}
		if *nTokens <= 0 {
			return fmt.Errorf("eval --make-text: --tokens %d: want a positive count: %w", *nTokens, errUsage)
		}
		m, err := load(*modelPath, *tok)
		if err != nil {
			return err
		}
		defer m.Close()
		corpus, err := eval.SampleCorpus(ctx, m, eval.CorpusOptions{Tokens: *nTokens, Seed: *seed})
		if err != nil {
			return err
		}
		return os.WriteFile(*out, []byte(corpus), 0o644)
	}
	if *text == "" {
		return fmt.Errorf("eval: no text: give --text FILE: %w", errUsage)
	}
	data, err := os.ReadFile(*text)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	m, err := load(*modelPath, *tok)
	if err != nil {
		return err
	}
	defer m.Close()
	var r *model.Loaded
	if *ref != "" {
		rt := *refTok
		if rt == "" && !strings.HasSuffix(strings.ToLower(*ref), ".gguf") {
			// a llama2.c reference has no vocabulary of its own; a GGUF's
			// own must not be overridden, or two different vocabularies
			// would pass the same-vocabulary check.
			rt = *tok
		}
		if r, err = load(*ref, rt); err != nil {
			return err
		}
		defer r.Close()
	}
	ids := m.Tokenizer.Encode(string(data), tokenizer.EncodeOptions{})
	if len(ids) == 0 {
		return fmt.Errorf("eval: %s: no tokens to score", *text)
	}
	res, err := eval.Evaluate(ctx, m, r, ids, eval.Options{
		Context:  *window,
		Progress: func(done, total int) { e.log.Debug().Int("window", done).Int("of", total).Msg("eval") },
	})
	if err != nil {
		return err
	}
	rep := evalReport{
		Model: *modelPath, Text: *text, Perplexity: res.Perplexity(),
		Tokens: res.Tokens, Windows: res.Windows, Context: res.Context, Ref: *ref,
	}
	if r != nil {
		ppl, kl, top1 := res.RefPerplexity(), res.MeanKL(), res.Top1Agreement()
		rep.RefPerplexity, rep.KLDivergence, rep.Top1Agreement = &ppl, &kl, &top1
	}
	if *asJSON {
		for _, v := range []*float64{&rep.Perplexity, rep.RefPerplexity, rep.KLDivergence, rep.Top1Agreement} {
			if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0)) {
				return fmt.Errorf("eval: %s: a score is %v (the model's logits are broken), which JSON cannot hold", *modelPath, *v)
			}
		}
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(e.stdout, "model:          %s\ntext:           %s (%d tokens scored in %d windows of up to %d)\nperplexity:     %.4f\n",
		rep.Model, rep.Text, rep.Tokens, rep.Windows, rep.Context, rep.Perplexity)
	if r != nil {
		fmt.Fprintf(e.stdout, "ref:            %s\nref perplexity: %.4f\nmean KL:        %.6f nats (KL(P_ref ‖ P_model))\ntop-1 agree:    %.4f\n",
			rep.Ref, *rep.RefPerplexity, *rep.KLDivergence, *rep.Top1Agreement)
	}
	return nil
}
