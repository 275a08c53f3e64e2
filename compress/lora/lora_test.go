package lora

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/format/safetensors"
	"github.com/sluicehq/sluice/tensor"
)

// matvec is y = W x for a row-major (rows, cols) W, in float64 for reference.
func matvec(w []float32, x []float32, rows, cols int) []float64 {
	y := make([]float64, rows)
	for i := range rows {
		for j := range cols {
			y[i] += float64(w[i*cols+j]) * float64(x[j])
		}
	}
	return y
}

// The seed's example in the seed's own row-vector form is y = x W_s + (α/r) x A_s B_s
// with W_s = [[1,2],[3,4]], A_s = [[1],[0]], B_s = [[0.5,0.5]], α = 2, r = 1:
// W'_s = [[2,3],[3,4]] and x = (1,1) gives (5,7). In our y = W x convention
// every matrix is transposed: W = [[1,3],[2,4]], A = [[1,0]] (r×in),
// B = [[0.5],[0.5]] (out×r).
func TestSeedExample(t *testing.T) {
	cfg := DefaultConfig()
	cfg.R, cfg.Alpha = 1, 2
	cfg.TargetModules = Targets{Names: []string{"q_proj"}}
	aName, bName := PEFTNames("model.layers.0.self_attn.q_proj", false)
	ad, err := New(cfg, []Tensor{
		{Name: aName, Shape: []int{1, 2}, Data: []float32{1, 0}},
		{Name: bName, Shape: []int{2, 1}, Data: []float32{0.5, 0.5}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := ad.Module("blk.0.attn_q.weight")
	if !ok || m.Scale != 2 {
		t.Fatalf("module %+v, %v; want scale α/r = 2", m, ok)
	}
	// Seed row-vector form, computed literally: x W_s + (α/r)(x A_s) B_s.
	ws, as, bs := [2][2]float64{{1, 2}, {3, 4}}, [2]float64{1, 0}, [2]float64{0.5, 0.5}
	x := [2]float64{1, 1}
	var seedY [2]float64
	xa := x[0]*as[0] + x[1]*as[1]
	for o := range 2 {
		seedY[o] = x[0]*ws[0][o] + x[1]*ws[1][o] + 2*xa*bs[o]
	}
	if seedY != [2]float64{5, 7} {
		t.Fatalf("seed form gives %v, want (5, 7)", seedY)
	}

	w := []float32{1, 3, 2, 4} // W = W_sᵀ, (out, in)
	merged := append([]float32(nil), w...)
	if err := m.Merge(merged, 2, 2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{2, 3, 3, 4}, merged); diff != "" {
		t.Errorf("W' (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]float64{5, 7}, matvec(merged, []float32{1, 1}, 2, 2)); diff != "" {
		t.Errorf("merged W' x (-want +got):\n%s", diff)
	}
	y := []float32{4, 6} // W x
	if diff := cmp.Diff([]float64{4, 6}, matvec(w, []float32{1, 1}, 2, 2)); diff != "" {
		t.Fatalf("base W x (-want +got):\n%s", diff)
	}
	m.Apply(y, []float32{1, 1}, 1)
	if diff := cmp.Diff([]float32{5, 7}, y); diff != "" {
		t.Errorf("unmerged W x + scale·B(A x) (-want +got):\n%s", diff)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		json string
		want Config
	}{
		{"defaults", `{"peft_type": "LORA", "target_modules": ["q_proj", "v_proj"]}`,
			Config{PEFTType: "LORA", R: 8, Alpha: 8, Bias: "none", TargetModules: Targets{Names: []string{"q_proj", "v_proj"}}}},
		{"regex and extras", `{"r": 16, "lora_alpha": 32.5, "target_modules": ".*\\.(q|v)_proj", "use_rslora": true, "fan_in_fan_out": true,
			"base_model_name_or_path": "TinyLlama/TinyLlama-1.1B", "task_type": "CAUSAL_LM", "lora_dropout": 0.05, "modules_to_save": null}`,
			Config{PEFTType: "LORA", R: 16, Alpha: 32.5, Bias: "none", TargetModules: Targets{Regex: `.*\.(q|v)_proj`},
				UseRSLoRA: true, FanInFanOut: true, BaseModel: "TinyLlama/TinyLlama-1.1B"}},
		{"null targets and patterns", `{"target_modules": null, "rank_pattern": {"q_proj": 4, "layers\\.1\\..*": 2}, "alpha_pattern": {}}`,
			Config{PEFTType: "LORA", R: 8, Alpha: 8, Bias: "none",
				RankPattern: Pattern{{Key: "q_proj", Value: 4}, {Key: `layers\.1\..*`, Value: 2}}, AlphaPattern: Pattern{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.json), "adapter_config.json")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(Targets{}, PatternEntry{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	bad := []struct {
		name, json string
		want       error
		msg        string
	}{
		{"syntax", `{"r": }`, ErrConfig, "adapter_config.json: offset 7"},
		{"type", `{"r": "8"}`, ErrConfig, "offset"},
		{"zero rank", `{"r": 0}`, ErrConfig, "r = 0"},
		{"dora", `{"use_dora": true}`, ErrUnsupported, "DoRA"},
		{"bias", `{"bias": "all"}`, ErrUnsupported, `bias "all"`},
		{"other peft type", `{"peft_type": "IA3"}`, ErrUnsupported, `peft_type "IA3"`},
		{"bad regex", `{"target_modules": "(q_proj"}`, ErrConfig, "target_modules regex"},
		{"bad pattern", `{"rank_pattern": {"(": 2}}`, ErrConfig, `pattern key "("`},
		{"fractional rank pattern", `{"rank_pattern": {"q": 2.5}}`, ErrConfig, "positive integer"},
		{"modules to save", `{"modules_to_save": ["lm_head"]}`, ErrUnsupported, "modules_to_save"},
		{"targets not strings", `{"target_modules": [1]}`, ErrConfig, "target_modules"},
	}
	for _, tc := range bad {
		t.Run("error/"+tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json), "adapter_config.json")
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) || !strings.Contains(fmt.Sprint(err), "adapter_config.json") {
				t.Errorf("err = %v, want %v naming the file and %q", err, tc.want, tc.msg)
			}
		})
	}
}

func TestScaleAndPatterns(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{"r": 16, "lora_alpha": 32, "use_rslora": true,
		"rank_pattern": {"layers\\.1\\.self_attn\\.q_proj": 4, "q_proj": 8},
		"alpha_pattern": {"down_proj": 8}}`), "cfg")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		module    string
		r         int
		alpha     float64
		wantScale float32
	}{
		{"model.layers.0.self_attn.v_proj", 16, 32, 32.0 / 4},                  // α/√16
		{"model.layers.0.self_attn.q_proj", 8, 32, float32(32 / math.Sqrt(8))}, // second key
		{"model.layers.1.self_attn.q_proj", 4, 32, 16},                         // first key wins
		{"model.layers.0.mlp.down_proj", 16, 8, 2},
		{"model.layers.0.mlp.xdown_proj", 16, 32, 8}, // a key matches whole path components only
	}
	for _, tc := range tests {
		t.Run(tc.module, func(t *testing.T) {
			r, alpha := cfg.RankAlpha(tc.module)
			if r != tc.r || alpha != tc.alpha {
				t.Errorf("RankAlpha = %d, %v; want %d, %v", r, alpha, tc.r, tc.alpha)
			}
			if s := cfg.Scale(r, alpha); s != tc.wantScale {
				t.Errorf("Scale = %v, want %v", s, tc.wantScale)
			}
		})
	}
	plain := DefaultConfig()
	if s := plain.Scale(16, 32); s != 2 {
		t.Errorf("plain LoRA scale α/r = %v, want 2", s)
	}
}

func TestTargetsMatch(t *testing.T) {
	list := Targets{Names: []string{"q_proj", "mlp.down_proj"}}
	re := Targets{Regex: `model\.layers\.[01]\..*\.(k|v)_proj`}
	all := Targets{Regex: AllLinear}
	tests := []struct {
		module        string
		list, re, all bool
	}{
		{"model.layers.0.self_attn.q_proj", true, false, true},
		{"model.layers.3.self_attn.v_proj", false, false, true},
		{"model.layers.1.self_attn.k_proj", false, true, true},
		{"model.layers.1.mlp.down_proj", true, false, true},
		{"model.layers.1.mlp.xq_proj", false, false, true},
		{"q_proj", true, false, true},
		{"lm_head", false, false, false},
		{"model.embed_tokens", false, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.module, func(t *testing.T) {
			if got := list.Match(tc.module); got != tc.list {
				t.Errorf("list Match = %v", got)
			}
			if got := re.Match(tc.module); got != tc.re {
				t.Errorf("regex Match = %v", got)
			}
			if got := all.Match(tc.module); got != tc.all {
				t.Errorf("all-linear Match = %v", got)
			}
		})
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ hf, gguf string }{
		{"model.layers.0.self_attn.q_proj", "blk.0.attn_q.weight"},
		{"model.layers.11.self_attn.k_proj", "blk.11.attn_k.weight"},
		{"model.layers.2.self_attn.v_proj", "blk.2.attn_v.weight"},
		{"model.layers.2.self_attn.o_proj", "blk.2.attn_output.weight"},
		{"model.layers.3.mlp.gate_proj", "blk.3.ffn_gate.weight"},
		{"model.layers.3.mlp.up_proj", "blk.3.ffn_up.weight"},
		{"model.layers.3.mlp.down_proj", "blk.3.ffn_down.weight"},
		{"model.embed_tokens", "token_embd.weight"},
		{"lm_head", "output.weight"},
	}
	for _, tc := range tests {
		t.Run(tc.hf, func(t *testing.T) {
			if g, ok := GGUFName(tc.hf); !ok || g != tc.gguf {
				t.Errorf("GGUFName = %q, %v; want %q", g, ok, tc.gguf)
			}
			if h, ok := HFName(tc.gguf); !ok || h != tc.hf {
				t.Errorf("HFName = %q, %v; want %q", h, ok, tc.hf)
			}
		})
	}
	for _, bad := range []string{"model.layers.x.self_attn.q_proj", "model.layers.01.self_attn.q_proj", "model.layers.0.self_attn.rotary", "encoder.layer.0.attention.self.query", "model.layers.0"} {
		if g, ok := GGUFName(bad); ok {
			t.Errorf("GGUFName(%q) = %q, want no mapping", bad, g)
		}
	}
	for _, bad := range []string{"blk.0.attn_q.bias", "blk.a.attn_q.weight", "blk.0.attn_norm.weight", "output_norm.weight"} {
		if h, ok := HFName(bad); ok {
			t.Errorf("HFName(%q) = %q, want no mapping", bad, h)
		}
	}
}

// fixture describes a small llama-shaped base model and an adapter on it.
type fixture struct {
	dim, hidden, vocab, layers int
	r                          int
}

func (f fixture) baseInfos() []tensor.Info {
	var out []tensor.Info
	out = append(out, tensor.Info{Name: "token_embd.weight", DType: tensor.F32, Shape: []int{f.vocab, f.dim}})
	for l := range f.layers {
		p := fmt.Sprintf("blk.%d.", l)
		out = append(out,
			tensor.Info{Name: p + "attn_q.weight", DType: tensor.F32, Shape: []int{f.dim, f.dim}},
			tensor.Info{Name: p + "attn_k.weight", DType: tensor.F32, Shape: []int{f.dim / 2, f.dim}},
			tensor.Info{Name: p + "attn_v.weight", DType: tensor.F32, Shape: []int{f.dim / 2, f.dim}},
			tensor.Info{Name: p + "attn_output.weight", DType: tensor.F32, Shape: []int{f.dim, f.dim}},
			tensor.Info{Name: p + "ffn_down.weight", DType: tensor.F32, Shape: []int{f.dim, f.hidden}},
			tensor.Info{Name: p + "ffn_up.weight", DType: tensor.F32, Shape: []int{f.hidden, f.dim}},
		)
	}
	return out
}

func randVec(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// adapterTensors makes random A, B for the given modules with the shapes the
// fixture's base needs.
func (f fixture) adapterTensors(t *testing.T, r *rand.Rand, dt tensor.DType, modules ...string) []safetensors.Tensor {
	t.Helper()
	shape := map[string][2]int{}
	for _, info := range f.baseInfos() {
		shape[info.Name] = [2]int{info.Shape[0], info.Shape[1]}
	}
	var out []safetensors.Tensor
	for _, m := range modules {
		g, ok := GGUFName(m)
		if !ok {
			t.Fatalf("no GGUF name for %s", m)
		}
		s := shape[g]
		an, bn := PEFTNames(m, false)
		ta, err := safetensors.NewTensor(an, dt, []int{f.r, s[1]}, randVec(r, f.r*s[1]))
		if err != nil {
			t.Fatal(err)
		}
		tb, err := safetensors.NewTensor(bn, dt, []int{s[0], f.r}, randVec(r, s[0]*f.r))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ta, tb)
	}
	return out
}

func TestWriteLoadMergeApply(t *testing.T) {
	f := fixture{dim: 16, hidden: 40, vocab: 32, layers: 2, r: 4}
	r := rand.New(rand.NewPCG(1, 2))
	modules := []string{
		"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.0.mlp.down_proj",
		"model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.mlp.up_proj",
	}
	for _, dt := range []tensor.DType{tensor.F32, tensor.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "adapter")
			cfg := DefaultConfig()
			cfg.R, cfg.Alpha = f.r, 8
			cfg.TargetModules = Targets{Names: []string{"q_proj", "k_proj", "v_proj", "down_proj", "up_proj"}}
			cfg.BaseModel = "test/tiny"
			written := f.adapterTensors(t, r, dt, modules...)
			if err := WriteAdapter(dir, cfg, written); err != nil {
				t.Fatal(err)
			}
			ad, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if err := ad.Validate(f.baseInfos()); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if len(ad.Modules) != len(modules) || ad.Config.BaseModel != "test/tiny" {
				t.Fatalf("loaded %d modules, config %+v", len(ad.Modules), ad.Config)
			}
			for _, m := range ad.Modules {
				if m.Scale != 2 || m.R != f.r {
					t.Errorf("%s: scale %v r %d, want 2 and %d", m.Name, m.Scale, m.R, f.r)
				}
			}
			// Round trip: the tensors Load read are the ones written (after the
			// dtype's rounding, which both sides share).
			back, err := ad.Tensors()
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(written) {
				t.Fatalf("Tensors() = %d tensors, wrote %d", len(back), len(written))
			}

			for _, m := range ad.Modules {
				rows, cols := m.BaseShape()
				w := randVec(r, rows*cols)
				merged := append([]float32(nil), w...)
				if err := m.Merge(merged, rows, cols); err != nil {
					t.Fatal(err)
				}
				// Reference: W + scale·B·A in float64.
				for i := range rows {
					for j := range cols {
						var d float64
						for k := range m.R {
							d += float64(m.B[i*m.R+k]) * float64(m.A[k*m.In+j])
						}
						want := float64(w[i*cols+j]) + float64(m.Scale)*d
						if got := float64(merged[i*cols+j]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("%s: W'[%d][%d] = %v, want %v", m.Name, i, j, got, want)
						}
					}
				}
				// Unmerged equals merged, for a batch of 3 rows.
				const n = 3
				x := randVec(r, n*cols)
				y := make([]float32, n*rows)
				for b := range n {
					copy(y[b*rows:], toF32(matvec(w, x[b*cols:(b+1)*cols], rows, cols)))
				}
				m.Apply(y, x, n)
				for b := range n {
					want := matvec(merged, x[b*cols:(b+1)*cols], rows, cols)
					for i := range rows {
						if d := math.Abs(float64(y[b*rows+i]) - want[i]); d > 1e-3*(1+math.Abs(want[i])) {
							t.Errorf("%s row %d out %d: unmerged %v, merged %v", m.Name, b, i, y[b*rows+i], want[i])
						}
					}
				}
			}
		})
	}
}

func toF32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func TestEmbeddingAdapter(t *testing.T) {
	const vocab, dim, r = 6, 4, 2
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := DefaultConfig()
	cfg.R, cfg.Alpha = r, 4
	cfg.TargetModules = Targets{Names: []string{"embed_tokens"}}
	an, bn := PEFTNames("model.embed_tokens", true)
	if an != "base_model.model.model.embed_tokens.lora_embedding_A" {
		t.Errorf("embedding A name %q", an)
	}
	a, b := randVec(rng, r*vocab), randVec(rng, dim*r)
	ad, err := New(cfg, []Tensor{{Name: an, Shape: []int{r, vocab}, Data: a}, {Name: bn, Shape: []int{dim, r}, Data: b}})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := ad.Module("token_embd.weight")
	if !ok || !m.Embedding {
		t.Fatalf("module %+v", m)
	}
	if rows, cols := m.BaseShape(); rows != vocab || cols != dim {
		t.Fatalf("BaseShape = %d, %d; want (vocab %d, dim %d)", rows, cols, vocab, dim)
	}
	if err := ad.Validate([]tensor.Info{{Name: "token_embd.weight", Shape: []int{vocab, dim}}}); err != nil {
		t.Fatal(err)
	}
	table := randVec(rng, vocab*dim)
	merged := append([]float32(nil), table...)
	if err := m.Merge(merged, vocab, dim); err != nil {
		t.Fatal(err)
	}
	tokens := []int32{5, 0, 3}
	rows := make([]float32, len(tokens)*dim)
	for i, tok := range tokens {
		copy(rows[i*dim:], table[int(tok)*dim:(int(tok)+1)*dim])
		for d := range dim { // row t gains scale·Σ_k B[d][k]·A[k][t]
			var want float64
			for k := range r {
				want += float64(b[d*r+k]) * float64(a[k*vocab+int(tok)])
			}
			want = float64(table[int(tok)*dim+d]) + 2*want
			if got := merged[int(tok)*dim+d]; math.Abs(float64(got)-want) > 1e-5 {
				t.Errorf("merged[%d][%d] = %v, want %v", tok, d, got, want)
			}
		}
	}
	m.ApplyEmbedding(rows, tokens)
	for i, tok := range tokens {
		if diff := cmp.Diff(merged[int(tok)*dim:(int(tok)+1)*dim], rows[i*dim:(i+1)*dim], cmpopts.EquateApprox(0, 1e-5)); diff != "" {
			t.Errorf("token %d: unmerged vs merged (-merged +unmerged):\n%s", tok, diff)
		}
	}
}

func TestMergeTransposed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.R, cfg.Alpha, cfg.FanInFanOut = 2, 2, true
	rng := rand.New(rand.NewPCG(5, 6))
	const out, in = 3, 5
	an, bn := PEFTNames("model.layers.0.self_attn.q_proj", false)
	ad, err := New(cfg, []Tensor{{Name: an, Shape: []int{2, in}, Data: randVec(rng, 2*in)}, {Name: bn, Shape: []int{out, 2}, Data: randVec(rng, out*2)}})
	if err != nil {
		t.Fatal(err)
	}
	m := &ad.Modules[0]
	w := randVec(rng, out*in)
	wt := make([]float32, in*out) // the Conv1D (in, out) layout
	for i := range out {
		for j := range in {
			wt[j*out+i] = w[i*in+j]
		}
	}
	if err := m.Merge(w, out, in); err != nil {
		t.Fatal(err)
	}
	if err := m.MergeTransposed(wt, out, in); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		for j := range in {
			if w[i*in+j] != wt[j*out+i] {
				t.Errorf("[%d][%d]: Merge %v, MergeTransposed %v", i, j, w[i*in+j], wt[j*out+i])
			}
		}
	}
	if err := m.Merge(w, in, out); !errors.Is(err, ErrShape) || !strings.Contains(err.Error(), "B·A is [3 5] but the base weight is [5 3]") {
		t.Errorf("Merge with swapped shape: %v", err)
	}
}

func TestPermuteRows(t *testing.T) {
	// One head of 4 rows: (j, i) → 2i + j moves rows [0 1 2 3] to [0 2 1 3].
	w := []float32{0, 0, 1, 1, 2, 2, 3, 3}
	if err := PermuteRows(w, 4, 2, 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{0, 0, 2, 2, 1, 1, 3, 3}, w); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Two heads of 6 rows each: within a head [0..5] → [0 3 1 4 2 5].
	v := make([]float32, 12)
	for i := range v {
		v[i] = float32(i)
	}
	if err := PermuteRows(v, 12, 1, 2); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float32{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11}, v); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := PermuteRows(make([]float32, 6), 6, 1, 2); !errors.Is(err, ErrShape) {
		t.Errorf("6 rows for 2 heads: %v, want ErrShape", err)
	}
}

// Merging the permuted adapter into the converter-permuted base equals
// permuting the HF merge: PermuteQK is what keeps a HF adapter correct on a GGUF.
func TestPermuteQKCommutesWithMerge(t *testing.T) {
	f := fixture{dim: 16, hidden: 8, vocab: 4, layers: 1, r: 3}
	rng := rand.New(rand.NewPCG(7, 8))
	cfg := DefaultConfig()
	cfg.R, cfg.Alpha = f.r, 3
	var ts []Tensor
	for _, st := range f.adapterTensors(t, rng, tensor.F32, "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj", "model.layers.0.self_attn.v_proj") {
		v := make([]float32, len(st.Data)/4)
		tensor.DequantizeRow(v, st.Data, tensor.F32, len(v))
		ts = append(ts, Tensor{Name: st.Name, Shape: st.Shape, Data: v})
	}
	hf, err := New(cfg, ts)
	if err != nil {
		t.Fatal(err)
	}
	gg, _ := New(cfg, cloneTensors(ts))
	const heads, kvHeads = 4, 2
	if err := gg.PermuteQK(heads, kvHeads); err != nil {
		t.Fatal(err)
	}
	if err := gg.PermuteQK(heads, kvHeads); err == nil {
		t.Error("second PermuteQK succeeded, want an error")
	}
	for i := range hf.Modules {
		mh, mg := &hf.Modules[i], &gg.Modules[i]
		rows, cols := mh.BaseShape()
		h := map[string]int{"blk.0.attn_q.weight": heads, "blk.0.attn_k.weight": kvHeads}[mh.Tensor]
		w := randVec(rng, rows*cols)
		viaHF := append([]float32(nil), w...)
		if err := mh.Merge(viaHF, rows, cols); err != nil {
			t.Fatal(err)
		}
		viaGGUF := append([]float32(nil), w...)
		if h > 0 {
			PermuteRows(viaHF, rows, cols, h)
			PermuteRows(viaGGUF, rows, cols, h)
		}
		if err := mg.Merge(viaGGUF, rows, cols); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(viaHF, viaGGUF); diff != "" {
			t.Errorf("%s: permute(merge) vs merge(permuted) (-hf +gguf):\n%s", mh.Tensor, diff)
		}
	}
}

func cloneTensors(ts []Tensor) []Tensor {
	out := make([]Tensor, len(ts))
	for i, t := range ts {
		out[i] = Tensor{Name: t.Name, Shape: t.Shape, Data: append([]float32(nil), t.Data...)}
	}
	return out
}

func TestValidationErrors(t *testing.T) {
	f := fixture{dim: 8, hidden: 12, vocab: 10, layers: 1, r: 2}
	rng := rand.New(rand.NewPCG(9, 9))
	q := "model.layers.0.self_attn.q_proj"
	qa, qb := PEFTNames(q, false)
	cfg := DefaultConfig()
	cfg.R = 2
	cfg.TargetModules = Targets{Names: []string{"q_proj", "v_proj"}}
	good := func() []Tensor {
		return []Tensor{
			{Name: qa, Shape: []int{2, 8}, Data: randVec(rng, 16)},
			{Name: qb, Shape: []int{8, 2}, Data: randVec(rng, 16)},
		}
	}
	without := func(ts []Tensor, name string) []Tensor {
		var out []Tensor
		for _, t := range ts {
			if t.Name != name {
				out = append(out, t)
			}
		}
		return out
	}
	tests := []struct {
		name    string
		cfg     func(Config) Config
		tensors []Tensor
		base    []tensor.Info // nil: the fixture's
		want    error
		msg     string
	}{
		{"missing B", nil, without(good(), qb), nil, ErrMissing, "has " + qa + " but no " + qb},
		{"missing A", nil, without(good(), qa), nil, ErrMissing, "has " + qb + " but no " + qa},
		{"A and B ranks differ", nil, []Tensor{
			{Name: qa, Shape: []int{2, 8}, Data: make([]float32, 16)},
			{Name: qb, Shape: []int{8, 3}, Data: make([]float32, 24)},
		}, nil, ErrRank, "A is [2 8] (r = 2) but B is [8 3] (r = 3)"},
		{"config rank differs", func(c Config) Config { c.R = 4; return c }, good(), nil, ErrRank, "the config gives r = 4 but A [2 8] and B [8 2] have rank 2"},
		{"not targeted", func(c Config) Config { c.TargetModules = Targets{Names: []string{"v_proj"}}; return c }, good(), nil, ErrConfig, "target_modules does not select it"},
		{"dora tensor", nil, append(good(), Tensor{Name: "base_model.model." + q + ".lora_magnitude_vector", Shape: []int{8}, Data: make([]float32, 8)}), nil, ErrUnsupported, "DoRA"},
		{"stray tensor", nil, append(good(), Tensor{Name: "base_model.model.model.layers.0.self_attn.q_proj.bias", Shape: []int{8}, Data: make([]float32, 8)}), nil, ErrUnsupported, "not a LoRA factor"},
		{"3-D factor", nil, []Tensor{
			{Name: qa, Shape: []int{2, 8, 1}, Data: make([]float32, 16)},
			{Name: qb, Shape: []int{8, 2}, Data: make([]float32, 16)},
		}, nil, ErrShape, "must both be 2-D"},
		{"shape does not fit base", nil, []Tensor{
			{Name: qa, Shape: []int{2, 12}, Data: make([]float32, 24)},
			{Name: qb, Shape: []int{8, 2}, Data: make([]float32, 16)},
		}, nil, ErrShape, "B·A is [8 12] (A [2 12], B [8 2]) but base tensor blk.0.attn_q.weight is [8 8]"},
		{"base lacks the tensor", nil, good(), []tensor.Info{{Name: "blk.0.attn_v.weight", Shape: []int{4, 8}}}, ErrNoBase, "adapts blk.0.attn_q.weight, which the base model does not have"},
		{"target matches no base weight", func(c Config) Config {
			c.TargetModules = Targets{Names: []string{"q_proj", "w_proj"}}
			return c
		}, good(), nil, ErrNoBase, `target_modules entry "w_proj" selects no weight of the base model`},
		{"module with no GGUF name", func(c Config) Config { c.TargetModules = Targets{}; return c }, []Tensor{
			{Name: "base_model.model.encoder.layer.0.attention.self.query.lora_A.weight", Shape: []int{2, 8}, Data: make([]float32, 16)},
			{Name: "base_model.model.encoder.layer.0.attention.self.query.lora_B.weight", Shape: []int{8, 2}, Data: make([]float32, 16)},
		}, nil, ErrNoBase, "has no GGUF counterpart"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				c = tc.cfg(c)
			}
			ad, err := New(c, tc.tensors)
			if err == nil {
				base := tc.base
				if base == nil {
					base = f.baseInfos()
				}
				err = ad.Validate(base)
			}
			if !errors.Is(err, tc.want) || !strings.Contains(fmt.Sprint(err), tc.msg) {
				t.Errorf("err = %v\nwant %v containing %q", err, tc.want, tc.msg)
			}
		})
	}
}

// Validate accepts a base indexed by HF names (a safetensors model) as well.
func TestValidateHFNamedBase(t *testing.T) {
	cfg := DefaultConfig()
	cfg.R = 1
	qa, qb := PEFTNames("model.layers.0.self_attn.q_proj", false)
	ad, err := New(cfg, []Tensor{{Name: qa, Shape: []int{1, 4}, Data: make([]float32, 4)}, {Name: qb, Shape: []int{4, 1}, Data: make([]float32, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Validate([]tensor.Info{{Name: "model.layers.0.self_attn.q_proj.weight", Shape: []int{4, 4}}}); err != nil {
		t.Error(err)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Run("no config", func(t *testing.T) {
		if _, err := Load(t.TempDir()); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), ConfigFile) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("pickle only", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"r": 8}`), 0o644)
		os.WriteFile(filepath.Join(dir, PickleWeightsFile), []byte("PK"), 0o644)
		if _, err := Load(dir); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "pickled") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("corrupt weights", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, ConfigFile), []byte(`{"r": 8}`), 0o644)
		os.WriteFile(filepath.Join(dir, WeightsFile), []byte{1, 2, 3}, 0o644)
		if _, err := Load(dir); !errors.Is(err, safetensors.ErrTruncated) || !strings.Contains(err.Error(), WeightsFile) {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("error names the directory", func(t *testing.T) {
		dir := t.TempDir()
		cfg := DefaultConfig()
		cfg.R = 2
		qa, _ := PEFTNames("model.layers.0.self_attn.q_proj", false)
		ta, _ := safetensors.NewTensor(qa, tensor.F32, []int{2, 4}, make([]float32, 8))
		if err := WriteAdapter(dir, cfg, []safetensors.Tensor{ta}); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(dir); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), dir) {
			t.Errorf("err = %v", err)
		}
	})
}

// FuzzConfig: ParseConfig never panics, and an accepted config survives a
// JSON round trip unchanged.
func FuzzConfig(f *testing.F) {
	f.Add([]byte(`{"r": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"], "peft_type": "LORA"}`))
	f.Add([]byte(`{"r": 4, "target_modules": ".*\\.(q|k)_proj", "use_rslora": true, "rank_pattern": {"q_proj": 2}}`))
	f.Add([]byte(`{"target_modules": null, "alpha_pattern": {"a": 1, "b": 2}}`))
	f.Add([]byte(`{"r": }`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data, "fuzz.json")
		if err != nil {
			return
		}
		dir := t.TempDir()
		if err := WriteAdapter(dir, cfg, nil); err != nil {
			t.Fatal(err)
		}
		again, err := os.ReadFile(filepath.Join(dir, ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		cfg2, err := ParseConfig(again, "again.json")
		if err != nil {
			t.Fatalf("re-parsing a written config: %v\n%s", err, again)
		}
		if diff := cmp.Diff(cfg, cfg2, cmpopts.IgnoreUnexported(Targets{}, PatternEntry{}), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
