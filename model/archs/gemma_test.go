package archs_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/gemma"
)

func gemmaCase(t *testing.T, arch string) archCase {
	t.Helper()
	for _, c := range cases {
		if c.arch == arch {
			return c
		}
	}
	t.Fatalf("no %s case", arch)
	return archCase{}
}

func gemmaParams(t *testing.T, path string) gemma.Params {
	t.Helper()
	l, err := model.Load(t.Context(), model.LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p, err := gemma.ReadParams(l.Source)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The hyperparameters llama.cpp derives from gemma keys, with its defaults
// and overrides: the local/global pattern (default period, a period key, an
// array of bools), the local RoPE base, linear scaling on global layers
// only (gemma3) or on both (gemma2), the query scale, the caps.
func TestGemmaParams(t *testing.T) {
	dir := t.TempDir()
	g2 := gemmaCase(t, "gemma2").write(t, dir, f32col)
	g3 := gemmaCase(t, "gemma3").write(t, dir, f32col)
	p := gemmaParams(t, g2)
	if !slices.Equal(p.Local, []bool{true, false}) || p.Window != 16 || p.SlidingWindow != 0 {
		t.Errorf("gemma2: local %v, window %d, cache window %d; want [true false], 16, 0", p.Local, p.Window, p.SlidingWindow)
	}
	if p.AttnSoftcap != 5 || p.FinalSoftcap != 30 || p.AttnScale != 0.25 || p.EmbedScale != 8 || !p.TiedOutput {
		t.Errorf("gemma2: caps %v/%v, query scale %v, embedding scale %v, tied %v; want 5/30, 0.25, 8, true", p.AttnSoftcap, p.FinalSoftcap, p.AttnScale, p.EmbedScale, p.TiedOutput)
	}
	if p.LocalRopeBase != p.RopeBase || p.GlobalFactors != nil || p.LocalFactors != nil {
		t.Errorf("gemma2: local base %v (global %v), factors %v/%v", p.LocalRopeBase, p.RopeBase, p.GlobalFactors, p.LocalFactors)
	}
	p = gemmaParams(t, g3)
	if !slices.Equal(p.Local, []bool{true, true, true, true, true, false}) || p.Window != 16 {
		t.Errorf("gemma3: local %v, window %d", p.Local, p.Window)
	}
	if p.LocalRopeBase != 10000 || p.RopeBase != 1e6 || len(p.GlobalFactors) != 8 || p.GlobalFactors[0] != 8 || p.LocalFactors != nil {
		t.Errorf("gemma3: bases %v/%v, factors %v/%v; want 10000/1e6, eight 8s/none", p.LocalRopeBase, p.RopeBase, p.GlobalFactors, p.LocalFactors)
	}
	if p.AttnSoftcap != 0 || p.FinalSoftcap != 0 {
		t.Errorf("gemma3: caps %v/%v, want none", p.AttnSoftcap, p.FinalSoftcap)
	}
	for _, tc := range []struct {
		name, src string
		kv        map[string]any
		check     func(gemma.Params) bool
	}{
		{"gemma3 period 3", g3, map[string]any{"gemma3.attention.sliding_window_pattern": uint32(3)},
			func(p gemma.Params) bool { return slices.Equal(p.Local, []bool{true, true, false, true, true, false}) }},
		{"gemma3 pattern array", g3, map[string]any{"gemma3.attention.sliding_window_pattern": []bool{false, true, false, true, true, true}},
			func(p gemma.Params) bool { return slices.Equal(p.Local, []bool{false, true, false, true, true, true}) }},
		{"gemma3 without a window", g3, map[string]any{"gemma3.attention.sliding_window": nil},
			func(p gemma.Params) bool { return !slices.Contains(p.Local, true) && p.Window == 0 }},
		{"gemma3 local base", g3, map[string]any{"gemma3.rope.freq_base_swa": float32(5000)},
			func(p gemma.Params) bool { return p.LocalRopeBase == 5000 }},
		{"gemma3 no scaling", g3, map[string]any{"gemma3.rope.scaling.type": "none"},
			func(p gemma.Params) bool { return p.GlobalFactors == nil }},
		{"gemma3 final cap", g3, map[string]any{"gemma3.final_logit_softcapping": float32(15)},
			func(p gemma.Params) bool { return p.FinalSoftcap == 15 }},
		{"gemma2 defaults", g2, map[string]any{"gemma2.attention.sliding_window": nil, "gemma2.attn_logit_softcapping": nil, "gemma2.final_logit_softcapping": nil},
			func(p gemma.Params) bool { return p.Window == 4096 && p.AttnSoftcap == 50 && p.FinalSoftcap == 30 }},
		{"gemma2 linear scaling on both", g2, map[string]any{"gemma2.rope.scaling.factor": float32(4)},
			func(p gemma.Params) bool {
				return len(p.GlobalFactors) == 8 && p.GlobalFactors[0] == 4 && len(p.LocalFactors) == 8
			}},
		{"gemma2 key length", g2, map[string]any{"gemma2.attention.key_length": uint32(16), "gemma2.attention.value_length": uint32(16)},
			func(p gemma.Params) bool { return p.AttnScale == 0.25 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := filepath.Join(dir, "edit.gguf")
			rewrite(t, tc.src, dst, tc.kv, nil)
			if p := gemmaParams(t, dst); !tc.check(p) {
				t.Errorf("params %+v", p)
			}
		})
	}
}
