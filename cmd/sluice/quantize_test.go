package main

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/compress/quant"
	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/ref"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// runsLikeRef loads path, greedy-decodes 32 tokens after BOS with the engine
// and checks every position's logits against model/ref on the same file: bit
// for bit with the generic kernels (extension dtypes are decoded exactly as
// ref decodes them), within tol·(1+|ref|) on a SIMD build. It returns the tokens.
func runsLikeRef(t *testing.T, path string, tol float64) []int32 {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	logits := map[int32][]float32{}
	seq := complete(t, l, sluice.Request{Tokens: []int32{1}, AllLogits: true,
		OnLogits: func(pos int32, lg []float32) { logits[pos] = slices.Clone(lg) }},
		func(sc *pipelines.SchedulerParams) { sc.MaxNewTokens, sc.StopAtEOS = 32, false })
	if seq.Err != nil {
		t.Fatal(seq.Err)
	}
	if seq.CompletionTokens != 32 {
		t.Fatalf("generated %d tokens, want 32", seq.CompletionTokens)
	}
	tr, err := ref.New(t.Context(), l.Source, l.Store, 0)
	if err != nil {
		t.Fatal(err)
	}
	exact := kernels.Impl() == "generic"
	for pos := range len(seq.Tokens) - 1 {
		want, err := tr.Forward(seq.Tokens[pos], pos)
		if err != nil {
			t.Fatal(err)
		}
		got := logits[int32(pos)]
		if len(got) != len(want) {
			t.Fatalf("position %d: %d engine logits, ref has %d", pos, len(got), len(want))
		}
		for i := range want {
			if exact && math.Float32bits(want[i]) != math.Float32bits(got[i]) {
				t.Fatalf("%s position %d logit %d: ref %v, engine %v (must be bit-identical with generic kernels)", filepath.Base(path), pos, i, want[i], got[i])
			}
			if !exact && math.Abs(float64(want[i]-got[i])) > tol*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%s position %d logit %d: ref %v, engine %v", filepath.Base(path), pos, i, want[i], got[i])
			}
		}
	}
	return seq.Tokens
}

