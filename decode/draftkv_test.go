package decode

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/kvcache"
	"github.com/sluicehq/sluice/model"
	"github.com/sluicehq/sluice/model/input"
	"github.com/sluicehq/sluice/spec"
)

// The draft's KV pool holds every sequence at its full length at once —
// context plus the draft's headroom — for page sizes that do not divide that
// length: many sequences in lock step near the end of their context each
// own a partly empty last page, so a pool of length × sequences slots would
// run out of pages before they all got there.
func TestDraftKVHoldsEverySequenceWhole(t *testing.T) {
	a := model.Arch{Layers: 1, KVHeads: 1, HeadDim: 4}
	for _, c := range []struct{ seqs, ctx, page, budget, beams int }{
		{16, 60, 16, 21, 16},
		{8, 100, 16, 48, 16},
		{5, 33, 8, 3, 2},
		{3, 64, 16, 64, 16}, // 64 + 81: 145, a page and one slot past 9 pages
	} {
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			o := SpecOptions{Mode: SpecExec, Tree: spec.TreeOptions{Budget: c.budget, MaxDepth: 4, MaxBeams: c.beams, Branch: 4},
				MaxSeqs: c.seqs, Context: c.ctx, PageTokens: c.page}
			ko := o.DraftKV(a)
			if want := c.ctx + o.draftRoom(); ko.MaxSeqLen != want {
				t.Fatalf("MaxSeqLen %d, want context %d + headroom %d", ko.MaxSeqLen, c.ctx, o.draftRoom())
			}
			kv, err := kvcache.New(ko)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			for s := range int32(c.seqs) {
				var b input.Batch
				for p := range int32(ko.MaxSeqLen) {
					b.Add(1, p, s, false)
				}
				pass, err := kv.Begin(context.Background(), &b)
				if err != nil {
					t.Fatalf("sequence %d of %d at its full %d slots: %v", s, c.seqs, ko.MaxSeqLen, err)
				}
				if err := pass.End(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
