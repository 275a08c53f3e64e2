package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"

	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/tensor"
)

// sharedLlama2Tokenizer is where gen-model looks for Llama 2's tokenizer when
// --tokenizer is auto: the test models sit beside the clone.
var sharedLlama2Tokenizer = filepath.Join("..", "shared", "models", "llama2-tokenizer", "tokenizer.bin")

// llama2Vocab is the vocabulary size for which the auto tokenizer applies.
const llama2Vocab = 32000

func cmdGenModel(ctx context.Context, e *env, args []string) error {
	fs := e.flags("gen-model")
	names := make([]string, 0, len(synth.Presets()))
	for _, p := range synth.Presets() {
		names = append(names, p.Name)
	}
	presetName := fs.String("preset", "tiny", "model shape: "+strings.Join(names, ", "))
	archNames := make([]string, 0, len(synth.Archs()))
	for _, a := range synth.Archs() {
		archNames = append(archNames, a.Name)
	}
	archName := fs.String("arch", "llama", "architecture: "+strings.Join(archNames, ", "))
	headDim := fs.Int("head-dim", 0, "attention head size (attention.key_length); 0: width/heads")
	dtypeName := fs.String("dtype", "f32", "matrix type: f32, f16, bf16, q8_0 or q4_0 (norms stay f32)")
	seed := fs.Uint64("seed", 0, "random seed; the same seed, preset and dtype give the same file")
	std := fs.Float64("std", 0, fmt.Sprintf("standard deviation of the weights; 0: the architecture's (llama: %g, others: 0.2)", synth.DefaultStd))
	embedStd := fs.Float64("embed-std", 0, fmt.Sprintf("standard deviation of the token embedding; 0: the architecture's (llama: %g, others: 0.2)", float64(synth.DefaultEmbedStd)))
	tok := fs.String("tokenizer", "auto", "llama2.c tokenizer.bin for the vocabulary; auto: "+sharedLlama2Tokenizer+" when it exists and the preset has 32000 tokens; none: the generated vocabulary")
	threads := fs.Int("threads", 0, "goroutines generating weights (0: all cores); the output does not depend on it")
	out := fs.String("o", "", "output GGUF file (required)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("gen-model: unexpected arguments %q: %w", pos, errUsage)
	}
	if *out == "" {
		return fmt.Errorf("gen-model: -o FILE is required: %w", errUsage)
	}
	p, err := synth.LookupPreset(*presetName)
	if err != nil {
		return err
	}
	if _, err := synth.LookupArch(*archName); err != nil {
		return fmt.Errorf("gen-model: --arch: %w", err)
	}
	dt, err := tensor.ParseDType(*dtypeName)
	if err != nil {
		return fmt.Errorf("gen-model: --dtype: %w", err)
	}
	if *std < 0 || *embedStd < 0 {
		return fmt.Errorf("gen-model: --std %v, --embed-std %v: want both ≥ 0 (0: the architecture's default): %w", *std, *embedStd, errUsage)
	}
	o := synth.Options{Preset: p, Arch: *archName, HeadDim: *headDim, DType: dt, Seed: *seed, Std: float32(*std), EmbedStd: float32(*embedStd), Workers: *threads}
	switch *tok {
	case "none":
	case "auto":
		if p.Vocab == llama2Vocab {
			if _, err := os.Stat(sharedLlama2Tokenizer); err == nil {
				o.TokenizerPath = sharedLlama2Tokenizer
			}
		}
	default:
		o.TokenizerPath = *tok
	}

	weights, err := o.Weights()
	if err != nil {
		return err
	}
	log := zerolog.Ctx(ctx)
	vocab := "generated"
	if o.TokenizerPath != "" {
		vocab = o.TokenizerPath
	}
	log.Info().Str("arch", *archName).Str("preset", p.Name).Stringer("dtype", dt).Uint64("seed", *seed).Str("vocab", vocab).
		Int64("weights", weights).Msg("gen-model")
	var bar *progressbar.ProgressBar
	if e.stderrTTY {
		o.Progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(e.stderr), progressbar.OptionShowBytes(true),
					progressbar.OptionSetDescription("writing "+*out), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			bar.Set64(done)
		}
	}
	start := time.Now()
	err = synth.WriteFileContext(ctx, *out, o) // Ctrl-C cancels ctx: the partial file is removed
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	fmt.Fprintf(e.stdout, "wrote %s: preset %s, %s, %d weights, %d bytes, %s vocabulary, seed %d, arch %s, %.2fs\n",
		*out, p.Name, dt, weights, st.Size(), vocab, *seed, *archName, elapsed.Seconds())
	log.Info().Str("file", *out).Int64("bytes", st.Size()).Dur("elapsed", elapsed).Msg("gen-model done")
	return nil
}
