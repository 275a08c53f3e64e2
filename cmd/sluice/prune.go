package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/sluicehq/sluice/compress/prune"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

// prunable reports whether a tensor is pruned: the 2-D matrices of the
// transformer blocks (attention and feed-forward). The token embedding is a
// lookup table and the output head scores every token, so, as in the pruning
// literature (SparseGPT, Wanda), both stay dense; norms are vectors.
func prunable(t tensor.Info) bool {
	return len(t.Shape) == 2 && strings.HasPrefix(t.Name, "blk.")
}

// parseNM parses "N:M" (0 ≤ N ≤ M, 1 ≤ M ≤ 1024, N < M).
func parseNM(s string) (n, m int, err error) {
	a, b, ok := strings.Cut(s, ":")
	if ok {
		n, err = strconv.Atoi(a)
		if err == nil {
			m, err = strconv.Atoi(b)
		}
	}
	if !ok || err != nil || m < 1 || m > 1024 || n < 0 || n >= m {
		return 0, 0, fmt.Errorf("--nm %q: want N:M with 0 ≤ N < M ≤ 1024, e.g. 2:4: %w", s, errUsage)
	}
	return n, m, nil
}

func cmdPrune(ctx context.Context, e *env, args []string) error {
	fs := e.flags("prune")
	in := fs.String("m", "", "input model: .gguf, or a llama2.c .bin (then --tokenizer is needed)")
	tok := fs.String("tokenizer", "", "llama2.c tokenizer.bin whose vocabulary is copied into the GGUF (llama2.c input only)")
	out := fs.String("o", "", "output GGUF file (required)")
	sparsity := fs.Float64("sparsity", 0, "fraction of each block matrix's weights to zero, smallest magnitudes first (0 < S < 1)")
	global := fs.Bool("global", false, "with --sparsity: rank all block matrices together instead of each on its own")
	nm := fs.String("nm", "", "structured N:M pruning: keep at most N of every M consecutive weights of a row (2:4 is stored compressed and multiplied by a zero-skipping kernel)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("prune: unexpected arguments %q: %w", pos, errUsage)
	}
	set := setFlags(fs)
	var n, m int
	switch {
	case set["sparsity"] == set["nm"]:
		return fmt.Errorf("prune: give exactly one of --sparsity S or --nm N:M: %w", errUsage)
	case set["nm"]:
		if *global {
			return fmt.Errorf("prune: --global applies to --sparsity, not --nm: %w", errUsage)
		}
		if n, m, err = parseNM(*nm); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	case !(*sparsity > 0 && *sparsity < 1):
		return fmt.Errorf("prune: --sparsity %v: want a fraction strictly between 0 and 1: %w", *sparsity, errUsage)
	}
	src, err := openRewrite(*in, *tok, *out)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	defer src.close()

	// Read every matrix first: a global prune ranks them all together.
	vals := map[string][]float32{}
	var order [][]float32
	for _, t := range src.tensors {
		if !prunable(t) {
			continue
		}
		v, err := src.f32(t)
		if err != nil {
			return err
		}
		vals[t.Name] = v
		order = append(order, v)
	}
	if len(order) == 0 {
		return fmt.Errorf("prune: %s has no blk.* weight matrices to prune", src.path)
	}
	method := ""
	switch {
	case set["nm"]:
		method = fmt.Sprintf("%d:%d structured", n, m)
		for _, t := range src.tensors {
			if v := vals[t.Name]; v != nil {
				if err := prune.NM(v, t.Rows(), t.Cols(), n, m); err != nil {
					return fmt.Errorf("prune: %s: tensor %s: %w", src.path, t.Name, err)
				}
			}
		}
	case *global:
		method = fmt.Sprintf("%g global magnitude", *sparsity)
		if _, err := prune.MagnitudeGlobal(order, *sparsity); err != nil {
			return fmt.Errorf("prune: %s: %w", src.path, err)
		}
	default:
		method = fmt.Sprintf("%g per-matrix magnitude", *sparsity)
		for _, t := range src.tensors {
			if v := vals[t.Name]; v != nil {
				if _, err := prune.Magnitude(v, *sparsity); err != nil {
					return fmt.Errorf("prune: %s: tensor %s: %w", src.path, t.Name, err)
				}
			}
		}
	}
	// 2:4 (and sparser N:4) matrices are stored compressed; everything else,
	// unstructured sparsity included, stays dense f32 with zeros: scattered
	// zeros do not make a CPU matvec faster.
	compressed := set["nm"] && m == 4 && n <= 2
	dt := tensor.F32
	if compressed {
		dt = prune.DTypeSparse24
	}
	w := gguf.NewWriter()
	zeros, total := 0, 0
	for _, t := range src.tensors {
		v := vals[t.Name]
		if v == nil {
			raw, err := src.raw(t)
			if err != nil {
				return err
			}
			if err := w.AddTensor(t.Name, t.DType, t.Shape, raw); err != nil {
				return fmt.Errorf("prune: %s: %w", *out, err)
			}
			continue
		}
		zeros += prune.Zeros(v)
		total += len(v)
		data := []byte(nil)
		if compressed {
			s, err := prune.Compress24(v, t.Rows(), t.Cols())
			if err != nil {
				return fmt.Errorf("prune: tensor %s: %w", t.Name, err)
			}
			data = s.Encode()
		} else {
			data = f32Bytes(v)
		}
		if err := w.AddTensor(t.Name, dt, t.Shape, data); err != nil {
			return fmt.Errorf("prune: %s: %w", *out, err)
		}
	}
	note := fmt.Sprintf("sluice prune: %s pruning of %d blk.* weight matrices, %d of %d weights zero (%.2f%%), stored as %v; token_embd, output and norms unchanged",
		method, len(order), zeros, total, 100*float64(zeros)/float64(total), dt)
	meta := map[string]any{"general.file_type": fileTypeOf(dt), "general.pruning_notes": note}
	if err := src.writeMeta(w, meta); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	size, err := writeGGUF(w, *out)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s pruning of %d matrices, %d of %d weights zero (%.2f%%), stored as %v, %d → %d bytes\n",
		*out, method, len(order), zeros, total, 100*float64(zeros)/float64(total), dt, src.size, size)
	zerolog.Ctx(ctx).Info().Str("in", src.path).Str("out", *out).Str("method", method).Int64("bytes", size).Msg("prune done")
	return nil
}
