package main

import (
	"context"
	"fmt"
	"io"
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

	// pruned reads matrix t and prunes it. A global prune ranks all the
	// matrices together, so it runs once up front and keeps them in memory;
	// the per-matrix methods run twice, once here to count the zeros the
	// metadata reports and again while the output streams, so only one
	// matrix is in memory at a time.
	var ranked map[string][]float32 // the globally pruned matrices
	method := ""
	pruned := func(t tensor.Info) ([]float32, error) {
		if ranked != nil {
			return ranked[t.Name], nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := src.f32(t)
		if err != nil {
			return nil, err
		}
		if set["nm"] {
			err = prune.NM(v, t.Rows(), t.Cols(), n, m)
		} else {
			_, err = prune.Magnitude(v, *sparsity)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", src.path, t.Name, err)
		}
		return v, nil
	}
	switch {
	case set["nm"]:
		method = fmt.Sprintf("%d:%d structured", n, m)
	case *global:
		method = fmt.Sprintf("%g global magnitude", *sparsity)
	default:
		method = fmt.Sprintf("%g per-matrix magnitude", *sparsity)
	}
	var order [][]float32
	matrices, zeros, total := 0, 0, 0
	for _, t := range src.tensors {
		if !prunable(t) {
			continue
		}
		matrices++
		if *global {
			v, err := src.f32(t)
			if err != nil {
				return err
			}
			order = append(order, v)
			continue
		}
		v, err := pruned(t)
		if err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		zeros += prune.Zeros(v)
		total += len(v)
	}
	if matrices == 0 {
		return fmt.Errorf("prune: %s has no blk.* weight matrices to prune", src.path)
	}
	if *global {
		if _, err := prune.MagnitudeGlobal(order, *sparsity); err != nil {
			return fmt.Errorf("prune: %s: %w", src.path, err)
		}
		ranked = map[string][]float32{}
		for _, t := range src.tensors {
			if prunable(t) {
				v := order[len(ranked)]
				ranked[t.Name] = v
				zeros += prune.Zeros(v)
				total += len(v)
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
	for _, t := range src.tensors {
		var err error
		if !prunable(t) {
			err = w.AddTensorFunc(t.Name, t.DType, t.Shape, src.copyRaw(ctx, t))
		} else {
			err = w.AddTensorFunc(t.Name, dt, t.Shape, func(out io.Writer) error {
				v, err := pruned(t)
				if err != nil {
					return err
				}
				data := []byte(nil)
				if compressed {
					s, err := prune.Compress24(v, t.Rows(), t.Cols())
					if err != nil {
						return fmt.Errorf("tensor %s: %w", t.Name, err)
					}
					data = s.Encode()
				} else {
					data = tensor.F32Bytes(v)
				}
				_, err = out.Write(data)
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("prune: %s: %w", *out, err)
		}
	}
	note := fmt.Sprintf("sluice prune: %s pruning of %d blk.* weight matrices, %d of %d weights zero (%.2f%%), stored as %v; token_embd, output and norms unchanged",
		method, matrices, zeros, total, 100*float64(zeros)/float64(total), dt)
	meta := map[string]any{"general.file_type": fileTypeOf(dt), "general.pruning_notes": note}
	if err := src.writeMeta(w, meta); err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	size, err := writeGGUF(w, *out)
	if err != nil {
		return fmt.Errorf("prune: %w", err)
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s pruning of %d matrices, %d of %d weights zero (%.2f%%), stored as %v, %d → %d bytes\n",
		*out, method, matrices, zeros, total, 100*float64(zeros)/float64(total), dt, src.size, size)
	zerolog.Ctx(ctx).Info().Str("in", src.path).Str("out", *out).Str("method", method).Int64("bytes", size).Msg("prune done")
	return nil
}