// tensorsOf opens a GGUF's index.
func tensorsOf(t *testing.T, path string) map[string]tensor.Info {
	t.Helper()
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]tensor.Info{}
	for _, ti := range g.Tensors {
		m[ti.Name] = ti
	}
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Every type, from the llama2.c checkpoint (+ tok512) and from the GGUF: the
// output runs bit-identically to ref, its matrices have the scheme's size (or
// stay f32 when q8_0/q4_0 cannot hold 172 columns, as the output says), int8/
// int4 weights decode within s/2 of the original, and inspect names the type.
func TestQuantizeStories(t *testing.T) {
	testutil.SkipRace(t, "quantizing stories260K to every type")
	bin, tok, gg, _ := stories(t)
	tmp := t.TempDir()
	inputs := []struct {
		name string
		args []string
		src  *rewriteSource
	}{
		{"bin", []string{"-m", bin, "--tokenizer", tok}, nil},
		{"gguf", []string{"-m", gg}, nil},
	}
	for i := range inputs {
		in := &inputs[i]
		var err error
		if in.name == "bin" {
			in.src, err = openRewrite(bin, tok, filepath.Join(tmp, "none"))
		} else {
			in.src, err = openRewrite(gg, "", filepath.Join(tmp, "none"))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer in.src.close()
	}
	types := []string{"q8_0", "q4_0", "int8-g32", "int8-g64", "int4-g32", "int4-g128", "nf4"}
	if testing.Short() {
		types = []string{"q4_0", "int8-g32", "int4-g128", "nf4"}
	}
	for _, in := range inputs {
		for _, typ := range types {
			t.Run(in.name+"/"+typ, func(t *testing.T) {
				s, err := quant.ParseScheme(typ)
				if err != nil {
					t.Fatal(err)
				}
				out := filepath.Join(tmp, in.name+"-"+typ+".gguf")
				stdout, stderr, err := cli(t, "", append([]string{"quantize", "-o", out, "--type", typ}, in.args...)...)
				if err != nil {
					t.Fatalf("%v\n%s", err, stderr)
				}
				fallback := s.DType() < tensor.FirstExtension
				if has := strings.Contains(stdout, "kept 5 tensors in f32: cols 172 not a multiple of 32"); has != fallback {
					t.Errorf("stdout %q: fallback note present %v, want %v", stdout, has, fallback)
				}
				got := tensorsOf(t, out)
				var want int64
				for _, ti := range in.src.tensors {
					g, ok := got[ti.Name]
					if !ok {
						t.Fatalf("output lacks %s", ti.Name)
					}
					wantDT, wantSize := ti.DType, ti.Size
					if len(ti.Shape) == 2 {
						wantDT, wantSize = s.DType(), s.MatrixBytes(ti.Rows(), ti.Cols())
						if fallback && ti.Cols()%32 != 0 {
							wantDT, wantSize = tensor.F32, 4*ti.Elements()
						}
					}
					if g.DType != wantDT || g.Size != wantSize || !slices.Equal(g.Shape, ti.Shape) {
						t.Errorf("%s: %v %v %d bytes, want %v %v %d", ti.Name, g.DType, g.Shape, g.Size, wantDT, ti.Shape, wantSize)
					}
					want += wantSize
					if (s.Kind == quant.KindInt8 || s.Kind == quant.KindInt4) && g.DType == s.DType() {
						checkHalfStep(t, in.src, ti, out, g, s)
					}
				}
				// Header, vocabulary and alignment padding: well under 64 KiB.
				if size := fileSize(t, out); size < want || size > want+64<<10 {
					t.Errorf("file is %d bytes for %d bytes of tensors", size, want)
				}
				if size, orig := fileSize(t, out), in.src.size; float64(size) > 0.45*float64(orig) {
					t.Errorf("file is %d bytes, %.0f%% of the %d-byte original", size, 100*float64(size)/float64(orig), orig)
				}
				// SIMD builds multiply Q8_0/Q4_0 with int8-quantized
				// activations (kernels.actQ8): their error compounds over
				// the layers, hence a much looser bound than the f32 paths'.
				tol := 1e-3
				if fallback {
					tol = 0.25
				}
				runsLikeRef(t, out, tol)
				if typ == "int4-g32" || typ == "nf4" {
					text, _, err := cli(t, "", "inspect", out)
					if err != nil || !strings.Contains(text, typ) || !regexp.MustCompile(`blk\.0\.ffn_down\.weight\s+`+typ+`\s`).MatchString(text) {
						t.Errorf("inspect: %v, output lacks %q:\n%s", err, typ, text)
					}
				}
			})
		}
	}
}

// checkHalfStep re-reads a quantized tensor and checks each row against the
// original with quant's absmax property.
func checkHalfStep(t *testing.T, src *rewriteSource, orig tensor.Info, out string, q tensor.Info, s quant.Scheme) {
	t.Helper()
	w, err := src.f32(orig)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data := make([]byte, q.Size)
	if _, err := f.ReadAt(data, q.Offset); err != nil {
		t.Fatal(err)
	}
	rows, cols, rb := orig.Rows(), orig.Cols(), s.RowBytes(orig.Cols())
	for r := range rows {
		if err := s.CheckHalfStep(w[r*cols:(r+1)*cols], data[r*rb:(r+1)*rb]); err != nil {
			t.Fatalf("%s row %d: %v", orig.Name, r, err)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	bin, tok, gg, _ := stories(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown type", []string{"quantize", "-m", gg, "-o", out, "--type", "int3-g32"}, []string{"unknown quantize type int3-g32; valid: int8-g32", "nf4", "q4_0"}},
		{"no type", []string{"quantize", "-m", gg, "-o", out}, []string{"unknown quantize type"}},
		{"missing input", []string{"quantize", "-m", filepath.Join(tmp, "nope.gguf"), "-o", out, "--type", "q8_0"}, []string{"nope.gguf", "no such file"}},
		{"no input", []string{"quantize", "-o", out, "--type", "q8_0"}, []string{"-m MODEL is required"}},
		{"no output", []string{"quantize", "-m", gg, "--type", "q8_0"}, []string{"-o FILE is required"}},
		{"bin without tokenizer", []string{"quantize", "-m", bin, "-o", out, "--type", "q8_0"}, []string{"stories260K.bin", "--tokenizer"}},
		{"output is input", []string{"quantize", "-m", gg, "-o", gg, "--type", "q8_0"}, []string{"input model itself"}},
		{"tokenizer with gguf", []string{"quantize", "-m", gg, "--tokenizer", tok, "-o", out, "--type", "q8_0"}, []string{"--tokenizer is for llama2.c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "", tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a failed quantize left %s", out)
			}
		})
	}
}

// complete runs one request through an engine on l over the greedy preset,
// changed by tune.
func complete(t *testing.T, l *model.Loaded, req sluice.Request, tune func(*pipelines.SchedulerParams)) sluice.Result {
	t.Helper()
	p := pipelines.Greedy()
	p.Scheduler().MaxInFlight = 1
	if tune != nil {
		tune(p.Scheduler())
	}
	eng, err := sluice.New(l, sluice.Options{Pipeline: p})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	r, _ := eng.Complete(t.Context(), req)
	return r
}
