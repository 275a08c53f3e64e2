package ref_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/ref"
	"github.com/sluicehq/sluice/model/synth"
	"github.com/sluicehq/sluice/offload"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// requantize rewrites the F32 GGUF at src as dst with every matrix whose
// rows are whole 256-element super-blocks stored as Q4_K, except
// output.weight, stored as Q6_K (llama.cpp's Q4_K_M choice for it); norms
// and metadata are copied.
func requantize(t *testing.T, src, dst string) map[string]tensor.DType {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := offload.Open(t.Context(), offload.Options{Files: []offload.File{{Path: src, Tensors: f.Tensors}}})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		v := kv.Value
		if kv.Key == "general.file_type" {
			v = uint32(15) // LLAMA_FTYPE_MOSTLY_Q4_K_M
		}
		if err := w.AddKV(kv.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	types := map[string]tensor.DType{}
	for _, ti := range f.Tensors {
		r, _ := raw.Lookup(ti.Name)
		p, err := raw.Acquire(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), p.Bytes()...)
		p.Release()
		dt := ti.DType
		if len(ti.Shape) == 2 && ti.Cols()%tensor.QK_K == 0 && dt == tensor.F32 {
			dt = tensor.Q4_K
			if ti.Name == "output.weight" {
				dt = tensor.Q6_K
			}
			rows, cols := ti.Rows(), ti.Cols()
			rb, _ := dt.RowBytes(cols)
			q := make([]byte, int64(rows)*rb)
			row := make([]float32, cols)
			for i := range rows {
				tensor.DequantizeRow(row, data[i*cols*4:], tensor.F32, cols)
				if err := tensor.QuantizeRow(q[int64(i)*rb:int64(i+1)*rb], row, dt); err != nil {
					t.Fatal(err)
				}
			}
			data = q
		}
		types[ti.Name] = dt
		if err := w.AddTensor(ti.Name, dt, ti.Shape, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
	return types
}

// refLogits runs the oracle over toks and returns every position's logits.
func refLogits(t *testing.T, path string, toks []int32) [][]float32 {
	t.Helper()
	src, err := model.OpenSource(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := offload.Open(t.Context(), offload.Options{Files: []offload.File{{Path: src.Path, Tensors: src.Tensors}}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	tr, err := ref.New(t.Context(), src, store, len(toks))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for pos, tok := range toks {
		l, err := tr.Forward(tok, pos)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), l...))
	}
	return out
}

// engineLogits runs the model/llama fast path (the kernels' MatMul) over
// toks as one prompt and returns every position's logits.
func engineLogits(t *testing.T, path string, toks []int32) [][]float32 {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out := make([][]float32, len(toks))
	p := pipelines.Greedy()
	sc := p.Scheduler()
	sc.MaxInFlight, sc.MaxNewTokens, sc.StopAtEOS, sc.PrefillChunk = 1, 1, false, 3
	eng, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	_, err = eng.Complete(context.Background(), sluice.Request{Tokens: toks, AllLogits: true,
		OnLogits: func(pos int32, logits []float32) {
			if int(pos) < len(out) {
				out[pos] = append([]float32(nil), logits...)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func relRMS(a, b []float32) float64 {
	var se, ss float64
	for i := range a {
		d := float64(a[i] - b[i])
		se += d * d
		ss += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(se / ss)
}

// TestKQuantGGUFLoads: a synthetic Llama whose matrices are Q4_K (output
// Q6_K) loads, runs through the oracle and the engine, and its logits stay
// close to the F32 model it was quantized from.
func TestKQuantGGUFLoads(t *testing.T) {
	dir := t.TempDir()
	f32Path, kPath := filepath.Join(dir, "f32.gguf"), filepath.Join(dir, "q4_k_m.gguf")
	p := synth.Preset{Name: "k256", Dim: 256, Hidden: 512, Layers: 2, Heads: 4, KVHeads: 2, Context: 64, Vocab: 512}
	if err := synth.WriteFile(f32Path, synth.Options{Preset: p, DType: tensor.F32, Seed: 3, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	types := requantize(t, f32Path, kPath)
	var names []string
	for n, dt := range types {
		if dt.IsKQuant() {
			names = append(names, n+"="+dt.String())
		}
	}
	if types["output.weight"] != tensor.Q6_K || types["blk.0.ffn_down.weight"] != tensor.Q4_K || types["blk.1.attn_q.weight"] != tensor.Q4_K {
		t.Fatalf("requantized types: %v", types)
	}
	slices.Sort(names)
	t.Logf("K-quant tensors: %s", strings.Join(names, " "))

	src, err := model.OpenSource(kPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range src.Tensors {
		if ti.DType != types[ti.Name] {
			t.Errorf("%s reads back as %v, wrote %v", ti.Name, ti.DType, types[ti.Name])
		}
	}

	toks := []int32{1, 72, 300, 45, 9, 411, 3, 260}
	want := refLogits(t, f32Path, toks)
	got := refLogits(t, kPath, toks)
	fast := engineLogits(t, kPath, toks)
	for pos := range toks {
		e := relRMS(got[pos], want[pos])
		if e > 0.15 || math.IsNaN(e) {
			t.Errorf("pos %d: K-quant logits differ from F32 by relative RMS %.4f", pos, e)
		}
		if fast[pos] == nil {
			t.Fatalf("pos %d: the engine gave no logits", pos)
		}
		// The generic kernels decode K-quant blocks as the oracle does; the
		// fast ones quantize the activations to Q8_K (as llama.cpp does),
		// which moved these logits by a relative RMS of at most 0.01.
		tol := 1e-4
		if kernels.Impl() != "generic" {
			tol = 0.05
		}
		if e := relRMS(fast[pos], got[pos]); e > tol {
			t.Errorf("pos %d: engine and oracle differ on the K-quant model by relative RMS %.2g (> %.2g on %s kernels)", pos, e, tol, kernels.Impl())
		}
		if pos == len(toks)-1 {
			t.Logf("last position: K-quant vs F32 relative RMS %.4f, engine vs oracle %.2g", relRMS(got[pos], want[pos]), relRMS(fast[pos], got[pos]))
		}
	}
}
