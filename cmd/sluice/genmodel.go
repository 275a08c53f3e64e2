package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"

	"github.com/sluicehq/sluice/convert"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/modelfile"
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
	layers := fs.Int("layers", 0, "number of layers (block_count); 0: the preset's (gemma3 needs 6 for one global layer)")
	dtypeName := fs.String("dtype", "f32", "matrix type: f32, f16, bf16, q8_0 or q4_0 (norms stay f32)")
	seed := fs.Uint64("seed", 0, "random seed; the same seed, preset and dtype give the same file")
	std := fs.Float64("std", 0, fmt.Sprintf("standard deviation of the weights; 0: the architecture's (llama: %g, others: 0.2)", synth.DefaultStd))
	embedStd := fs.Float64("embed-std", 0, fmt.Sprintf("standard deviation of the token embedding; 0: the architecture's (llama: %g, gemma2/gemma3: 0.02, others: 0.2)", float64(synth.DefaultEmbedStd)))
	window := fs.Int("window", 0, "gemma2, gemma3: attention.sliding_window of the local layers; 0: the architecture's (4096, 1024)")
	attnCap := fs.Float64("attn-softcap", 0, "gemma2: attn_logit_softcapping; 0: the architecture's (50)")
	tok := fs.String("tokenizer", "auto", "llama2.c tokenizer.bin for the vocabulary; auto: "+sharedLlama2Tokenizer+" when it exists and the preset has 32000 tokens; none: the generated vocabulary")
	threads := fs.Int("threads", 0, "goroutines generating weights (0: all cores); the output does not depend on it")
	out := fs.String("o", "", "output GGUF file (required)")
	widen := fs.Int("widen-ffn", 0, "instead of a random model: copy --from with its feed-forward width raised to `N` hidden units that compute exact zeros (same function, every byte read per token); the FFN matrices become f32")
	widenTo := fs.String("widen-to", "", "instead of a random model: copy --from widened to a named shape (tinyllama) or dim=D,hidden=H,layers=L,heads=N,kv-heads=K,head-dim=E, computing the same function (zero residual dims, compensated norms, zero heads, FFN units and head dims, identity layers); every tensor f32")
	from := fs.String("from", "", "with --widen-ffn or --widen-to: the model to widen, a llama GGUF or a llama2.c checkpoint (its vocabulary from --tokenizer)")
	ctxLen := fs.Int("context", 0, "with --widen-ffn or --widen-to: replace llama.context_length (0: keep)")
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
	if *widen > 0 || *widenTo != "" || *from != "" {
		if (*widen <= 0) == (*widenTo == "") || *from == "" {
			return fmt.Errorf("gen-model: --from MODEL goes with one of --widen-ffn N and --widen-to SHAPE: %w", errUsage)
		}
		tp := ""
		if *tok != "auto" && *tok != "none" {
			tp = *tok
		}
		if *widenTo != "" {
			shape, err := synth.ParseShape(*widenTo)
			if err != nil {
				return fmt.Errorf("gen-model: --widen-to: %w: %w", err, errUsage)
			}
			o := synth.WidenToOptions{Shape: shape, Context: *ctxLen}
			return genWidened(ctx, e, *from, tp, *out, &o.Progress, func(r io.ReaderAt, f *gguf.File) (*gguf.Writer, string, error) {
				w, err := synth.WidenTo(ctx, r, f, o)
				return w, fmt.Sprintf("widened to %v (f32, same function)", shape), err
			})
		}
		o := synth.WidenOptions{Hidden: *widen, Seed: *seed, Context: *ctxLen}
		return genWidened(ctx, e, *from, tp, *out, &o.Progress, func(r io.ReaderAt, f *gguf.File) (*gguf.Writer, string, error) {
			w, err := synth.WidenFFN(ctx, r, f, o)
			h0, _ := f.Uint("llama.feed_forward_length")
			return w, fmt.Sprintf("with its feed-forward width %d widened to %d (f32, new units compute zeros), seed %d", h0, o.Hidden, o.Seed), err
		})
	}
	p, err := synth.LookupPreset(*presetName)
	if err != nil {
		return err
	}
	if *layers < 0 {
		return fmt.Errorf("gen-model: --layers %d: want ≥ 0 (0: the preset's %d): %w", *layers, p.Layers, errUsage)
	}
	if *layers > 0 {
		p.Layers = *layers
	}
	if _, err := synth.LookupArch(*archName); err != nil {
		return fmt.Errorf("gen-model: --arch: %w", err)
	}
	dt, err := tensor.ParseDType(*dtypeName)
	if err != nil {
		return fmt.Errorf("gen-model: --dtype: %w", err)
	}
	if *window < 0 || *attnCap < 0 {
		return fmt.Errorf("gen-model: --window %d, --attn-softcap %v: want both ≥ 0 (0: the architecture's default): %w", *window, *attnCap, errUsage)
	}
	if *std < 0 || *embedStd < 0 {
		return fmt.Errorf("gen-model: --std %v, --embed-std %v: want both ≥ 0 (0: the architecture's default): %w", *std, *embedStd, errUsage)
	}
	o := synth.Options{Preset: p, Arch: *archName, HeadDim: *headDim, DType: dt, Seed: *seed, Std: float32(*std), EmbedStd: float32(*embedStd),
		Window: *window, AttnSoftcap: float32(*attnCap), Workers: *threads}
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

// genWidened writes --from widened by widen (synth.WidenFFN or
// synth.WidenTo, whose Progress field is progress). A llama2.c checkpoint
// is converted to GGUF in memory first.
func genWidened(ctx context.Context, e *env, from, tok, out string, progress *func(done, total int64),
	widen func(io.ReaderAt, *gguf.File) (*gguf.Writer, string, error)) error {
	if same, err := modelfile.SameFile(from, out); err != nil || same {
		if err == nil {
			err = fmt.Errorf("gen-model: the output %s is the input itself: %w", out, errUsage)
		}
		return err
	}
	var r io.ReaderAt
	var size int64
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	var magic [4]byte
	if _, err := io.ReadFull(src, magic[:]); err != nil {
		return fmt.Errorf("gen-model: %s: %w", from, err)
	}
	if string(magic[:]) == "GGUF" {
		st, err := src.Stat()
		if err != nil {
			return err
		}
		r, size = src, st.Size()
	} else {
		w, err := convert.Llama2C(from, convert.Options{Tokenizer: tok, Logger: *zerolog.Ctx(ctx)})
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			return err
		}
		r, size = bytes.NewReader(buf.Bytes()), int64(buf.Len())
	}
	f, err := gguf.Read(r, size, from)
	if err != nil {
		return err
	}
	var bar *progressbar.ProgressBar
	if e.stderrTTY {
		*progress = func(done, total int64) {
			if bar == nil {
				bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(e.stderr), progressbar.OptionShowBytes(true),
					progressbar.OptionSetDescription("writing "+out), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
			}
			bar.Set64(done)
		}
	}
	start := time.Now()
	w, what, err := widen(r, f)
	if err != nil {
		return err
	}
	err = w.WriteFile(out)
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s %s, %d bytes, %.2fs\n", out, from, what, st.Size(), time.Since(start).Seconds())
	return nil
}
