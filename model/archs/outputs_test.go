package archs_test

import (
	"math"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
)

// TestLastBlockOutputRows checks the last block's pruning (model.Outputs):
// a pass whose batch lists a few rows for logits gives, at those rows, the
// logits bit for bit of the same pass with every row listed. The batch
// holds two sequences (two runs), the listed rows are single, consecutive
// and at a run's ends, and gemma's local windows narrow the mask.
func TestLastBlockOutputRows(t *testing.T) {
	dir := t.TempDir()
	lens := []int{20, 13}
	for _, c := range cases {
		t.Run(c.arch, func(t *testing.T) {
			l, err := model.Load(t.Context(), model.LoadOptions{Path: c.write(t, dir, f32col), Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			listed := map[int]bool{0: true, 5: true, 9: true, 10: true, 11: true, 19: true, 32: true} // rows of the 33
			pass := func(all bool) []float32 {
				m := l.Model
				a := m.Arch()
				kv, err := kvcache.New(kvcache.Options{Layers: a.Layers, KVHeads: a.KVHeads, HeadDim: a.HeadDim,
					PageTokens: 4, MaxTokens: 64, MaxSeqLen: 32, Window: a.SlidingWindow})
				if err != nil {
					t.Fatal(err)
				}
				b := &input.Batch{}
				row := 0
				for s, n := range lens {
					for i := range n {
						b.Add(int32((row*7+3)%a.Vocab), int32(i), int32(s), all || listed[row])
						row++
					}
				}
				p, err := kv.Begin(t.Context(), b)
				if err != nil {
					t.Fatal(err)
				}
				defer p.End()
				st := &model.State{Batch: b, Pass: p, Mask: p.Mask()}
				err = m.Embed(t.Context(), st, l.Store)
				for _, blk := range m.Blocks() {
					if err == nil {
						err = blk.Forward(t.Context(), st, l.Store)
					}
				}
				if err == nil {
					err = m.Head(t.Context(), st, l.Store)
				}
				if err != nil {
					t.Fatal(err)
				}
				if !all {
					return st.Logits
				}
				// Keep the listed rows' logits, in order.
				var out []float32
				for r := range row {
					if listed[r] {
						out = append(out, st.Logits[r*a.Vocab:(r+1)*a.Vocab]...)
					}
				}
				return out
			}
			want, got := pass(true), pass(false)
			if len(got) != len(want) {
				t.Fatalf("%d logits with listed rows, want %d", len(got), len(want))
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("logit %d (listed row %d): %v with the rows listed, %v with every row", i, i/l.Model.Arch().Vocab, got[i], want[i])
				}
			}
		})
	}
}
