package synth_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/format/gguf"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/model/synth"
)

// widenTo writes src widened to s and returns its path.
func widenTo(t *testing.T, src string, s synth.Shape) string {
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
	w, err := synth.WidenTo(context.Background(), r, f, synth.WidenToOptions{Shape: s})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "wide.gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// stories260K's own shape.
var stories = synth.Shape{Dim: 64, Hidden: 172, Layers: 5, Heads: 8, KVHeads: 4, HeadDim: 8}

// Must show 2's target at a size CI runs: stories260K widened in every
// direction (residual stream, FFN, heads, head size, layers, KV heads)
// computes the same logits to float tolerance and the same greedy text;
// widened to its own shape it is the same model bit for bit.
func TestWidenToSameFunction(t *testing.T) {
	src := filepath.Join(testutil.Models(t), "stories260K-gguf", "stories260K.gguf")
	for _, c := range []struct {
		s     synth.Shape
		exact bool
	}{
		{stories, true},
		{synth.Shape{Dim: 256, Hidden: 512, Layers: 7, Heads: 16, KVHeads: 4, HeadDim: 32}, false},
		{synth.Shape{Dim: 128, Hidden: 300, Layers: 6, Heads: 16, KVHeads: 8, HeadDim: 16}, false},
	} {
		path := widenTo(t, src, c.s)
		for _, prompt := range []string{"Once upon a time", "Lily and Tom went to the park. They saw"} {
			want, wantLg := greedy(t, src, prompt, 40, 1)
			got, gotLg := greedy(t, path, prompt, 40, 1)
			if got != want {
				t.Errorf("%v: text %q, want %q", c.s, got, want)
			}
			if len(gotLg) != len(wantLg) {
				t.Fatalf("%v: %d logit rows, want %d", c.s, len(gotLg), len(wantLg))
			}
			var worst float64
			for i := range wantLg {
				for j := range wantLg[i] {
					g, w := float64(gotLg[i][j]), float64(wantLg[i][j])
					if c.exact && g != w {
						t.Fatalf("%v: row %d logit %d: %v, want %v bit for bit", c.s, i, j, g, w)
					}
					worst = max(worst, math.Abs(g-w)/max(1, math.Abs(w)))
				}
			}
			if worst > 1e-4 {
				t.Errorf("%v %q: logits differ by up to %.3g (relative), want ≤ 1e-4", c.s, prompt, worst)
			}
			t.Logf("%v %q: worst relative logit difference %.3g", c.s, prompt, worst)
		}
	}
}

// Shapes WidenTo cannot reach with the same function are refused, naming
// what is wrong.
func TestWidenToRefuses(t *testing.T) {
	src := filepath.Join(testutil.Models(t), "stories260K-gguf", "stories260K.gguf")
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, c := range []struct {
		s    synth.Shape
		want string
	}{
		{synth.Shape{Dim: 32, Hidden: 172, Layers: 5, Heads: 8, KVHeads: 4, HeadDim: 8}, "narrower"},
		{synth.Shape{Dim: 128, Hidden: 172, Layers: 5, Heads: 8, KVHeads: 4, HeadDim: 12}, "head dim 12"},
		{synth.Shape{Dim: 128, Hidden: 172, Layers: 5, Heads: 12, KVHeads: 4, HeadDim: 8}, "group size"},
	} {
		_, err := synth.WidenTo(context.Background(), r, f, synth.WidenToOptions{Shape: c.s})
		if !errors.Is(err, synth.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err %v, want ErrInvalid saying %q", c.s, err, c.want)
		}
	}
	if _, err := synth.LookupShape("tinyllama"); err != nil {
		t.Error(err)
	}
	if _, err := synth.LookupShape("gpt5"); !errors.Is(err, synth.ErrInvalid) || !strings.Contains(err.Error(), "tinyllama") {
		t.Errorf("LookupShape(gpt5) = %v, want ErrInvalid listing tinyllama", err)
	}
}

// ParseShape never panics, and a shape it accepts has every size ≥ 1 and
// prints back to one it parses the same.
func FuzzParseShape(f *testing.F) {
	for _, s := range []string{"tinyllama", "dim=256,hidden=512,layers=7,heads=16,kv-heads=4,head-dim=32", "dim=1", "dim=2,dim=3", "x", ",", "dim=-1,hidden=2,layers=3,heads=4,kv-heads=5,head-dim=6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sh, err := synth.ParseShape(s)
		if err != nil {
			if !errors.Is(err, synth.ErrInvalid) {
				t.Fatalf("%q: error %v does not wrap ErrInvalid", s, err)
			}
			return
		}
		if min(sh.Dim, sh.Hidden, sh.Layers, sh.Heads, sh.KVHeads, sh.HeadDim) < 1 {
			t.Fatalf("%q: accepted %+v", s, sh)
		}
		again, err := synth.ParseShape(fmt.Sprintf("dim=%d,hidden=%d,layers=%d,heads=%d,kv-heads=%d,head-dim=%d", sh.Dim, sh.Hidden, sh.Layers, sh.Heads, sh.KVHeads, sh.HeadDim))
		if err != nil || again != sh {
			t.Fatalf("%q: %+v printed back parses as %+v, %v", s, sh, again, err)
		}
	})
}
