package pipelines_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/enginetest"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/pipelines"
	"github.com/sluicehq/sluice/tensor"
)

// TestGraphShape pins the nodes Build makes for the built-in chain: their
// names (bench stats and logs key on them), kinds, workers and capacities,
// and which run fused (the preset fuses the decode loop's stages: an edge
// into a fused node has no channel, so its producer's capacity leaves it out).
func TestGraphShape(t *testing.T) {
	l := enginetest.Synth(t, 1, tensor.F32, 0)
	tests := []struct {
		name string
		edit func(*pipelines.Pipeline)
		want []string
	}{
		{"greedy", func(*pipelines.Pipeline) {}, []string{
			"requests source 1/1", "tokenize then 1/1", "scheduler.admit then 1/1", "decode.enter loop.enter 1/0",
			"scheduler then 1/0 fused", "live split 1/1 fused", "decode.exit loop.exit 1/1", "end sink 1/0",
			"embed then 1/0 fused", "layers.00-01 then 1/0 fused", "head then 1/0 fused", "sample then 1/1 fused",
			"scheduler.retired source 1/1", "detokenize then 1/1", "results sink 1/0",
		}},
		{"unfused, one block a stage, buffers and workers", func(p *pipelines.Pipeline) {
			for i := range p.Stages {
				s := &p.Stages[i]
				s.Fuse = false
				s.Buffer = i + 2
				if s.Kind == pipelines.KindTokenize || s.Kind == pipelines.KindDetokenize {
					s.Workers = 3
				}
				if lp, ok := s.Params.(*pipelines.TransformerLayersParams); ok {
					lp.BlocksPerStage = 1
				}
			}
		}, []string{
			"requests source 1/1", "tokenize then 3/2", "scheduler.admit then 1/1", "decode.enter loop.enter 1/1",
			"scheduler then 1/1", "live split 1/2", "decode.exit loop.exit 1/1", "end sink 1/0",
			"embed then 1/4", "layers.00 then 1/5", "layers.01 then 1/5", "head then 1/6", "sample then 1/1",
			"scheduler.retired source 1/1", "detokenize then 3/8", "results sink 1/0",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := pipelines.Greedy()
			tc.edit(p)
			e := enginetest.Engine(t, l, p)
			var got []string
			for _, s := range e.NodeStats() {
				f := ""
				if s.Fused {
					f = " fused"
				}
				got = append(got, fmt.Sprintf("%s %s %d/%d%s", s.Name, s.Kind, s.Workers, s.Capacity, f))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("nodes (-want +got):\n%s\n%s", diff, strings.Join(got, "\n"))
			}
		})
	}
}
