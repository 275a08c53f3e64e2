package synth_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/pipelines"
)

// widen writes stories260K.gguf widened to hidden units and returns its path.
func widen(t *testing.T, src string, hidden int) string {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := synth.WidenFFN(context.Background(), r, f, synth.WidenOptions{Hidden: hidden, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "wide.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// greedy decodes n tokens after prompt and returns the text and the logits
// of every position.
func greedy(t *testing.T, path, prompt string, n, threads int) (string, [][]float32) {
	t.Helper()
	l, err := model.Load(context.Background(), model.LoadOptions{Path: path, Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := pipelines.Greedy()
	p.Scheduler().MaxNewTokens = n
	e, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var lg [][]float32
	r, err := e.Complete(context.Background(), sluice.Request{Prompt: prompt, AllLogits: true,
		OnLogits: func(_ int32, x []float32) { lg = append(lg, slices.Clone(x)) }})
	if err != nil {
		t.Fatal(err)
	}
	return r.Text, lg
}

// Must show: stories260K with its FFN widened (new units: random gate rows,
// zero up rows, random down columns) generates the original's greedy text,
// and its logits are bit-identical: the new units add exact zeros to each
// down-projection sum, after the original terms in the same order.
func TestWidenFFNSameFunction(t *testing.T) {
	src := filepath.Join(testutil.Models(t), "stories260K-gguf", "stories260K.gguf")
	const prompt, n = "Once upon a time", 48
	// The AVX2 float kernels take a row's last cols%8 elements as the
	// vector ending at the row's end (lanes 8−t…7), where a longer row has
	// them in lanes 0…t−1 of a full step: the widened down projection adds
	// the original terms in other lanes, so its sums round differently.
	// The generic and AVX-512 kernels keep each element's lane, and their
	// logits must be the same bits; under AVX2 the text must still match.
	exact := kernels.Impl() != "avx2"
	if !exact {
		t.Log("avx2 kernels: logits checked within 1e-4, not bit for bit (a row's tail lanes depend on its length)")
	}
	for _, threads := range []int{1, 2} {
		want, wantLg := greedy(t, src, prompt, n, threads)
		for _, hidden := range []int{172, 300, 1024} {
			path := widen(t, src, hidden)
			got, gotLg := greedy(t, path, prompt, n, threads)
			if got != want {
				t.Errorf("threads %d hidden %d: text %q, want %q", threads, hidden, got, want)
			}
			if len(gotLg) != len(wantLg) {
				t.Fatalf("threads %d hidden %d: %d logit rows, want %d", threads, hidden, len(gotLg), len(wantLg))
			}
			for i := range wantLg {
				for j := range wantLg[i] {
					g, w := gotLg[i][j], wantLg[i][j]
					if exact && math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("threads %d hidden %d: row %d logit %d: %v, want %v (bit for bit)", threads, hidden, i, j, g, w)
					}
					if !exact && math.Abs(float64(g-w)) > 1e-4*max(1, math.Abs(float64(w))) {
						t.Fatalf("threads %d hidden %d: row %d logit %d: %v, want %v (within 1e-4)", threads, hidden, i, j, g, w)
					}
				}
			}
		}
	}
}

// The widened tensors hold what WidenFFN says: original rows and columns
// unchanged, new up rows zero, new gate rows and down columns random
// (nonzero), and the metadata's feed-forward width.
func TestWidenFFNTensors(t *testing.T) {
	src := filepath.Join(testutil.Models(t), "stories260K-gguf", "stories260K.gguf")
	const hidden = 256
	path := widen(t, src, hidden)
	a, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	b, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := b.Uint("llama.feed_forward_length"); h != hidden {
		t.Fatalf("feed_forward_length %d, want %d", h, hidden)
	}
	ra, _ := os.ReadFile(src)
	rb, _ := os.ReadFile(path)
	f32 := func(raw []byte, off int64, i int) float32 {
		return math.Float32frombits(binary.LittleEndian.Uint32(raw[off+4*int64(i):]))
	}
	for _, ta := range a.Tensors {
		tb, ok := b.Tensor(ta.Name)
		if !ok {
			t.Fatalf("%s missing", ta.Name)
		}
		da, db := ra[ta.Offset:ta.Offset+ta.Size], rb[tb.Offset:tb.Offset+tb.Size]
		switch {
		case bytes.HasSuffix([]byte(ta.Name), []byte("ffn_down.weight")):
			rows, h0 := ta.Shape[0], ta.Shape[1]
			for r := range rows {
				for c := range hidden {
					v := f32(rb, tb.Offset, r*hidden+c)
					if c < h0 && v != f32(ra, ta.Offset, r*h0+c) || c >= h0 && v == 0 {
						t.Fatalf("%s[%d,%d] = %v", ta.Name, r, c, v)
					}
				}
			}
		case bytes.HasSuffix([]byte(ta.Name), []byte("ffn_gate.weight")), bytes.HasSuffix([]byte(ta.Name), []byte("ffn_up.weight")):
			up := bytes.HasSuffix([]byte(ta.Name), []byte("ffn_up.weight"))
			if !bytes.Equal(db[:len(da)], da) {
				t.Fatalf("%s: original rows changed", ta.Name)
			}
			for i := len(da) / 4; i < len(db)/4; i++ {
				if v := f32(db, 0, i); (v == 0) != up {
					t.Fatalf("%s: new element %d = %v", ta.Name, i, v)
				}
			}
		default:
			if !bytes.Equal(da, db) {
				t.Fatalf("%s changed", ta.Name)
			}
		}
	}
}
