package llama

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/compress/lora"
	"github.com/sluicehq/sluice/internal/testutil"
	"github.com/sluicehq/sluice/kernels"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
)

// The unmerged update of one target matrix equals W·x + scale·B·(A·x)
// written out as loops, for each row of a small batch.
func TestFactorMatchesHandFormula(t *testing.T) {
	dir := filepath.Join(testutil.Models(t), "stories260K")
	l, err := model.Load(t.Context(), model.LoadOptions{Path: filepath.Join(dir, "stories260K.bin"), Tokenizer: filepath.Join(dir, "tok512.bin"), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := l.Model.(*Model)
	const r, n = 3, 2
	rng := rand.New(rand.NewPCG(5, 5))
	fill := func(k int) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	for _, tc := range []struct {
		module, tensor string
	}{
		{"model.layers.2.self_attn.q_proj", "blk.2.attn_q.weight"},
		{"model.layers.4.mlp.down_proj", "blk.4.ffn_down.weight"},
		{"model.layers.0.self_attn.k_proj", "blk.0.attn_k.weight"},
	} {
		t.Run(tc.module, func(t *testing.T) {
			info, _ := l.Source.Tensor(tc.tensor)
			out, in := info.Shape[0], info.Shape[1]
			md := lora.Module{Name: tc.module, Tensor: tc.tensor, R: r, Scale: 0.75, In: in, Out: out, A: fill(r * in), B: fill(out * r)}
			set := &adapterSet{layers: make([]layerAdapter, 5)}
			if err := m.addModule(set, &md); err != nil {
				t.Fatal(err)
			}
			var f *factor
			for _, l := range set.layers {
				for _, s := range []*[]factor{&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down} {
					if len(*s) == 1 {
						f = &(*s)[0]
					}
				}
			}
			if f == nil {
				t.Fatal("module not placed in any slot")
			}
			w, pin, err := model.Matrix(t.Context(), l.Store, m.layerRef(tensorLayer(tc.tensor), tensorKind(tc.tensor)))
			if err != nil {
				t.Fatal(err)
			}
			defer pin.Release()
			x := fill(n * in)
			got := make([]float32, n*out)
			st := &model.State{Batch: &input.Batch{}}
			kernels.MatMul(nil, got, w, x, n)
			f.apply(nil, st, got, x, n)

			wf := model.F32View(w.Data)
			for row := range n {
				xr := x[row*in : (row+1)*in]
				for i := range out {
					var wx float64
					for j := range in {
						wx += float64(wf[i*in+j]) * float64(xr[j])
					}
					var bax float64
					for k := range r {
						var ax float64
						for j := range in {
							ax += float64(md.A[k*in+j]) * float64(xr[j])
						}
						bax += float64(md.B[i*r+k]) * ax
					}
					want := wx + float64(md.Scale)*bax
					if g := float64(got[row*out+i]); math.Abs(g-want) > 1e-4*(1+math.Abs(want)) {
						t.Fatalf("row %d, output %d: got %v, want W·x + scale·B·(A·x) = %v", row, i, g, want)
					}
				}
			}
		})
	}
}

func tensorLayer(name string) int { return int(name[4] - '0') }
func tensorKind(name string) string {
	return name[6 : len(name)-len(".weight")]
}
