package model

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/tensor"
	"github.com/sluicehq/sluice/tokenizer"
)

// LoadOptions configures Load.
type LoadOptions struct {
	Path      string // .gguf or llama2.c .bin
	Tokenizer string // llama2.c tokenizer.bin; required for .bin models, overrides a GGUF's own vocabulary
	// TokenizerPre, when set, replaces the GGUF's tokenizer.ggml.pre
	// (tokenizer.GGUFOptions.Pre).
	TokenizerPre string
	Tier         offload.Tier
	Threads      int       // kernel threads; 0 = GOMAXPROCS
	Registry     *Registry // nil = &Default
	Logger       zerolog.Logger
	Progress     func(done, total int64)
	// Budget bounds resident weight bytes (0: none); see offload.Options.
	Budget int64
	// Timeline records per-layer read and compute spans (offload.Timeliner).
	Timeline bool
	// ReadAt replaces the ssd tier's pread (fault injection in tests).
	ReadAt offload.ReadAtFunc
}

// Loaded is a model ready to run: file, weights, architecture and tokenizer.
type Loaded struct {
	Source    *Source
	Store     offload.Store
	Model     Model
	Tokenizer tokenizer.Tokenizer
	Pool      *kernels.Pool
}

// Close releases the store and the kernel pool.
func (l *Loaded) Close() error {
	l.Pool.Close()
	return l.Store.Close()
}

// Load opens a model file, its weights and its tokenizer, and checks that they fit.
func Load(ctx context.Context, o LoadOptions) (*Loaded, error) {
	src, err := OpenSource(o.Path)
	if err != nil {
		return nil, err
	}
	store, err := offload.Open(ctx, offload.Options{
		Files:    []offload.File{{Path: src.Path, Tensors: src.Tensors}},
		Tier:     o.Tier,
		Logger:   o.Logger,
		Progress: o.Progress,
		Budget:   o.Budget,
		Timeline: o.Timeline,
		ReadAt:   o.ReadAt,
		// Q8_0 matrices in the panel layout where the kernel set has a
		// panel kernel (in place, where the store owns the bytes).
		Panels: kernels.Panels(tensor.Q8_0),
	})
	if err != nil {
		return nil, err
	}
	reg := o.Registry
	if reg == nil {
		reg = &Default
	}
	pool := kernels.NewPool(o.Threads)
	m, err := reg.Build(src, store, Options{Pool: pool})
	if err != nil {
		pool.Close()
		return nil, errors.Join(err, store.Close())
	}
	if pl, ok := store.(offload.Planner); ok {
		// The ssd tier pins and streams by layer: tell it the layers.
		var lay offload.Usage
		for _, b := range m.Blocks() {
			lay.Layers = append(lay.Layers, b.Weights())
		}
		if rw, ok := m.(interface{ RowWeights() []offload.Ref }); ok {
			lay.Rows = rw.RowWeights()
		}
		if err := pl.Plan(ctx, lay); err != nil {
			pool.Close()
			return nil, errors.Join(err, store.Close())
		}
	}
	tok, err := loadTokenizer(src, o.Tokenizer, o.TokenizerPre, m.Arch().Vocab)
	if err == nil && tok.VocabSize() != m.Arch().Vocab {
		err = fmt.Errorf("model: tokenizer %s has %d pieces but the model %s has a vocabulary of %d",
			tokenizerName(src, o.Tokenizer), tok.VocabSize(), src.Path, m.Arch().Vocab)
	}
	if err != nil {
		pool.Close()
		return nil, errors.Join(err, store.Close())
	}
	o.Logger.Debug().Str("path", src.Path).Str("format", src.Format.String()).Str("arch", m.Arch().Name).Msg("model loaded")
	return &Loaded{Source: src, Store: store, Model: m, Tokenizer: tok, Pool: pool}, nil
}

func tokenizerName(src *Source, path string) string {
	if path != "" {
		return path
	}
	return "in " + src.Path
}

func loadTokenizer(src *Source, path, pre string, vocab int) (tokenizer.Tokenizer, error) {
	if path != "" {
		// tokenizer.bin does not record its length: the model's vocabulary says
		// how many pieces to read, and a file that holds a different number fails.
		return tokenizer.LoadLlama2C(path, vocab)
	}
	if src.GGUF == nil {
		return nil, fmt.Errorf("model: %s is a %s checkpoint without a vocabulary: pass its tokenizer.bin (--tokenizer)", src.Path, src.Format)
	}
	return tokenizer.FromGGUFOptions(src.GGUF, tokenizer.GGUFOptions{Pre: pre})
}
