package synth

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"regexp"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/tensor"
)

// WidenOptions says how WidenFFN widens a model's feed-forward layers.
type WidenOptions struct {
	// Hidden is the new feed-forward width; it must be at least the model's.
	Hidden int
	// Seed keys the random gate rows and down columns.
	Seed uint64
	// Context, when > 0, replaces llama.context_length.
	Context int
	// Progress, as in Options.
	Progress func(doneBytes, totalBytes int64)
}

var ffnName = regexp.MustCompile(`^blk\.(\d+)\.ffn_(gate|up|down)\.weight$`)

// WidenFFN returns a writer for a copy of the llama GGUF f (its bytes read
// from r) whose feed-forward layers have o.Hidden hidden units instead of
// llama.feed_forward_length. Hidden unit j computes silu(gate_j·x)·(up_j·x)
// and feeds column j of ffn_down; each new unit gets a random gate row, a
// zero up row and a random down column, so its output is silu(g)·0 = 0 and
// adds exact zeros to the down projection: the model computes the same
// function, while every token now reads every byte of the wider matrices
// (a target that is I/O-bound on purpose and still says something).
//
// The three FFN matrices are written as F32 (the original rows decoded
// exactly when they were F16/BF16/F32; a quantized source is dequantized,
// which is exact too); every other tensor and metadata key is copied as is,
// except llama.feed_forward_length (and llama.context_length with
// o.Context). The random values are N(0, σ²) with σ the RMS of the original
// matrix, so the new gate pre-activations have the original's scale. The
// writer streams the wide tensors while it writes: nothing of their size is
// held in memory.
func WidenFFN(ctx context.Context, r io.ReaderAt, f *gguf.File, o WidenOptions) (*gguf.Writer, error) {
	if f.Arch() != "llama" {
		return nil, fmt.Errorf("synth: widen %s: architecture %q, want llama: %w", f.Path, f.Arch(), ErrInvalid)
	}
	h0, ok := f.Uint("llama.feed_forward_length")
	if !ok {
		return nil, fmt.Errorf("synth: widen %s: no llama.feed_forward_length: %w", f.Path, ErrInvalid)
	}
	if o.Hidden < int(h0) || o.Hidden > 1<<26 {
		return nil, fmt.Errorf("synth: widen %s: hidden %d, want %d..%d: %w", f.Path, o.Hidden, h0, 1<<26, ErrInvalid)
	}
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v := kv.Value
		switch kv.Key {
		case "llama.feed_forward_length":
			v = uint32(o.Hidden)
		case "llama.context_length":
			if o.Context > 0 {
				v = uint32(o.Context)
			}
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			return nil, fmt.Errorf("synth: widen %s: %w", f.Path, err)
		}
	}
	if err := w.AddKV("sluice.widened_from_ffn", uint32(h0)); err != nil {
		return nil, err
	}
	var total, done int64
	for _, t := range f.Tensors {
		if ffnName.MatchString(t.Name) {
			total += int64(t.Shape[0]) * int64(t.Shape[1]) * int64(o.Hidden) / int64(h0) * 4
		} else {
			total += t.Size
		}
	}
	progress := func(n int64) {
		done += n
		if o.Progress != nil {
			o.Progress(done, total)
		}
	}
	for ti, t := range f.Tensors {
		m := ffnName.FindStringSubmatch(t.Name)
		if m == nil {
			if err := w.AddTensorFunc(t.Name, t.DType, t.Shape, func(out io.Writer) error {
				b := make([]byte, t.Size)
				if _, err := r.ReadAt(b, t.Offset); err != nil {
					return fmt.Errorf("%s: tensor %s: %w", f.Path, t.Name, err)
				}
				_, err := out.Write(b)
				progress(t.Size)
				return err
			}); err != nil {
				return nil, err
			}
			continue
		}
		if len(t.Shape) != 2 {
			return nil, fmt.Errorf("synth: widen %s: tensor %s has shape %v: %w", f.Path, t.Name, t.Shape, ErrInvalid)
		}
		down := m[2] == "down"
		rows, cols := t.Shape[0], t.Shape[1]
		if (down && cols != int(h0)) || (!down && rows != int(h0)) {
			return nil, fmt.Errorf("synth: widen %s: tensor %s has shape %v, want the hidden width %d on its %s: %w",
				f.Path, t.Name, t.Shape, h0, map[bool]string{true: "rows", false: "columns"}[!down], ErrInvalid)
		}
		rb, err := t.DType.RowBytes(cols)
		if err != nil {
			return nil, fmt.Errorf("synth: widen %s: tensor %s: %w", f.Path, t.Name, err)
		}
		shape := []int{o.Hidden, cols}
		if down {
			shape = []int{rows, o.Hidden}
		}
		zero := m[2] == "up"
		if err := w.AddTensorFunc(t.Name, tensor.F32, shape, func(out io.Writer) error {
			src := make([]byte, t.Size)
			if _, err := r.ReadAt(src, t.Offset); err != nil {
				return fmt.Errorf("%s: tensor %s: %w", f.Path, t.Name, err)
			}
			orig := make([]float32, rows*cols)
			var ss float64
			for i := range rows {
				row := orig[i*cols : (i+1)*cols]
				tensor.DequantizeRow(row, src[int64(i)*rb:], t.DType, cols)
				for _, v := range row {
					ss += float64(v) * float64(v)
				}
			}
			std := math.Sqrt(ss / float64(len(orig)))
			pcg := rand.NewPCG(0, 0)
			rng := rand.New(pcg)
			return widenRows(ctx, out, orig, rows, cols, shape, down, zero, func(row int, x []float32) {
				pcg.Seed(streamKey(o.Seed, ti, row))
				for i := range x {
					x[i] = float32(rng.NormFloat64() * std)
				}
			}, progress)
		}); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// widenRows writes the widened matrix row by row: for gate/up the original
// rows then new rows (random, or zero when zero is set); for down each
// original row followed by its new random columns.
func widenRows(ctx context.Context, out io.Writer, orig []float32, rows, cols int, shape []int, down, zero bool,
	random func(row int, x []float32), progress func(int64)) error {
	nr, nc := shape[0], shape[1]
	x := make([]float32, nc)
	buf := make([]byte, 4*nc)
	for i := range nr {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		switch {
		case down:
			copy(x, orig[i*cols:(i+1)*cols])
			random(i, x[cols:])
		case i < rows:
			copy(x, orig[i*cols:(i+1)*cols])
		case zero:
			clear(x)
		default:
			random(i, x)
		}
		for j, v := range x {
			binary.LittleEndian.PutUint32(buf[4*j:], math.Float32bits(v))
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
		progress(int64(len(buf)))
	}
	return nil
}
