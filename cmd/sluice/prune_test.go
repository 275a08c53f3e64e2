package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/compress/prune"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/tensor"
)

// readDense reads a tensor of a written file back as float32 rows.
func readDense(t *testing.T, path string, ti tensor.Info) []float32 {
	t.Helper()
	src, err := openRewrite(path, "", path+".none")
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	v, err := src.f32(ti)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestPruneStories(t *testing.T) {
	testutil.SkipRace(t, "pruning stories260K every way")
	bin, tok, gg, _ := stories(t)
	tmp := t.TempDir()
	for _, tc := range []struct {
		name   string
		args   []string
		dtype  tensor.DType
		global bool
		nm     int // group size of an N:M pattern, 0 for unstructured
		keep   int
	}{
		{"sparsity-gguf", []string{"-m", gg, "--sparsity", "0.5"}, tensor.F32, false, 0, 0},
		{"sparsity-bin", []string{"-m", bin, "--tokenizer", tok, "--sparsity", "0.5"}, tensor.F32, false, 0, 0},
		{"global", []string{"-m", gg, "--sparsity", "0.5", "--global"}, tensor.F32, true, 0, 0},
		{"nm-2:4", []string{"-m", gg, "--nm", "2:4"}, prune.DTypeSparse24, false, 4, 2},
		{"nm-2:4-bin", []string{"-m", bin, "--tokenizer", tok, "--nm", "2:4"}, prune.DTypeSparse24, false, 4, 2},
		{"nm-1:4", []string{"-m", gg, "--nm", "1:4"}, prune.DTypeSparse24, false, 4, 1},
		{"nm-4:8", []string{"-m", gg, "--nm", "4:8"}, tensor.F32, false, 8, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(tmp, tc.name+".gguf")
			stdout, stderr, err := cli(t, "", append([]string{"prune", "-o", out}, tc.args...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, stderr)
			}
			if !strings.Contains(stdout, "stored as "+tc.dtype.String()) {
				t.Errorf("stdout %q does not say the layout %v", stdout, tc.dtype)
			}
			zeros, total := 0, 0
			for name, ti := range tensorsOf(t, out) {
				if len(ti.Shape) != 2 {
					continue
				}
				if !strings.HasPrefix(name, "blk.") {
					if ti.DType != tensor.F32 || prune.Zeros(readDense(t, out, ti)) != 0 {
						t.Errorf("%s was pruned or converted (%v)", name, ti.DType)
					}
					continue
				}
				if ti.DType != tc.dtype {
					t.Errorf("%s stored as %v, want %v", name, ti.DType, tc.dtype)
				}
				w := readDense(t, out, ti)
				z := prune.Zeros(w)
				zeros, total = zeros+z, total+len(w)
				switch {
				case tc.nm > 0:
					rows, cols := ti.Rows(), ti.Cols()
					for r := range rows {
						for g := 0; g < cols; g += tc.nm {
							nz := 0
							for _, v := range w[r*cols+g : r*cols+min(g+tc.nm, cols)] {
								if v != 0 {
									nz++
								}
							}
							if nz > tc.keep {
								t.Fatalf("%s row %d columns %d..: %d nonzeros, want ≤ %d", name, r, g, nz, tc.keep)
							}
						}
					}
				case !tc.global:
					if want := prune.Count(0.5, len(w)); z != want {
						t.Errorf("%s: %d zeros of %d, want exactly %d", name, z, len(w), want)
					}
				}
			}
			if tc.global && zeros != prune.Count(0.5, total) {
				t.Errorf("global: %d zeros of %d, want exactly %d", zeros, total, prune.Count(0.5, total))
			}
			if tc.dtype == prune.DTypeSparse24 {
				if size, orig := fileSize(t, out), fileSize(t, gg); float64(size) > 0.7*float64(orig) {
					t.Errorf("2:4 file is %d bytes, original %d: compression missing", size, orig)
				}
			}
			runsLikeRef(t, out, 1e-3)
		})
	}
}

func TestPruneErrors(t *testing.T) {
	bin, _, gg, _ := stories(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "out.gguf")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"sparsity 0", []string{"--sparsity", "0"}, "strictly between 0 and 1"},
		{"sparsity 1", []string{"--sparsity", "1"}, "strictly between 0 and 1"},
		{"sparsity negative", []string{"--sparsity", "-0.2"}, "strictly between 0 and 1"},
		{"sparsity NaN", []string{"--sparsity", "NaN"}, "strictly between 0 and 1"},
		{"nothing", nil, "exactly one of"},
		{"both", []string{"--sparsity", "0.5", "--nm", "2:4"}, "exactly one of"},
		{"nm no colon", []string{"--nm", "24"}, `--nm "24"`},
		{"nm N=M", []string{"--nm", "4:4"}, `--nm "4:4"`},
		{"nm words", []string{"--nm", "a:b"}, `--nm "a:b"`},
		{"nm zero M", []string{"--nm", "0:0"}, `--nm "0:0"`},
		{"global with nm", []string{"--nm", "2:4", "--global"}, "--global"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "", append([]string{"prune", "-m", gg, "-o", out}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"missing input", []string{"-m", filepath.Join(tmp, "nope.gguf")}, []string{"nope.gguf", "no such file"}},
		{"bin without tokenizer", []string{"-m", bin}, []string{"stories260K.bin", "--tokenizer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := cli(t, "", append([]string{"prune", "--sparsity", "0.5", "-o", out}, tc.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed prune left %s", out)
	}
}

// FuzzParseNM: any string parses to a valid pattern or errors, never panics.
func FuzzParseNM(f *testing.F) {
	for _, s := range []string{"2:4", "1:4", "4:8", "4:4", ":", "a:b", "-1:4", "2:99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, m, err := parseNM(s)
		if err == nil && !(n >= 0 && n < m && m <= 1024) {
			t.Fatalf("parseNM(%q) = %d:%d without error", s, n, m)
		}
	})
}
